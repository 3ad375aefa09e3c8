"""The agentic-richness score on hand-built gateway call logs and traces, with hand-computed values
(``shoparena/scoring/richness.py``, ``docs/incentives.md``), and the fold of the arena's scoring option."""

from __future__ import annotations

import math
from typing import Any

import pytest

from shoparena.scoring.richness import check_weight, fold, richness, richness_of_record, scorer_id
from shoparena.validator.judge.types import final_score


# -- a tiny call-log / trace builder (the shapes the gateway and the episode runner write) ---------------------
class Log:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self._last_inference: int | None = None

    def _add(self, **record: Any) -> dict[str, Any]:
        record = {"run_id": "r", "seq": len(self.calls), "status": 200, "params": {}, "axis": None, "via": None,
                  "tool_calls": None, **record}
        self.calls.append(record)
        return record

    def think(self, *names: str, step: bool = True) -> None:
        """One completion emitting ``names`` (and, with ``step``, the trace step recording them)."""
        rec = self._add(kind="inference", path="/inference/chat/completions",
                        tool_calls=[{"name": n, "arguments": {}} for n in names])
        self._last_inference = rec["seq"]
        if step:
            self.step(*names)

    def step(self, *names: str) -> None:
        self.steps.append({"completion": {"content": "", "message": {
            "tool_call": [{"name": n, "parameters": {}} for n in names]}}, "extra_info": {"step": len(self.steps) + 1}})

    def search(self, tool: str = "find_product", axis: str = "A", status: int = 200, **params: str) -> None:
        self._add(kind="search", path=f"/search/{tool}", params=params, status=status,
                  axis=axis if status == 200 else None,
                  attributed_to=self._last_inference if axis == "A" else None)

    def subtask(self) -> None:
        """A narrow sub-task completion (intent, match score, narration): text, no tool calls."""
        self._add(kind="inference", path="/inference/chat/completions", tool_calls=[])


def pipeline_log() -> Log:
    """Axis B: Python searches and views, the LLM only answers sub-tasks; the trace *claims* the calls."""
    log = Log()
    log.subtask()
    log.search("find_product", axis="B", q="house slippers", price="27-")
    log.search("view_product_information", axis="B", product_ids="1,2,3")
    log.subtask()
    log.subtask()
    for names in (["find_product"], ["view_product_information"], ["recommend_product"], ["terminate"]):
        log.step(*names)
    return log


def simple_agentic_log() -> Log:
    """One search, then recommend and terminate: every call chosen by the model."""
    log = Log()
    log.think("find_product")
    log.search(q="house slippers", price="27-")
    log.think("recommend_product")
    log.think("terminate")
    return log


def rich_log() -> Log:
    """Search, view, a repeated query (same after normalisation), a second query in a shop, two checks, a voucher
    calculation, recommend, terminate — plus one Python-issued search."""
    log = Log()
    log.think("find_product")
    log.search(q="Drum sticks", price="175-")
    log.think("view_product_information")
    log.search("view_product_information", product_ids="11,12")
    log.think("find_product")
    log.search(q="drum   sticks ", price="175-")
    log.think("find_product")
    log.search(q="spices", shop_id="5")
    log.think("check_product_match", "check_product_match")
    log.search("view_product_information", product_ids="11")
    log.search("view_product_information", product_ids="21")
    log.search("find_product", axis="B", q="spices")  # a helper's own search: Python issued it
    log.think("calculate_voucher")
    log.think("recommend_product")
    log.think("terminate")
    return log


# -- components ------------------------------------------------------------------------------------------------
def test_a_pipeline_scores_zero_even_though_its_trace_claims_tool_calls() -> None:
    log = pipeline_log()
    r = richness(log.calls, log.steps)
    assert (r.searches, r.searches_a, r.queries, r.verifications, r.distinct_tools, r.decisions) == (2, 0, 0, 0, 0, 0)
    assert r.score == 0.0 and r.emitted == r.reformulation == r.verification == r.tools == r.depth == 0.0


def test_a_simple_agentic_episode() -> None:
    # e = 1/1; Q = 1 → r = 0; V = 0; T = 1 (find_product) → t = 1/3; D = 1 (recommend/terminate do not count)
    # richness = 0.4·1 + 0.15·(0 + 0 + 1/3 + 1/4) = 0.4 + 0.05 + 0.0375 = 0.4875
    log = simple_agentic_log()
    r = richness(log.calls, log.steps)
    assert (r.emitted, r.reformulation, r.verification, r.tools, r.depth) == (1.0, 0.0, 0.0, 0.3333, 0.25)
    assert (r.queries, r.distinct_tools, r.decisions) == (1, 1, 1)
    assert r.score == 0.4875


