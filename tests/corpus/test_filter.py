"""Filter stages on hand-built traces: every reject reason with a trace that triggers it and a near miss that
passes, the judge / axis / outcome gates, the ranking computed by hand, the shape tie-break, duplicates,
determinism under input permutations, malformed input, and the real-tokenizer path."""

from __future__ import annotations

import json
import math
import random

import pytest
from pydantic import ValidationError

from shoparena.corpus.filter import (
    FORMAT_REASONS,
    AxisSplit,
    DedupRank,
    FilterConfig,
    FormatGate,
    JudgeGate,
    OutcomeGate,
    estimate_tokens,
    features,
    run_filters,
    score,
)
from shoparena.corpus.filter.rank import edit_distance
from shoparena.corpus.types import Rejection, Trajectory
from tests.corpus.test_filter_support import Trace, assert_counts, good, known


def check(t: Trajectory, **cfg: object) -> tuple[str, str] | None:
    return FormatGate(FilterConfig(**cfg), known_ids=known).check(t)  # type: ignore[arg-type]


def reason(t: Trajectory, **cfg: object) -> str | None:
    v = check(t, **cfg)
    return None if v is None else v[0]


# ── format gate: the five hard rejects ─────────────────────────────────────────────────────────────────────────

def test_good_trace_passes_every_gate() -> None:
    assert reason(good()) is None
    res = run_filters([good()], FilterConfig(), known_ids=known)
    assert [t.traj_id for t in res.kept] == ["t1"] and not res.rejections
    assert_counts(res, 1)


def test_unpaired_missing_response() -> None:
    t = good()
    del t.messages[2]  # the find_product response
    assert reason(t) == "unpaired_tool_call"
    tr = Trace().call("find_product", q="x").call("view_product_information", product_ids="111")
    tr.turn(("recommend_product", {"product_ids": "111"}), ("terminate", {"status": "success"}))
    tr.messages.pop()  # two calls in one turn, one response
    assert check(tr.row()) == ("unpaired_tool_call", "message 5: 2 tool call(s) answered by 1 tool response(s)")


def test_unpaired_orphan_response() -> None:
    t = good()
    t.messages.insert(1, {"role": "tool", "tool_call_id": "zz", "content": "stray"})
    assert reason(t) == "unpaired_tool_call"
    t = good()
    t.messages.insert(3, {"role": "tool", "tool_call_id": "zz", "content": "one too many"})
    assert reason(t) == "unpaired_tool_call"


def test_unpaired_wrong_id() -> None:
    t = good()
    t.messages[2]["tool_call_id"] = "not-c1"
    assert reason(t) == "unpaired_tool_call"


def test_unpaired_near_miss_parallel_calls_answered_out_of_order_and_idless() -> None:
    tr = Trace().turn(("find_product", {"q": "violin bow"}), ("find_product", {"q": "cello bow"}), answer=False)
    tr.messages += [{"role": "tool", "tool_call_id": "c2", "content": "b"},
                    {"role": "tool", "tool_call_id": "c1", "content": "a"}]
    assert reason(tr.call("view_product_information", product_ids="111").finish().row()) is None
    t = good()  # imports without ids pair by count
    for m in t.messages:
        m.pop("tool_call_id", None)
        for c in m.get("tool_calls") or ():
            c.pop("id")
    assert reason(t) is None


def test_recommend_count() -> None:
    twice = (Trace().call("find_product", q="x").call("recommend_product", product_ids="111")
             .call("recommend_product", product_ids="222").call("terminate", status="success").row())
    assert check(twice) == ("recommend_count", "recommend_product called 2 times, not once")
    never = Trace().call("find_product", q="x").call("terminate", status="failure").row()
    assert reason(never) == "recommend_count"
    # near miss: recommended once, in a turn together with terminate
    once = Trace().call("find_product", q="x").turn(("recommend_product", {"product_ids": "111"}),
                                                    ("terminate", {"status": "success"})).row()
    assert reason(once) is None


