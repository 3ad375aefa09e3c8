"""The verdict contract and the score arithmetic (docs/arena.md §7.4)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shoparena.validator.judge.types import (
    GATE_SCORES,
    PASS_SCORE,
    JudgeFailure,
    Verdict,
    coefficient,
    final_score,
    gate_for,
    mean_quality,
)

_META = {"judge": "rubric", "prompt_version": "v", "trace_sha256": "0" * 64}


@pytest.mark.parametrize(("q", "coeff"), [(0.0, 0.3), (0.1, 0.3875), (0.3, 0.5625), (0.5, 0.7375), (0.7, 0.9125),
                                          (0.8, 1.0), (0.9, 1.0), (1.0, 1.0), (0.79, 0.9912)])
def test_coefficient_matches_the_spec_table(q: float, coeff: float) -> None:
    assert coefficient(q) == coeff


def test_final_score_and_undefined_quality() -> None:
    assert final_score(0.6, 0.1) == round(0.6 * 0.3875, 4) == 0.2325
    assert final_score(0.5, 0.9) == 0.5
    assert final_score(1.0, 0.5) == 0.7375
    assert coefficient(None) is None and final_score(0.5, None) is None


def test_llm_free_floor() -> None:
    """The lowest judged value (0.1, G1 failed) gives the lowest reachable coefficient, 0.3875 (docs/arena.md §13)."""
    assert coefficient(GATE_SCORES[1]) == 0.3875
    assert min(coefficient(s) for s in (*GATE_SCORES.values(), PASS_SCORE)) == 0.3875


def test_gate_and_score_agree() -> None:
    assert [gate_for(s) for s in (0.1, 0.3, 0.5, 0.7, 0.9)] == [1, 2, 3, 4, None]
    with pytest.raises(ValueError):
        gate_for(0.8)
    Verdict(ok=True, score=0.7, gate=4, **_META)
    with pytest.raises(ValidationError):
        Verdict(ok=True, score=0.7, gate=3, **_META)
    with pytest.raises(ValidationError):
        Verdict(ok=True, score=0.8, gate=None, **_META)


def test_a_failed_verdict_is_never_a_score() -> None:
    failed = Verdict(ok=False, error="all judge models failed", **_META)
    assert failed.score is None and failed.gate is None
    with pytest.raises(ValidationError):
        Verdict(ok=False, score=0.1, gate=1, **_META)
    with pytest.raises(ValidationError):
        Verdict(ok=True, **_META)  # ok without a score
    ok = Verdict(ok=True, score=0.5, gate=3, **_META)
    assert mean_quality([ok, Verdict(ok=True, score=0.9, **_META)]) == 0.7
    assert mean_quality([]) is None
    with pytest.raises(JudgeFailure):
        mean_quality([ok, failed])