def test_a_rich_episode_with_one_python_search() -> None:
    # S = 7 searches, 6 axis A → e = 6/7; queries {("drum sticks", "175-"), ("spices", shop 5)} → Q = 2, r = 1/2
    # (the repeated "drum   sticks " is the same query); V = view + 2 checks + voucher = 4 → v = 1;
    # T = {find, view, check, voucher} = 4 → t = 1; D = 6 non-terminal model steps → d = 1
    # richness = 0.4·6/7 + 0.15·(0.5 + 1 + 1 + 1) = 0.342857 + 0.525 = 0.867857 → 0.8679
    log = rich_log()
    r = richness(log.calls, log.steps)
    assert (r.searches, r.searches_a, r.queries, r.verifications, r.distinct_tools, r.decisions) == (7, 6, 2, 4, 4, 6)
    assert (r.emitted, r.reformulation, r.verification, r.tools, r.depth) == (0.8571, 0.5, 1.0, 1.0, 1.0)
    assert r.score == 0.8679


def test_refused_searches_do_not_count() -> None:
    log = simple_agentic_log()
    log.search(axis="B", status=429, q="flood")  # rate-limited: no search happened
    assert richness(log.calls, log.steps).searches == 1 and richness(log.calls, log.steps).score == 0.4875


def test_depth_counts_only_trace_steps_a_completion_asked_for() -> None:
    # the model asked for find_product and recommend/terminate; the trace also holds a view step no completion
    # emitted (inserted by Python): D stays 1
    log = Log()
    log.think("find_product")
    log.search(q="mug")
    log.step("view_product_information")
    log.think("recommend_product")
    log.think("terminate")
    r = richness(log.calls, log.steps)
    assert r.decisions == 1 and r.depth == 0.25
    # a model decision missing from the trace does not count either (D is read from the trace)
    log2 = simple_agentic_log()
    assert richness(log2.calls, log2.steps[1:]).decisions == 0


def test_caps_make_padding_worthless() -> None:
    # ten more verification calls than the cap and twenty queries give no more than the caps
    log = rich_log()
    for i in range(20):
        log.think("find_product")
        log.search(q=f"query {i}")
        log.think("view_product_information")
        log.search("view_product_information", product_ids=str(i))
    r = richness(log.calls, log.steps)
    assert r.reformulation == r.verification == r.tools == r.depth == 1.0 and r.score <= 1.0


def test_empty_log_and_record_bodies() -> None:
    assert richness([], []).score == 0.0
    log = rich_log()
    assert richness_of_record({"call_log": log.calls, "steps": log.steps}).score == 0.8679
    assert richness_of_record({"call_log": None, "steps": None}).score == 0.0


# -- the scoring option ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("success_rate", [0.0, 0.1, 1 / 3, 0.5, 0.72, 1.0])
@pytest.mark.parametrize("q", [None, 0.1, 0.3, 0.5, 0.7, 0.9, 0.6333333])
def test_weight_zero_is_oros_final_score_exactly(success_rate: float, q: float | None) -> None:
    from shoparena.validator.judge.types import coefficient

    assert fold(success_rate, coefficient(q), [0.3, 0.9], 0.0) == final_score(success_rate, q)


def test_fold_by_hand() -> None:
    # 0.5 · 1.0 · ((1 − 0.5) + 0.5 · mean(1.0, 0.5)) = 0.5 · 0.875 = 0.4375
    assert fold(0.5, 1.0, [1.0, 0.5], 0.5) == 0.4375
    # no successful trajectory: R̄ = 0 → 0.5 · 1.0 · 0.5 = 0.25
    assert fold(0.5, 1.0, [], 0.5) == 0.25
    # weight 1: all of a successful trajectory's score depends on richness; a pipeline earns nothing
    assert fold(0.8, 0.9125, [0.0, 0.0], 1.0) == 0.0
    assert fold(0.5, None, [1.0], 0.5) is None  # nothing judged: no score, as ORO's
    # nothing judged and nothing successful: 0 · coeff is 0 whatever q would have been (docs/arena.md §7.4)
    assert fold(0.0, None, [], 0.0) == 0.0 and fold(0.0, None, [], 0.5) == 0.0


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf])
def test_weight_range(bad: float) -> None:
    with pytest.raises(ValueError, match="richness weight must be in"):
        check_weight(bad)
    with pytest.raises(ValueError):
        fold(0.5, 1.0, [1.0], bad)


def test_scorer_id_names_the_weight_and_keeps_todays_id_at_zero() -> None:
    assert scorer_id("shoparena-rule/1", 0.0) == "shoparena-rule/1"
    assert scorer_id("shoparena-rule/1", 0.25) == "shoparena-rule/1+richness=0.25"
    assert scorer_id("shoparena-rule/1", 1.0) == "shoparena-rule/1+richness=1"