def test_recommend_unresolved() -> None:
    def rec(args: str) -> Trajectory:
        t = good()
        for m in t.messages:
            for c in m.get("tool_calls") or ():
                if c["function"]["name"] == "recommend_product":
                    c["function"]["arguments"] = args
        return t

    assert check(rec('{"product_ids": "111,999"}')) == (
        "recommend_unresolved", "recommended id(s) not in the catalog: 999")
    assert reason(rec('{"product_ids": "111')) == "recommend_unresolved"  # not JSON
    assert reason(rec('["111"]')) == "recommend_unresolved"  # JSON, not an object
    assert reason(rec('{"product_ids": " , "}')) == "recommend_unresolved"  # no id
    assert reason(rec('{"product_ids": [1.5]}')) == "recommend_unresolved"  # not an id
    assert reason(rec('{"status": "done"}')) == "recommend_unresolved"
    # near misses: every accepted form of known ids
    for ok in ('{"product_ids": "111, 222"}', '{"product_ids": ["111", 222]}', '{"product_id": "333"}',
               '{"product_ids": 111}'):
        assert reason(rec(ok)) is None, ok
    # without a catalog (or with check_ids off) only the shape is checked, and the report says so
    assert FormatGate(FilterConfig()).check(rec('{"product_ids": "999"}')) is None
    gate = FormatGate(FilterConfig(check_ids=False), known_ids=known)
    assert gate.check(rec('{"product_ids": "999"}')) is None and gate.report.notes["ids_checked"] is False


def test_think_then_stop() -> None:
    t = (Trace().call("find_product", q="x").call("recommend_product", product_ids="111")
         .turn(think="I should double check… (stops)").row())
    assert check(t) == ("think_then_stop",
                        "the trace ends on an assistant turn with no recommend_product / terminate")
    # near miss: a closing text turn after a completed terminate
    closing = good()
    closing.messages.append({"role": "assistant", "content": "Here are my recommendations."})
    assert reason(closing) is None


def test_too_long_with_the_estimate() -> None:
    t = good()
    n = estimate_tokens(t.messages, t.tools)
    assert reason(t, max_length=n) is None  # the limit is inclusive
    assert check(t, max_length=n - 1) == ("too_long", f"{n} tokens > max_length {n - 1}")


def test_estimate_is_deterministic_and_counts_digits_singly() -> None:
    a = [{"role": "user", "content": "abc" * 10}]
    b = [{"role": "user", "content": "1234567890" * 3}]
    assert estimate_tokens(a) == 6 + 10 and estimate_tokens(b) == 6 + 30
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert estimate_tokens(a, tools) > estimate_tokens(a) + 100
    assert estimate_tokens(good().messages) == estimate_tokens(good().messages)


def test_first_reason_wins_and_every_reason_is_reachable() -> None:
    seen = set()
    t = good()
    del t.messages[2]
    seen.add(reason(t))
    seen.add(reason(Trace().call("find_product", q="x").call("terminate", status="s").row()))
    seen.add(reason(good().__class__(**{**_fields(good()), "messages": _rec_ids(good(), "999")})))
    seen.add(reason(Trace().call("recommend_product", product_ids="111").turn(think="hm").row()))
    seen.add(reason(good(), max_length=5))
    assert seen == set(FORMAT_REASONS)


def _fields(t: Trajectory) -> dict[str, object]:
    return {f: getattr(t, f) for f in Trajectory.__slots__}  # type: ignore[attr-defined]


def _rec_ids(t: Trajectory, ids: str) -> list[dict[str, object]]:
    for m in t.messages:
        for c in m.get("tool_calls") or ():
            if c["function"]["name"] == "recommend_product":
                c["function"]["arguments"] = json.dumps({"product_ids": ids})
    return t.messages


def test_malformed_rows_are_counted_not_raised() -> None:
    bad = good("bad")
    bad.messages.append("not a message")  # type: ignore[arg-type]
    worse = good("worse")
    worse.messages = None  # type: ignore[assignment]
    res = run_filters([bad, worse, good("ok"), "junk", Rejection("normalize", "bad_json", "x", "f:1")],  # type: ignore[list-item]
                      FilterConfig(), known_ids=known)
    assert [t.traj_id for t in res.kept] == ["ok"]
    fmt = res.reports[1]
    assert fmt.rejected == {"malformed": 2}
    assert {(r.stage, r.reason) for r in res.rejections} == {
        ("format", "malformed"), ("filter", "not_a_trajectory"), ("normalize", "bad_json")}
    assert_counts(res, 3)


