"""Axis-B → axis-A rewrite on the real pipeline records of the ``corpus_world`` store: the real calls, observations
and recommendation survive verbatim (checked against the gateway call log), the reasoning states only facts of the
query and the observations, the output passes the format gate, it is deterministic, and every rejection reason is
counted rather than raised."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest

from shoparena.corpus.rewrite import (
    TemplateRewriter,
    arewrite_all,
    catalog_observer,
    estimate_tokens,
    grounding_errors,
    plan_rewrite,
    rewrite_all,
    sources_for,
)
from shoparena.corpus.types import Rejection, Trajectory, trajectory_id
from shoparena.store import open_store

try:  # the normaliser is written alongside; fall back to a minimal reader of a record body
    from shoparena.corpus.normalize import from_record as _from_record
except ImportError:  # pragma: no cover - only while corpus/normalize is absent
    _from_record = None


def to_row(body: dict[str, Any]) -> Trajectory:
    if _from_record is not None:
        row = _from_record(body)
        assert isinstance(row, Trajectory), row
        return row
    messages = [{k: v for k, v in m.items() if k != "step_meta"} for m in body["messages"]]
    return Trajectory(traj_id=body["record_id"], source="store", messages=messages, tools=[],
                      problem_id=body["problem_id"], bucket=body.get("bucket"), cluster_id=body.get("cluster_id"),
                      success=body.get("success"), judge_score=body.get("judge_score"),
                      coefficient=body.get("coefficient"), axis=body.get("axis"), axis_source="call_log",
                      call_log=body.get("call_log"), outcome=body.get("outcome"),
                      provenance={"record_id": body["record_id"], "agent_id": body["agent_id"]})


@pytest.fixture(scope="module")
def rows(corpus_world) -> list[Trajectory]:
    with open_store(corpus_world.store_url) as store:
        return [to_row(orjson.loads(b)) for b in store.bodies()]


@pytest.fixture(scope="module")
def pipeline(rows) -> list[Trajectory]:
    out = [r for r in rows if r.provenance.get("agent_id") == "pipeline"]
    assert len(out) == 12 and all(r.axis == "B" for r in out)
    return out


@pytest.fixture(scope="module")
def rewritten(pipeline) -> list[Trajectory]:
    kept, report = rewrite_all(pipeline, TemplateRewriter())
    assert report.seen == report.kept == len(pipeline) and not report.rejected, report.to_dict()
    return kept


def calls_of(t: Trajectory) -> list[tuple[str, str, str, str]]:
    """(id, name, arguments, observation) of every tool call, the observation being the tool message answering it."""
    answers = {m["tool_call_id"]: m["content"] for m in t.messages if m.get("role") == "tool"}
    return [(c["id"], c["function"]["name"], c["function"]["arguments"], answers.get(c["id"], "<none>"))
            for c in t.tool_calls()]


def searches(t: Trajectory) -> list[dict[str, Any]]:
    return [r for r in t.call_log or () if r.get("kind") == "search"]


# ── format gate, asserted directly (and through shoparena.corpus.filter when it is there) ─────────────────────────


def assert_format(t: Trajectory) -> None:
    msgs = t.messages
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert m["role"] != "tool", f"orphan tool message at {i}"
        if m["role"] == "assistant":
            assert len(m["tool_calls"]) == 1 and isinstance(m["reasoning_content"], str) and m["reasoning_content"]
            call = m["tool_calls"][0]
            assert msgs[i + 1]["role"] == "tool" and msgs[i + 1]["tool_call_id"] == call["id"]
            assert isinstance(call["function"]["arguments"], str)
            i += 2
            continue
        i += 1
    names = [c["function"]["name"] for c in t.tool_calls()]
    assert names.count("recommend_product") == 1 and names[-2:] == ["recommend_product", "terminate"]
    rec = json.loads(t.tool_calls()[-2]["function"]["arguments"])
    ids = [x for x in rec["product_ids"].split(",") if x]
    observed = " ".join(o for *_, o in calls_of(t)[:-2])
    assert ids and all(f'"{x}"' in observed for x in ids), "recommended ids must resolve to observed products"
    assert msgs[-1]["role"] == "tool"
    assert estimate_tokens(msgs, t.tools) <= 14336
    try:
        from shoparena.corpus.filter import FilterConfig, FormatGate
    except ImportError:  # pragma: no cover - the filter module is written alongside
        return
    assert FormatGate(FilterConfig()).check(t) is None


def test_rewritten_rows_carry_the_originals_identity(pipeline, rewritten):
    for orig, new in zip(pipeline, rewritten, strict=True):
        assert (new.source, new.rewritten, new.axis, new.axis_source) == ("rewrite", True, "A", "rewrite")
        assert new.provenance == {**orig.provenance, "rewritten_from": orig.traj_id, "rewriter": "template/1"}
        for field in ("problem_id", "bucket", "cluster_id", "suite", "success", "judge_score", "coefficient",
                      "outcome"):
            assert getattr(new, field) == getattr(orig, field), field
        assert new.traj_id != orig.traj_id
        assert new.traj_id == trajectory_id(new.messages, new.tools, new.problem_id)
        assert new.call_log is None and new.extras["rewrite"]["calls_from"] == "trace"
        # same system / user head
        head = [m for m in orig.messages if m["role"] in ("system", "user")]
        assert new.messages[:len(head)] == head
        assert {t["function"]["name"] for t in new.tools} >= {"find_product", "view_product_information",
                                                               "recommend_product", "terminate"}


def test_calls_observations_and_recommendation_are_verbatim(pipeline, rewritten):
    for orig, new in zip(pipeline, rewritten, strict=True):
        before, after = calls_of(orig), calls_of(new)
        work = [c for c in before if c[1] not in ("recommend_product", "terminate")]
        assert after[:-2] == work  # ids, names, argument strings and observation strings, in order
        assert after[-2] == [c for c in before if c[1] == "recommend_product"][-1]
        assert after[-1] == [c for c in before if c[1] == "terminate"][-1]
        # …and they are the gateway's calls: same tools, same parameters, same result ids
        logged = searches(orig)
        assert len(logged) == len(work)
        for (_, name, args, obs), rec in zip(work, logged, strict=True):
            assert rec["path"] == f"/search/{name}" and rec["axis"] == "B"
            assert {k: str(v) for k, v in json.loads(args).items()} == rec["params"]
            assert [p["product_id"] for p in json.loads(obs)] == rec["result_product_ids"]
        rec_ids = json.loads(after[-2][2])["product_ids"].split(",")
        assert list(dict.fromkeys(rec_ids)) == orig.outcome["recommended_ids"]  # the scorer de-duplicates


def test_rewrites_pass_the_format_gate(rewritten):
    for t in rewritten:
        assert_format(t)


def test_reasoning_states_only_facts_of_query_and_observations(pipeline, rewritten):
    for orig, new in zip(pipeline, rewritten, strict=True):
        plan = plan_rewrite(orig)
        assert not isinstance(plan, Rejection)
        reasonings = [m["reasoning_content"] for m in new.assistant_messages()]
        assert len(reasonings) == len(plan.steps())
        for k, text in enumerate(reasonings):
            assert grounding_errors(text, sources_for(plan, k)) == [], (k, text)
            assert "Item 1:" not in text  # the pipeline's post-hoc narration is gone
        # after every search, the reasoning names products the search returned (ids it really saw)
        steps = plan.steps()
        for k in range(1, len(steps)):
            prev = steps[k - 1].result()
            if steps[k - 1].name == "find_product" and prev:
                assert any(p["product_id"] in reasonings[k] for p in prev[:4])
            if steps[k - 1].name == "find_product" and prev == []:
                assert "no products" in reasonings[k]
        assert any(pid in reasonings[-2] for pid in plan.recommended_ids)


def test_grounding_check_catches_invented_facts(pipeline):
    plan = plan_rewrite(pipeline[0])
    assert not isinstance(plan, Rejection)
    sources = sources_for(plan, 1)
    some_id = plan.calls[0].result()[0]["product_id"]
    assert grounding_errors(f"I saw {some_id} in the results; 3 of them look right.", sources) == []
    assert grounding_errors("Product 9876543210 costs 123456.5.", sources) == ["number 123456.5",
                                                                               "number 9876543210"]
    assert grounding_errors('The title "Purple Unicorn Kettle Deluxe" fits.', sources) == [
        "quote 'Purple Unicorn Kettle Deluxe'"]


def test_template_rewrite_is_deterministic(pipeline, rewritten):
    again, _ = rewrite_all(pipeline, TemplateRewriter())
    dump = [orjson.dumps([t.traj_id, t.messages, t.tools, t.provenance], option=orjson.OPT_SORT_KEYS)
            for t in rewritten]
    assert dump == [orjson.dumps([t.traj_id, t.messages, t.tools, t.provenance], option=orjson.OPT_SORT_KEYS)
                    for t in again]


def test_async_batch_matches_the_sync_batch(pipeline, rewritten):
    import asyncio

    kept, report = asyncio.run(arewrite_all(pipeline, TemplateRewriter(), concurrency=3))
    assert [t.traj_id for t in kept] == [t.traj_id for t in rewritten] and report.kept == len(pipeline)


def test_calls_only_in_the_call_log_are_re_observed_from_the_catalog(corpus_world, pipeline, rewritten):
    orig = pipeline[0]
    bare = dataclasses.replace(orig, messages=[m for m in orig.messages if m["role"] in ("system", "user")])
    rej = TemplateRewriter().rewrite(bare)
    assert isinstance(rej, Rejection) and rej.reason == "missing_observation"  # never invented
    new = TemplateRewriter(observe=catalog_observer(corpus_world.catalog)).rewrite(bare)
    assert isinstance(new, Trajectory), new
    assert new.extras["rewrite"]["calls_from"] == "call_log"
    got = calls_of(new)
    logged = searches(orig)
    assert [(n, {k: str(v) for k, v in json.loads(a).items()}) for _, n, a, _ in got[:-2]] == [
        (r["path"].rsplit("/", 1)[1], r["params"]) for r in logged]
    # the re-run observations are the ones the agent saw through the gateway
    assert [json.loads(o) for *_, o in got[:-2]] == [json.loads(o) for *_, o in calls_of(rewritten[0])[:-2]]
    assert json.loads(got[-2][2])["product_ids"].split(",") == orig.outcome["recommended_ids"]
    assert_format(new)


# ── rejections: each reason, counted, never raised ─────────────────────────────────────────────────────────────────


def _drop_call(t: Trajectory, name: str) -> list[dict[str, Any]]:
    ids = {c["id"] for c in t.tool_calls() if c["function"]["name"] == name}
    return [m for m in t.messages if not (m.get("tool_call_id") in ids or
                                          any(c["id"] in ids for c in m.get("tool_calls") or ()))]


def _set_args(t: Trajectory, name: str, arguments: str, *, rename: str | None = None) -> list[dict[str, Any]]:
    out = []
    for m in t.messages:
        calls = m.get("tool_calls")
        if calls and calls[0]["function"]["name"] == name:
            fn = {"name": rename or name, "arguments": arguments}
            m = {**m, "tool_calls": [{**calls[0], "function": fn}]}
        out.append(m)
    return out


def broken(t: Trajectory) -> dict[str, Trajectory]:
    first_find = next(c for c in t.tool_calls() if c["function"]["name"] == "find_product")
    no_answer = [m for m in t.messages if m.get("tool_call_id") != first_find["id"]]
    only_final = [m for m in t.messages if m["role"] in ("system", "user")] + [
        m for m in t.messages
        if (m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] in ("recommend_product", "terminate"))
        or (m["role"] == "tool" and m["tool_call_id"] in {c["id"] for c in t.tool_calls()
                                                          if c["function"]["name"] in ("recommend_product",
                                                                                       "terminate")})]
    return {
        "not_axis_b": dataclasses.replace(t, axis="A"),
        "no_query": dataclasses.replace(t, messages=[m for m in t.messages if m["role"] != "user"]),
        "no_calls": dataclasses.replace(t, messages=only_final, call_log=[]),
        "missing_observation": dataclasses.replace(t, messages=no_answer),
        "call_log_mismatch": dataclasses.replace(t, messages=_set_args(t, "find_product",
                                                                       '{"q": "something else", "page": 1}')),
        "no_recommendation": dataclasses.replace(t, messages=_drop_call(t, "recommend_product"), outcome=None),
        "bad_recommendation": dataclasses.replace(t, messages=_set_args(t, "recommend_product",
                                                                        '{"product_ids": ""}')),
        "recommend_unseen": dataclasses.replace(t, messages=_set_args(t, "recommend_product",
                                                                      '{"product_ids": "1234567"}')),
        "unknown_tools": dataclasses.replace(t, tools=[], messages=_set_args(
            t, "view_product_information", '{"product_ids": "1"}', rename="peek_at_products"), call_log=[]),
    }


def test_each_rejection_reason(pipeline):
    cases = broken(pipeline[0])
    for reason, row in cases.items():
        out = TemplateRewriter().rewrite(row)
        assert isinstance(out, Rejection), reason
        assert (out.stage, out.reason, out.where, out.traj_id) == ("rewrite", reason, row.traj_id, row.traj_id)
        assert out.message
    too_long = TemplateRewriter(max_length=200).rewrite(pipeline[0])
    assert isinstance(too_long, Rejection) and too_long.reason == "too_long"


def test_rewrite_all_counts_rejections_and_survives_malformed_rows(rows, pipeline):
    weird = dataclasses.replace(pipeline[1], messages=[{"role": "user", "content": "x"}, "not a message"],
                                call_log=None)
    no_list = dataclasses.replace(pipeline[2], messages=None)  # type: ignore[arg-type]
    mixed: list[Any] = [*rows, *broken(pipeline[0]).values(), weird, no_list, {"not": "a trajectory"}]
    kept, report = rewrite_all(mixed, TemplateRewriter())
    assert report.seen == len(mixed) and report.kept == len(kept) == 12
    expected = {"not_axis_b": 25, "no_query": 1, "no_calls": 2, "missing_observation": 1, "call_log_mismatch": 1,
                "no_recommendation": 1, "bad_recommendation": 1, "recommend_unseen": 1, "unknown_tools": 1,
                "malformed": 1, "not_a_trajectory": 1}
    assert dict(report.rejected) == expected, report.to_dict()
    assert sum(report.rejected.values()) + report.kept == report.seen
    assert report.notes["rewriter"] == "template/1" and report.notes["llm_steps"] == 0
