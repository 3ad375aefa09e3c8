"""The race rules as pure functions (docs/arena.md §8): the daily calendar, the qualifying threshold with decay, the
commit-reveal seed, racer selection (one per hotkey, incumbent auto-qualifies), ranking, eliminations and the
code-embargo calendar. The database side of the state machine is ``arena/state/racing.py``.

State machine (driven by ``Arena.tick()``):

    QUALIFYING_OPEN --(now ≥ qualifying_closes_at: reveal, draw, pick racers)--> RACE_RUNNING
    RACE_RUNNING --(every race item closed, or now ≥ race_deadline_at)--> RACE_COMPLETE (+ next race opens)

Seed: at open the arena commits ``sha256(secret)``; at close it reads a beacon (the chain's block hash, or a
recorded stand-in derived from the block number) and reveals ``world_seed = sha256(secret ‖ beacon)``; the
held-out draw uses ``seed_int(world_seed)``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict

from shoparena.arena.config import DAY_S, ArenaConfig

__all__ = [
    "Candidate",
    "Racer",
    "beacon_for",
    "commitment",
    "eliminated",
    "mean",
    "next_qualifying_close",
    "qualifying_seed",
    "qualifying_threshold",
    "race_secret",
    "rank",
    "release_at",
    "seed_int",
    "select_racers",
    "verify_commitment",
    "world_seed",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


# -- calendar ----------------------------------------------------------------------------------------------------
def next_qualifying_close(opened_at: float, config: ArenaConfig) -> float:
    """The first daily close (``qualifying_close_utc_s`` into a UTC day) at least ``min_qualifying_s`` after
    ``opened_at``."""
    t = math.floor(opened_at / DAY_S) * DAY_S + config.qualifying_close_utc_s
    while t < opened_at + config.min_qualifying_s:
        t += DAY_S
    return t


def release_at(promoted_at: float, config: ArenaConfig) -> float:
    """When a winner promoted at ``promoted_at`` has its code released: the first weekday (Mon–Fri)
    ``embargo_hour``:00 in ``embargo_timezone`` strictly after ``promoted_at + embargo_min_s``. Wall-clock
    arithmetic in the zone, so the release is at local noon on both sides of a DST change."""
    tz = ZoneInfo(config.embargo_timezone)
    earliest = promoted_at + config.embargo_min_s
    day: date = datetime.fromtimestamp(earliest, tz).date()
    while True:
        candidate = datetime.combine(day, time(config.embargo_hour), tzinfo=tz)
        if candidate.weekday() < 5 and candidate.timestamp() > earliest:
            return candidate.timestamp()
        day += timedelta(days=1)


# -- threshold ---------------------------------------------------------------------------------------------------
def qualifying_threshold(incumbent_score: float | None, reign_started_at: float | None, now: float,
                         config: ArenaConfig) -> float:
    """``max(floor, margin × incumbent × (1 − decay)^days)``, days = whole days since the incumbent's promotion;
    just the floor while there is no incumbent."""
    if incumbent_score is None or reign_started_at is None:
        return config.threshold_floor
    days = max(0, math.floor((now - reign_started_at) / DAY_S))
    decayed = config.threshold_margin * incumbent_score * (1.0 - config.threshold_decay_per_day) ** days
    return max(config.threshold_floor, decayed)


# -- commit-reveal seed ------------------------------------------------------------------------------------------
def race_secret(seed: int | None, race_id: str) -> str:
    """A 32-byte secret (hex): random, or derived from ``seed`` for reproducible simulations."""
    if seed is None:
        import secrets

        return secrets.token_hex(32)
    return hashlib.sha256(f"shoparena-race-secret:{seed}:{race_id}".encode()).hexdigest()


def qualifying_seed(seed: int | None, race_id: str) -> int:
    """The seed of a race's qualifying draw from the open bank (public data: no need to hide it)."""
    return seed_int(hashlib.sha256(f"shoparena-qualifying:{seed or 0}:{race_id}".encode()).hexdigest())


def commitment(secret_hex: str) -> str:
    return hashlib.sha256(bytes.fromhex(secret_hex)).hexdigest()


def verify_commitment(commitment_hex: str, secret_hex: str) -> bool:
    return commitment(secret_hex) == commitment_hex


def world_seed(secret_hex: str, beacon_hex: str) -> str:
    return hashlib.sha256(bytes.fromhex(secret_hex) + bytes.fromhex(beacon_hex)).hexdigest()


def seed_int(world_seed_hex: str) -> int:
    """The integer seed handed to ``banks.draw``: the world seed's first 8 bytes."""
    return int(world_seed_hex[:16], 16)