# ── judge, axis, outcome ────────────────────────────────────────────────────────────────────────────────────────

def test_judge_gate() -> None:
    rows = [good("lo", judge_score=0.49), good("eq", judge_score=0.5), good("coef", judge_score=None,
                                                                             coefficient=0.9),
            good("coef-lo", judge_score=None, coefficient=0.2), good("none", judge_score=None),
            good("nan", judge_score=math.nan)]
    gate = JudgeGate(FilterConfig())
    assert [t.traj_id for t in gate.run(rows)] == ["eq", "coef", "none"]
    assert gate.report.rejected == {"judge_below": 2, "judge_invalid": 1}
    assert gate.report.notes["read_from"] == {"judge_score": 3, "coefficient": 2, "missing": 1}
    strict = JudgeGate(FilterConfig(judge_missing="reject", min_judge_score=0.0))
    assert [t.traj_id for t in strict.run(rows)] == ["lo", "eq", "coef", "coef-lo"]
    assert strict.report.rejected == {"judge_missing": 1, "judge_invalid": 1}


def test_axis_split_routes_b_and_counts_by_source() -> None:
    rows = [good("a"), good("b", axis="B"), good("m", axis="mixed"), good("n", axis="none"), good("u", axis=None)]
    rows.append(Trajectory(**{**_fields(good("bt", axis="B")), "axis_source": "text"}))
    split = AxisSplit(FilterConfig())
    assert [t.traj_id for t in split.run(rows)] == ["a"]
    assert [t.traj_id for t in split.axis_b] == ["b", "bt"]
    assert split.report.rejected == {"axis_b": 2, "axis_mixed": 1, "axis_none": 1, "axis_unknown": 1}
    assert split.by_source == {"call_log": {"A": 1, "B": 1, "mixed": 1, "none": 1}, "text": {"B": 1},
                               "unknown": {"unknown": 1}}
    both = AxisSplit(FilterConfig(axis_keep=("A", "B")))
    assert [t.traj_id for t in both.run(rows)] == ["a", "b", "bt"] and not both.axis_b


@pytest.mark.parametrize(("require", "allow", "kept", "failed", "rejected"), [
    (False, True, ["ok", "no", "un"], [], {}),
    (False, False, ["ok", "un"], [], {"outcome_failed": 1}),
    (True, True, ["ok"], ["no"], {"outcome_failed": 1, "outcome_unscored": 1}),
    (True, False, ["ok"], [], {"outcome_failed": 1, "outcome_unscored": 1}),
])
def test_outcome_gate(require: bool, allow: bool, kept: list[str], failed: list[str],
                      rejected: dict[str, int]) -> None:
    gate = OutcomeGate(FilterConfig(require_success=require, allow_failed=allow))
    rows = [good("ok"), good("no", success=False), good("un", success=None)]
    assert [t.traj_id for t in gate.run(rows)] == kept
    assert [t.traj_id for t in gate.failed] == failed
    assert gate.report.rejected == rejected


