"""The arena's knobs (docs/arena.md §2.2, §6, §8): cooldowns, qualifying and race sizes, the incumbent-relative
threshold with decay, X-of-Y validator agreement, leases, the daily cycle, eliminations, the code embargo and the
agentic-richness weight of the score (paper §9, ``docs/incentives.md``).

Times are seconds; the daily cycle is anchored in UTC (``qualifying_close_utc_s`` after midnight UTC), the code
embargo in ``embargo_timezone`` (the paper's "next weekday noon US/Pacific").
"""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DAY_S", "ArenaConfig"]

DAY_S = 86_400.0


class ArenaConfig(BaseModel):
    """Everything the arena decides by rule. Frozen: a running arena never changes its rules mid-race."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # -- submission (§2) ---------------------------------------------------------------------------------------
    cooldown_s: float = Field(12 * 3600.0, ge=0)
    """One submission per hotkey per window; an accepted submission or an integrity violation costs this."""
    reduced_cooldown_s: float = Field(3600.0, ge=0)
    """What a submission rejected for security violations only costs (ORO: "reduced", length unknown)."""
    max_code_bytes: int = Field(1_000_000, gt=0)
    """ORO's 1 MB file limit (enforced by the API before the gate sees the file)."""

    # -- qualifying (§8) ---------------------------------------------------------------------------------------
    qualifying_problems: int = Field(20, gt=0)
    qualifying_source: Literal["open", "static"] = "open"
    """``open``: a per-race draw from the open bank; ``static``: the static suite named ``qualifying_suite``."""
    qualifying_suite: str | None = None
    threshold_floor: float = Field(0.05, ge=0, le=1)
    """Absolute floor of the qualifying threshold (also the threshold while there is no incumbent)."""
    threshold_margin: float = Field(0.95, gt=0)
    """Challengers must reach ``margin × incumbent's qualifying score`` (third-party summary of ORO: 95 %)…"""
    threshold_decay_per_day: float = Field(0.02, ge=0, lt=1)
    """…times ``(1 − decay)^days`` where ``days`` = whole days since the incumbent was promoted."""

    # -- races (§8) --------------------------------------------------------------------------------------------
    race_problems: int = Field(30, gt=0)
    """Size of the hidden held-out draw each race runs on."""
    qualifying_close_utc_s: float = Field(18 * 3600.0, ge=0, lt=DAY_S)
    """Qualifying closes daily at this second of the UTC day (18:00 UTC = 10:00 PST / 11:00 PDT)."""
    min_qualifying_s: float = Field(3600.0, ge=0)
    """A race opened less than this before today's close closes at tomorrow's instead."""
    race_window_s: float = Field(4 * 3600.0, gt=0)
    """The race completes when every racer's work item closes or this long after qualifying closes (the
    unfinished ones are DNF)."""
    elimination_fraction: float = Field(0.5, ge=0, le=1)
    """A racer (not the winner) whose race score is below this fraction of the winner's is eliminated: that
    version never races again."""
    eliminate_dnf: bool = False
    """Also eliminate racers that did not finish (off by default: a DNF is usually validator trouble)."""

    # -- scoring (paper §9, docs/incentives.md) ---------------------------------------------------------------
    richness_weight: float = Field(0.0, ge=0, le=1)
    """The agentic-richness incentive: validators fold it into every run's score
    (``final = success_rate·coeff(q)·((1 − W) + W·R̄)``, ``shoparena.scoring.richness.fold``), so qualifying, races
    and weights all rank by it; a SUCCESS run scored with another weight is refused. 0 = ORO's scoring."""

    # -- validation (§6) ---------------------------------------------------------------------------------------
    required_successes: int = Field(2, ge=1)
    """X: successful runs from distinct validators that close a work item (its score is their mean)."""
    max_attempts: int = Field(3, ge=1)
    """Y: runs (successful or failed, from distinct validators) after which an item short of X successes fails."""
    lease_s: float = Field(300.0, gt=0)
    """A claim's lease; each heartbeat renews it; a lapsed lease returns the slot to the queue."""

    # -- code embargo (§8) -------------------------------------------------------------------------------------
    embargo_timezone: str = "America/Los_Angeles"
    embargo_hour: int = Field(12, ge=0, le=23)
    """The winner's code is released at the first ``embargo_hour``:00 on a weekday (Mon–Fri) in
    ``embargo_timezone`` strictly after ``promotion + embargo_min_s``."""
    embargo_min_s: float = Field(0.0, ge=0)

    @field_validator("embargo_timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (KeyError, ValueError) as exc:  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"unknown time zone {v!r}") from exc
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ArenaConfig:
        if self.max_attempts < self.required_successes:
            raise ValueError("max_attempts (Y) must be >= required_successes (X)")
        if self.qualifying_source == "static" and not self.qualifying_suite:
            raise ValueError("qualifying_source='static' needs qualifying_suite")
        return self
