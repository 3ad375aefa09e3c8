"""What the arena needs from its neighbours, as narrow protocols plus the adapters over the real modules:

- a problem-bank set (``arena.banks.BankSet``): ``draw(partition, n, seed)`` and the static suites;
- the submission gate (``arena.gate.check_submission``), run against every bank's phrases and product ids and
  the released agents' code;
- the chain (``arena.chain``): ``block`` and ``metagraph().hotkeys`` (registration), optionally ``block_hash``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from shoparena.arena.state.types import Violation
from shoparena.tasks.types import Problem

__all__ = ["Banks", "Gate", "GateVerdict", "all_problems", "bank_gate", "registered_hotkeys", "static_problems"]


class Banks(Protocol):
    def draw(self, partition: str, n: int, seed: int) -> list[Problem]: ...


class GateVerdict(Protocol):
    """The parts of ``gate.GateReport`` the arena reads."""

    accepted: bool
    violations: Sequence[Any]
    cooldown: str
    similarity: float | None
    similar_to: str | None


#: ``gate(code, released)`` where ``released`` maps a released agent's name to its code.
Gate = Callable[[bytes, dict[str, str]], GateVerdict]


def violations_of(report: GateVerdict) -> list[Violation]:
    return [Violation(rule=v.rule, severity=v.severity, message=v.message, line=v.line) for v in report.violations]


def _suite_problems(suite: Any) -> list[Problem]:
    if isinstance(suite, Iterable) and not isinstance(suite, (str, bytes, dict)):
        return list(suite)
    return list(suite.problems)


def static_problems(banks: Any, name: str) -> list[Problem]:
    """The problems of static suite ``name`` (``banks.static_suites()`` maps names to suites or problem lists)."""
    suites = banks.static_suites()
    if name not in suites:
        raise KeyError(f"no static suite {name!r}; have {sorted(suites)}")
    return _suite_problems(suites[name])


def all_problems(banks: Any) -> list[Problem]:
    """Every problem of every bank partition the bank set exposes (for the gate's phrase and id checks)."""
    out: dict[str, Problem] = {}
    for attr in ("open_problems", "held_out_problems", "retired_problems"):
        fn = getattr(banks, attr, None)
        if callable(fn):
            out.update((p.problem_id, p) for p in fn())
    suites_fn = getattr(banks, "static_suites", None)
    if callable(suites_fn):
        for suite in suites_fn().values():
            out.update((p.problem_id, p) for p in _suite_problems(suite))
    return list(out.values())


def bank_gate(banks: Any) -> Gate:
    """The real gate (``arena.gate.check_submission``) against all banks. Phrase index and id set are built
    on first use and kept (banks rotate between partitions, but the union of partitions is what matters)."""
    cache: dict[str, Any] = {}

    def gate(code: bytes, released: dict[str, str]) -> GateVerdict:
        from shoparena.arena.gate import PhraseIndex, check_submission

        if "phrases" not in cache:
            problems = all_problems(banks) if banks is not None else []
            cache["phrases"] = PhraseIndex.from_problems(problems)
            cache["ids"] = {pid for p in problems for pid in p.gt_ids()}
        return check_submission(code, phrases=cache["phrases"], product_ids=cache["ids"], released=released)

    return gate


def registered_hotkeys(chain: Any) -> set[str] | None:
    """The hotkeys registered on ``chain`` now (None without a chain: everyone counts as registered)."""
    if chain is None:
        return None
    return set(chain.metagraph().hotkeys)