def test_config_is_validated_and_frozen() -> None:
    with pytest.raises(ValidationError):
        FilterConfig(per_problem=3)
    with pytest.raises(ValidationError):
        FilterConfig(min_judge_score=1.5)
    with pytest.raises(ValidationError):
        FilterConfig(judge_missing="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        FilterConfig().max_length = 5  # type: ignore[misc]


# ── dedup and ranking ──────────────────────────────────────────────────────────────────────────────────────────

def _r1() -> Trajectory:  # find → view → recommend → terminate
    return good("r1", q="violin bow")


def _r2() -> Trajectory:  # two reformulations + check_product_match
    return (Trace().call("find_product", q="Violin  bow!").call("find_product", q="violin bow full size")
            .call("check_product_match", product_id="111", requirements="{}").finish().row("r2"))


def _r3() -> Trajectory:  # paging one query four times: a loop
    tr = Trace()
    for page in (1, 2, 3, 4):
        tr.call("find_product", q="violin bow", page=page)
    return tr.finish().row("r3")


def _r4() -> Trajectory:  # no thinking at all, no verification
    return Trace().call("find_product", think="", q="violin bow").finish(think="").row("r4")


def test_features_and_scores_by_hand() -> None:
    f1, f2, f3, f4 = (features(t) for t in (_r1(), _r2(), _r3(), _r4()))
    # depth, reformulations, verified, repeat penalty
    assert (f1.depth, f1.reformulations, f1.verified, f1.repeat_penalty) == (4, 1, True, 0)
    assert (f2.depth, f2.reformulations, f2.verified, f2.repeat_penalty) == (5, 2, True, 0)
    assert (f3.depth, f3.reformulations, f3.verified, f3.repeat_penalty) == (6, 1, False, 2)
    assert (f4.depth, f4.reformulations, f4.verified, f4.repeat_penalty) == (0, 1, False, 0)
    # score = min(depth, 12) + 2·min(reformulations, 6) + 4·verified − 2·repeat_penalty
    assert [f.score for f in (f1, f2, f3, f4)] == [4 + 2 + 4, 5 + 4 + 4, 6 + 2 - 4, 0 + 2]
    assert f3.shape == ("find_product",) * 4 + ("recommend_product", "terminate")
    assert score(20, 9, False, 0) == 12 + 12  # caps


def test_verification_needs_a_follow_up_view_before_recommending() -> None:
    view_first = (Trace().call("view_product_information", product_ids="111").call("find_product", q="x")
                  .finish().row())
    after = (Trace().call("find_product", q="x").call("recommend_product", product_ids="111")
             .call("view_product_information", product_ids="111").call("terminate", status="success").row())
    assert not features(view_first).verified and not features(after).verified


def test_ranking_keeps_the_best_two_in_order() -> None:
    res = run_filters([_r4(), _r3(), _r1(), _r2()], FilterConfig(), known_ids=known)
    assert [t.traj_id for t in res.kept] == ["r2", "r1"]
    dedup = res.reports[3]
    assert dedup.rejected == {"ranked_out": 2} and dedup.notes["scores"] == {"r2": 13, "r1": 10}
    assert {r.traj_id for r in res.rejections if r.reason == "ranked_out"} == {"r3", "r4"}
    one = run_filters([_r4(), _r3(), _r1(), _r2()], FilterConfig(per_problem=1), known_ids=known)
    assert [t.traj_id for t in one.kept] == ["r2"]
    assert_counts(res, 4)


def _fvrt(tid: str, q: str) -> Trajectory:
    return good(tid, q=q)


def _fcrt(tid: str) -> Trajectory:
    return (Trace().call("find_product", q="violin bow")
            .call("check_product_match", product_id="111", requirements="{}").finish().row(tid))


def test_tie_break_picks_different_shapes() -> None:
    rows = [_fvrt("a", "violin bow"), _fvrt("b", "viola bow"), _fvrt("c", "cello bow"), _fcrt("z")]
    assert len({features(t).score for t in rows}) == 1  # all tied at 10
    kept = run_filters(rows, FilterConfig(), known_ids=known).kept
    assert [t.traj_id for t in kept] == ["a", "z"]  # not "a", "b": z has the other shape
    # per_problem=1: the smallest id among the tied
    assert [t.traj_id for t in run_filters(rows, FilterConfig(per_problem=1), known_ids=known).kept] == ["a"]


def test_tie_break_at_the_second_level_prefers_the_farthest_shape() -> None:
    best = _r2()  # F F C R T, 13, alone at the top
    near = (Trace().call("find_product", q="violin bow").call("find_product", q="violin bow full size")
            .call("check_product_match", think="", product_id="111", requirements="{}").finish().row("m"))
    far = (Trace().call("find_product", q="violin bow").call("find_product", q="cello bow")
           .call("view_product_information", think="", product_ids="111").finish().row("y"))
    # both: depth 4 (one turn without a think), 2 queries, verified → 4 + 4 + 4 = 12
    assert features(near).score == features(far).score == 12
    assert edit_distance(features(near).shape, features(best).shape) == 0  # same shape as the first pick
    assert edit_distance(features(far).shape, features(best).shape) == 1  # C → V
    kept = run_filters([near, far, best], FilterConfig(), known_ids=known).kept
    assert [t.traj_id for t in kept] == ["r2", "y"]  # not the smaller id "m"


def test_exact_duplicates_keep_the_smallest_id() -> None:
    a, b = good("b-dup"), good("a-dup")
    b.messages[1]["reasoning_content"] = "different words, same actions"
    c = good("c-other", q="cello bow")
    for order in ([a, b, c], [c, b, a]):
        stage = DedupRank(FilterConfig(per_problem=2))
        kept = [t.traj_id for t in stage.run(order)]
        assert sorted(kept) == ["a-dup", "c-other"]
        assert stage.report.rejected == {"duplicate": 1}
        assert stage.report.examples["duplicate"] == ["b-dup"]


def test_rows_without_problem_id_group_by_query() -> None:
    rows = [good("x1", problem_id=None), good("x2", problem_id=None, q="cello"), good("x3", problem_id=None,
                                                                                     q="viola")]
    other = Trace("another query").call("find_product", q="q").finish().row("x4", problem_id=None)
    kept = [t.traj_id for t in run_filters([*rows, other], FilterConfig(per_problem=1), known_ids=known).kept]
    assert sorted(kept) == ["x1", "x4"]


def _world() -> list[Trajectory]:
    rows = []
    for p in range(6):
        pid = f"p{p}"
        rows += [_fvrt(f"{pid}-a", "violin bow"), _fvrt(f"{pid}-b", "viola bow"), _fcrt(f"{pid}-z")]
        rows += [Trajectory(**{**_fields(r), "traj_id": f"{pid}-{r.traj_id}", "problem_id": pid})
                 for r in (_r1(), _r2(), _r3(), _r4())]
        for r in rows[-7:-4]:
            r.problem_id = pid
        rows.append(good(f"{pid}-dup", problem_id=pid))  # duplicate of p-a's calls and answer
        rows.append(good(f"{pid}-B", problem_id=pid, axis="B"))
        rows.append(good(f"{pid}-low", problem_id=pid, judge_score=0.1))
        rows.append(good(f"{pid}-fail", problem_id=pid, q=f"bow {p}", success=False))
    return rows


def test_determinism_under_input_permutations() -> None:
    rows = _world()
    base = run_filters(rows, FilterConfig(), known_ids=known)
    assert_counts(base, len(rows))
    assert len(base.kept) == 12
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        res = run_filters(shuffled, FilterConfig(), known_ids=known)
        assert [t.traj_id for t in res.kept] == [t.traj_id for t in base.kept]
        assert {t.traj_id for t in res.axis_b} == {t.traj_id for t in base.axis_b}
        assert sorted((r.stage, r.reason, r.traj_id) for r in res.rejections) == sorted(
            (r.stage, r.reason, r.traj_id) for r in base.rejections)
        assert [(r.stage, r.seen, r.kept, r.rejected) for r in res.reports] == [
            (r.stage, r.seen, r.kept, r.rejected) for r in base.reports]


# ── the real tokenizer path ────────────────────────────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers")
    from shoparena.llm.tiny import build_tiny_qwen3

    return str(build_tiny_qwen3(tmp_path_factory.mktemp("tiny")))


def test_too_long_with_a_real_tokenizer(tiny_tokenizer: str) -> None:
    from transformers import AutoTokenizer

    t = good()
    tok = AutoTokenizer.from_pretrained(tiny_tokenizer)
    n = len(tok(tok.apply_chat_template(t.messages, tokenize=False), add_special_tokens=False)["input_ids"])
    assert n > 20
    assert reason(t, tokenizer=tiny_tokenizer, max_length=n) is None
    assert check(t, tokenizer=tiny_tokenizer, max_length=n - 1) == ("too_long", f"{n} tokens > max_length {n - 1}")


def test_a_missing_tokenizer_is_a_clear_error(tmp_path: object) -> None:
    pytest.importorskip("transformers")
    from shoparena.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        check(good(), tokenizer=str(tmp_path))