def beacon_for(chain: Any, race_id: str, at: float) -> tuple[int | None, str, str]:
    """``(block, beacon_hex, source)`` read at qualifying close. A chain exposing ``block_hash(block)`` gives a
    real beacon; otherwise the stand-in ``sha256("shoparena-beacon:" block)`` (no chain: the close time and race id)
    is recorded — deterministic, so simulations replay, but predictable, so not for a real subnet."""
    if chain is None:
        data = f"shoparena-beacon:none:{race_id}:{at:.3f}".encode()
        return None, hashlib.sha256(data).hexdigest(), "standin:no-chain"
    block = int(chain.block)
    block_hash = getattr(chain, "block_hash", None)
    if callable(block_hash):
        value = block_hash(block)
        raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)
        return block, hashlib.sha256(raw).hexdigest(), "chain:block_hash"
    return block, hashlib.sha256(f"shoparena-beacon:{block}".encode()).hexdigest(), "standin:block-number"


# -- racers ------------------------------------------------------------------------------------------------------
class Candidate(BaseModel):
    """An agent version that could race."""

    model_config = _FROZEN

    agent_version_id: str
    hotkey: str
    qualifying_score: float | None
    state: str
    eliminated: bool = False


class Racer(BaseModel):
    model_config = _FROZEN

    agent_version_id: str
    hotkey: str
    qualification_type: Literal["INCUMBENT", "SCORED"]
    qualifying_score: float | None


def _ok(c: Candidate, threshold: float) -> bool:
    return (c.state == "ELIGIBLE" and not c.eliminated and c.qualifying_score is not None
            and c.qualifying_score >= threshold)


def select_racers(candidates: Iterable[Candidate], *, threshold: float, incumbent: Candidate | None = None,
                  pins: Mapping[str, str] | None = None, registered: set[str] | None = None) -> list[Racer]:
    """One racer per hotkey. A hotkey's racer is its pin when the pinned version still qualifies, else its best
    version ≥ threshold (score desc, then agent_version_id asc). The incumbent qualifies without the threshold and
    is its hotkey's racer unless that miner pinned another qualifying version. Hotkeys missing from
    ``registered`` (when given) do not race. Sorted by agent_version_id."""
    pins = pins or {}
    by_hotkey: dict[str, list[Candidate]] = {}
    for c in candidates:
        if registered is None or c.hotkey in registered:
            by_hotkey.setdefault(c.hotkey, []).append(c)
    racers: dict[str, Racer] = {}
    if incumbent is not None and (registered is None or incumbent.hotkey in registered):
        racers[incumbent.hotkey] = Racer(agent_version_id=incumbent.agent_version_id, hotkey=incumbent.hotkey,
                                         qualification_type="INCUMBENT",
                                         qualifying_score=incumbent.qualifying_score)
    for hotkey, versions in by_hotkey.items():
        qualified = [c for c in versions if _ok(c, threshold)]
        pinned = [c for c in qualified if c.agent_version_id == pins.get(hotkey)]
        if pinned:
            choice = pinned[0]
        elif hotkey in racers or not qualified:
            continue
        else:
            choice = min(qualified, key=lambda c: (-(c.qualifying_score or 0.0), c.agent_version_id))
        if hotkey in racers and racers[hotkey].agent_version_id == choice.agent_version_id:
            continue
        racers[hotkey] = Racer(agent_version_id=choice.agent_version_id, hotkey=hotkey,
                               qualification_type="SCORED", qualifying_score=choice.qualifying_score)
    return sorted(racers.values(), key=lambda r: r.agent_version_id)


def rank(results: Mapping[str, float | None]) -> list[tuple[str, float | None, int | None]]:
    """``(agent_version_id, race_score, rank)`` ordered by score desc then id asc; DNF (None) last, unranked."""
    finished = sorted(((v, s) for v, s in results.items() if s is not None), key=lambda x: (-x[1], x[0]))
    out: list[tuple[str, float | None, int | None]] = [(v, s, i + 1) for i, (v, s) in enumerate(finished)]
    out.extend((v, None, None) for v in sorted(v for v, s in results.items() if s is None))
    return out


def eliminated(results: Mapping[str, float | None], winner: str | None, config: ArenaConfig) -> list[str]:
    """Racers eliminated by the race: below ``elimination_fraction`` of the winner's score (and DNF when
    ``eliminate_dnf``). The winner never is."""
    if winner is None:
        return sorted(v for v, s in results.items() if s is None) if config.eliminate_dnf else []
    bar = config.elimination_fraction * (results[winner] or 0.0)
    out = [v for v, s in results.items()
           if v != winner and ((s is None and config.eliminate_dnf) or (s is not None and s < bar))]
    return sorted(out)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
