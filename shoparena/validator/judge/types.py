"""The reasoning judge's contract: a verdict with cited spans, the judge protocol, and the score arithmetic.

docs/arena.md §7: a strict 4-gate decision tree over the trace and the gateway call log; the first failing gate sets
the score (G1 0.1, G2 0.3, G3 0.5, G4 0.7; all pass 0.9). Every verdict cites its evidence as character spans of
the *rendered trace* (see ``render.py``) with the quoted text; a verdict whose spans do not match the trace is not
accepted. A judge infrastructure failure is a verdict with ``ok=False`` — it never becomes a score.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shoparena.errors import BackendError

_FROZEN = ConfigDict(frozen=True, extra="forbid")

#: Gate → score when that gate is the first to fail; all gates passing scores 0.9.
GATE_SCORES: dict[int, float] = {1: 0.1, 2: 0.3, 3: 0.5, 4: 0.7}
PASS_SCORE = 0.9
SCORES: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)


class CitedSpan(BaseModel):
    """Evidence: ``trace[start:end] == text`` in the rendered trace the verdict was given on."""

    model_config = _FROZEN

    start: int
    end: int
    text: str
    gate: int | None = None
    """The gate this evidence bears on (1–4), when known."""


class Verdict(BaseModel):
    model_config = _FROZEN

    ok: bool
    """False: the judge failed (infrastructure, unparseable or uncited answers after retries). Not a score."""
    score: float | None = None
    """0.1 / 0.3 / 0.5 / 0.7 / 0.9 when ``ok``."""
    gate: int | None = None
    """First failing gate (1–4); None when all passed (or not ok)."""
    explanation: str = ""
    spans: list[CitedSpan] = Field(default_factory=list)
    judge: str
    """``rubric`` or the model URI(s) that produced the verdict."""
    prompt_version: str
    trace_sha256: str
    """Hash of the rendered trace the spans index into."""
    attempts: int = 1
    error: str | None = None
    agreement: dict[str, Any] | None = None
    """Pool judges: every model's score and whether they agreed."""

    @model_validator(mode="after")
    def _failure_is_never_a_score(self) -> Verdict:
        if not self.ok:
            if self.score is not None or self.gate is not None:
                raise ValueError("a failed verdict (ok=False) carries no score and no gate")
            return self
        if self.score is None or not any(abs(self.score - s) < 1e-9 for s in SCORES):
            raise ValueError(f"score {self.score!r} is not one of the rubric values {SCORES}")
        expected = next((g for g, s in GATE_SCORES.items() if abs(s - self.score) < 1e-9), None)
        if self.gate != expected:
            raise ValueError(f"score {self.score} means gate {expected}, not {self.gate}")
        return self


class JudgeFailure(BackendError):
    """The judge could not produce a verdict (infrastructure or unusable answers): the run is FAILED for retry."""


class Judge(Protocol):
    name: str
    prompt_version: str

    async def judge(self, query: str, steps: list[dict[str, Any]], calls: list[dict[str, Any]]) -> Verdict:
        """Judge one trajectory (``steps``: upstream/ORO step records; ``calls``: the gateway call log records)."""
        ...


def coefficient(q: float | None) -> float | None:
    """docs/arena.md §7.4: ``1.0 if q ≥ 0.8 else round(0.3 + q·0.7/0.8, 4)``; None when nothing was judged."""
    if q is None:
        return None
    return 1.0 if q >= 0.8 else round(0.3 + q * 0.7 / 0.8, 4)


def final_score(success_rate: float, q: float | None) -> float | None:
    """``round(success_rate · coeff(q), 4)``; None when the coefficient is undefined (nothing judged), except with
    nothing successful either: 0 · coeff is 0.0 for every coefficient."""
    c = coefficient(q)
    if c is None:
        return 0.0 if success_rate == 0 else None
    return round(success_rate * c, 4)


def gate_for(score: float) -> int | None:
    """The first failing gate a rubric value stands for (None for 0.9); ValueError for other values."""
    for gate, value in GATE_SCORES.items():
        if abs(value - score) < 1e-9:
            return gate
    if abs(score - PASS_SCORE) < 1e-9:
        return None
    raise ValueError(f"{score!r} is not a rubric value {SCORES}")


def mean_quality(verdicts: Iterable[Verdict]) -> float | None:
    """q: the mean judge score over judged problems (``round(·, 4)``); None when nothing was judged.

    Raises :class:`JudgeFailure` when any verdict failed: a failed judgement is never averaged in as a score."""
    scores: list[float] = []
    for v in verdicts:
        if not v.ok or v.score is None:
            raise JudgeFailure(f"judge failed ({v.judge}): {v.error or 'no verdict'}",
                               hint="the evaluation is FAILED and must be retried; judge failures are not scores")
        scores.append(v.score)
    return round(sum(scores) / len(scores), 4) if scores else None
