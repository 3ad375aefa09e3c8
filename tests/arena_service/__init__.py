"""Helpers for the arena service tests: small problem banks, a deterministic stand-in gate (the real gate has its
own tests), identities on a LocalChain, an arena factory, and canned validator results."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

from shoparena.arena.config import ArenaConfig
from shoparena.arena.service import Arena
from shoparena.arena.state.types import CompleteRequest, ScoreComponents
from shoparena.clock import ManualClock
from shoparena.tasks.types import Problem

#: Wednesday 2026-01-07 00:00:00 UTC.
T0 = 1_767_744_000.0
GOOD = "def agent_main(problem):\n    return []\n"


def problems(prefix: str, n: int) -> list[Problem]:
    return [Problem(problem_id=f"{prefix}{i:03d}", bucket="product", query=f"find item {prefix}{i}")
            for i in range(n)]


class TinyBanks:
    """``draw(partition, n, seed)`` over an open and a held-out list, ordered by sha256(seed, id)."""

    def __init__(self, n_open: int = 40, n_held: int = 40) -> None:
        self.parts = {"open": problems("open-", n_open), "held_out": problems("held-", n_held)}
        self.static = {"core": problems("static-", 8)}
        self.draws: list[tuple[str, int, Any]] = []
        self.used: list[str] = []

    def draw(self, partition: str, n: int, seed: Any) -> list[Problem]:
        self.draws.append((partition, n, seed))
        key = lambda p: hashlib.sha256(f"{seed}:{p.problem_id}".encode()).hexdigest()  # noqa: E731
        return sorted(self.parts[partition], key=key)[:n]

    def static_suites(self) -> dict[str, list[Problem]]:
        return self.static

    def mark_used(self, ids: list[str]) -> None:
        self.used.extend(ids)


def _v(rule: str, severity: str, line: int) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, severity=severity, message=f"{rule} on line {line}", line=line)


def stub_gate(code: bytes, released: dict[str, str]) -> SimpleNamespace:
    """Marker-driven: ``eval(`` → security, ``PRODUCT_ID`` → integrity, ``SYNTAX!`` → format."""
    text = code.decode("utf-8", "replace")
    found = []
    for i, line in enumerate(text.splitlines(), 1):
        if "eval(" in line:
            found.append(_v("banned_call", "security", i))
        if "PRODUCT_ID" in line:
            found.append(_v("product_id", "integrity", i))
        if "SYNTAX!" in line:
            found.append(_v("parse", "format", i))
    sev = {v.severity for v in found}
    cooldown = "full" if "integrity" in sev else ("reduced" if sev else "none")
    similar = next((name for name, c in released.items() if c == text), None)
    return SimpleNamespace(accepted=not found, violations=found, cooldown=cooldown,
                           similarity=1.0 if similar else (0.0 if released else None), similar_to=similar)


def config(**kw: Any) -> ArenaConfig:
    base: dict[str, Any] = {"qualifying_problems": 5, "race_problems": 6, "required_successes": 2,
                            "max_attempts": 3, "lease_s": 60.0}
    base.update(kw)
    return ArenaConfig(**base)


def make_arena(url: str, *, clock: ManualClock | None = None, chain: Any = None, banks: Any = None,
               cfg: ArenaConfig | None = None, seed: int | None = 7) -> Arena:
    return Arena(url, chain=chain, banks=banks if banks is not None else TinyBanks(),
                 clock=clock or ManualClock(T0), config=cfg or config(), gate=stub_gate, seed=seed)


def ok(score: float, n: int = 5) -> CompleteRequest:
    return CompleteRequest(terminal_status="SUCCESS", validator_score=score,
                           score_components=ScoreComponents(total_problems=n, success_rate=score))


def failed(reason: str = "judge infrastructure failure") -> CompleteRequest:
    return CompleteRequest(terminal_status="FAILED", failure_reason=reason)


def evaluate_all(arena: Arena, validators: list[str], score_of: dict[str, float], *, n: int | None = None) -> int:
    """Let the validators claim and complete everything open, scoring each version by ``score_of[version]``
    (missing = 0.1). Returns how many runs completed."""
    done = 0
    progress = True
    while progress:
        progress = False
        for v in validators:
            work = arena.claim_work(v)
            if work is None:
                continue
            size = n if n is not None else len(work.problem_ids)
            arena.complete(work.eval_run_id, v, ok(score_of.get(work.agent_version_id, 0.1), size))
            done += 1
            progress = True
    return done
