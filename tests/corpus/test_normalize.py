"""Normalisation (``docs/corpus-design.md``): the real store written by the real validator (react = axis A,
pipeline = axis B), real upstream/ORO episodes run by the real environment, the released ORO SFT rows, and every
rejection reason with exact counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from shoparena.catalog.directory import index_path
from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.corpus.normalize import (
    REASONS,
    from_oro_sft,
    from_record,
    iter_envelopes,
    iter_oro_sft,
    iter_rollouts,
    iter_store,
    store_row_id,
    text_axis,
    to_envelope,
    to_openai,
    to_oro_sft,
    to_steps,
)
from shoparena.corpus.types import Rejection, Trajectory
from shoparena.env import run_episode
from shoparena.env.records import META, episode_envelope, read_envelope, strip_meta
from shoparena.env.tools import get_toolset
from shoparena.env.types import StepRecord
from shoparena.errors import DataError
from shoparena.llm.policies import get_policy
from shoparena.llm.subtasks import intent_messages
from shoparena.scoring.format import format_reward
from shoparena.store import RecordQuery, TrajectoryRecord, open_store

DATA = Path(__file__).parents[1] / "data" / "oro_samples"


def _bodies(url: str) -> list[dict[str, Any]]:
    with open_store(url) as store:
        return [orjson.loads(b) for b in store.bodies()]


def _rows(url: str, query: RecordQuery | None = None) -> list[Trajectory | Rejection]:
    with open_store(url) as store:
        return list(iter_store(store, query))


def _canonical(t: Trajectory) -> None:
    """The canonical message contract of types.py."""
    for m in t.messages:
        assert m["role"] in ("system", "user", "assistant", "tool") and META not in m
        assert isinstance(m["content"], str)
        if m["role"] == "assistant":
            assert m.get("reasoning_content", "x") != ""
            for tc in m.get("tool_calls") or ():
                assert tc["type"] == "function" and isinstance(tc["function"]["arguments"], str)
                assert isinstance(json.loads(tc["function"]["arguments"]), dict)
        if m["role"] == "tool":
            assert isinstance(m["tool_call_id"], str)
    for spec in t.tools:
        assert spec["type"] == "function" and set(spec["function"]) >= {"name", "parameters"}


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


# ── store records ────────────────────────────────────────────────────────────────────────────────────


def test_store_rows_copy_fields_axis_from_call_log_and_round_trip_steps(corpus_world: Any) -> None:
    bodies = _bodies(corpus_world.store_url)
    rows = _rows(corpus_world.store_url)
    assert len(rows) == len(bodies) == 36 and all(isinstance(r, Trajectory) for r in rows)
    upstream4 = get_toolset("upstream4").specs()
    for body, row in zip(bodies, rows, strict=True):
        assert isinstance(row, Trajectory)
        _canonical(row)
        assert (row.traj_id, row.source, row.problem_id, row.bucket, row.cluster_id, row.suite) == (
            store_row_id(body), "store", body["problem_id"], body["bucket"], body["cluster_id"], body["suite"])
        assert (row.success, row.judge_score, row.coefficient) == (body["success"], body["judge_score"],
                                                                   body["coefficient"])
        assert row.call_log == body["call_log"] and row.outcome == body["outcome"]
        assert row.provenance["record_id"] == body["record_id"]
        assert row.provenance["agent_id"] == body["agent_id"]
        assert row.provenance["validator_hotkey"] == "5Fval"
        assert row.messages == strip_meta(body["messages"])
        assert row.tools == upstream4
        assert (row.axis, row.axis_source) == (body["axis"], "call_log")
        assert row.axis == ("B" if body["agent_id"] == "pipeline" else "A")
        assert to_steps(row) == body["steps"]  # lossless (§6.3)
        assert to_openai(row) == {"messages": row.messages, "tools": upstream4}


def test_from_record_accepts_model_dump_and_is_deterministic(corpus_world: Any) -> None:
    bodies = _bodies(corpus_world.store_url)
    for body in bodies[:6]:
        dumped = TrajectoryRecord.model_validate(body).model_dump()
        a, b = from_record(dumped), from_record(orjson.loads(orjson.dumps(body)))
        assert isinstance(a, Trajectory) and a == b


def test_iter_store_streams_a_query(corpus_world: Any) -> None:
    rows = _rows(corpus_world.store_url, RecordQuery(agent_id="pipeline"))
    assert len(rows) == 12 and {r.axis for r in rows if isinstance(r, Trajectory)} == {"B"}


def test_store_row_to_envelope_and_to_oro_sft_and_back(corpus_world: Any) -> None:
    for row in _rows(corpus_world.store_url)[:12:3]:
        assert isinstance(row, Trajectory)
        env = to_envelope(row)
        assert read_envelope(orjson.loads(orjson.dumps(env))) == env
        assert env["problem_id"] == row.problem_id and env["status"] == "SUCCESS"
        assert env["inference_total"] == sum(1 for c in row.call_log or () if c["kind"] == "inference")
        assert all("obs" not in s["completion"]["message"] for s in env["dialogue"])
        sft = to_oro_sft(row)
        assert set(sft) == {"messages", "tools"} and all("function" not in t for t in sft["tools"])
        assistant = [m for m in sft["messages"] if m["role"] == "assistant"]
        assert all(m["content"].startswith("<think>\n") and "<tool_call>\n{\"name\": " in m["content"]
                   for m in assistant)
        back = from_oro_sft(orjson.loads(orjson.dumps(sft)), "mem:1")
        assert isinstance(back, Trajectory)
        assert back.messages == row.messages and back.tools == row.tools  # Qwen3 text parses back exactly
        assert to_oro_sft(back) == sft


def test_a_changed_message_drops_the_stale_raw_text_pins(corpus_world: Any) -> None:
    row = next(r for r in _rows(corpus_world.store_url) if isinstance(r, Trajectory)
               and r.provenance["agent_id"] == "react")
    first = next(i for i, m in enumerate(row.messages) if m["role"] == "assistant")
    row.messages[first] = {**row.messages[first], "reasoning_content": "Rewritten reasoning."}
    step = to_steps(row)[0]
    assert step["completion"]["message"]["think"] == "Rewritten reasoning."
    assert step["completion"]["reasoning_content"] == ""  # the pinned API reasoning described the old text
    assert "Rewritten reasoning." in step["completion"]["content"]
    assert step["extra_info"]["timestamp"] > 0  # timing meta is kept


def test_from_record_rejections(corpus_world: Any) -> None:
    body = _bodies(corpus_world.store_url)[0]
    rid = body["record_id"]
    unpaired = [dict(m) for m in body["messages"]]
    tool_at = next(i for i, m in enumerate(unpaired) if m["role"] == "tool")
    unpaired[tool_at]["tool_call_id"] = "nope"
    bad_args = [dict(m) for m in body["messages"]]
    call_at = next(i for i, m in enumerate(bad_args) if m.get("tool_calls"))
    bad_args[call_at]["tool_calls"] = [{"id": "x", "type": "function", "function": {"name": "f", "arguments": {}}}]
    cases = {
        "not_object": ["x"],
        "missing_keys": [{"problem_id": "p"}, {"record_id": rid}],
        "bad_trace": [{**body, "steps": "x"}, {**body, "messages": {}}, {**body, "call_log": 3}],
        "empty_trace": [{**body, "steps": [], "messages": []}],
        "missing_extra_info": [{**body, "messages": [], "steps": [{"completion": {"message": {"tool_call": [{}]}}}]}],
        "tool_call_missing_id": [{**body, "messages": [], "steps": [{"completion": {"message": {"tool_call": [
            {"name": "terminate", "parameters": {}}]}}, "extra_info": {"step": 1, "query": "q"}}]}],
        "bad_message": [{**body, "messages": [1]}, {**body, "messages": [{"role": "bot", "content": ""}]},
                        {**body, "messages": [{"role": "user", "content": None}]}],
        "bad_tool_call": [{**body, "messages": bad_args}],
        "unpaired_tool_call_id": [{**body, "messages": unpaired}],
    }
    seen: Counter[str] = Counter()
    for reason, inputs in cases.items():
        for item in inputs:
            out = from_record(item)
            assert isinstance(out, Rejection) and out.reason == reason and out.stage == "normalize", (reason, out)
            assert out.message
            seen[out.reason] += 1
    assert seen == Counter({k: len(v) for k, v in cases.items()})
    assert from_record({**body, "messages": unpaired}).where == rid
    assert set(seen) <= set(REASONS)


# ── text axis ────────────────────────────────────────────────────────────────────────────────────────


def _asst(*calls: tuple[str, str, dict[str, Any]], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for cid, name, args in calls]}


def _tool(cid: str, content: str = "[]") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_text_axis_rule(corpus_world: Any) -> None:
    user = {"role": "user", "content": "a violin bow"}
    search = _asst(("a", "find_product", {"q": "violin bow"}))
    rec = _asst(("r", "recommend_product", {"product_ids": "1"}))
    assert text_axis([user, search, _tool("a")]) == "A"
    assert text_axis([user, _tool(""), rec, _tool("r")]) == "B"  # Python searched, the LLM only recommended
    assert text_axis([user, {"role": "assistant", "content": '{"score": 0.8, "reason": "fits"}'}]) == "B"
    assert text_axis([user, {"role": "assistant", "content": '{"bucket": "shop", "items": 2, "queries": ["a"]}'}]) \
        == "B"
    assert text_axis([*intent_messages("a violin bow"), {"role": "assistant", "content": "ok"}]) == "B"
    assert text_axis([user, search, _tool("a"), _tool("zz")]) == "mixed"
    assert text_axis([user, rec, _tool("r")]) == "none"
    assert text_axis([user, {"role": "assistant", "content": "I recommend 1."}]) == "none"
    # store rows: the react agent reads as A in text too; the pipeline agent logs its Python searches as assistant
    # calls, so only its call log tells it is B (which is why store rows take the call log's axis)
    for row in _rows(corpus_world.store_url):
        assert isinstance(row, Trajectory) and text_axis(row.messages) == "A"


# ── upstream rollouts and ORO envelopes, run by the real environment ───────────────────────────────────


@pytest.fixture(scope="module")
def episodes(corpus_world: Any) -> dict[str, Any]:
    service = SearchService(SearchIndex.open(index_path(corpus_world.catalog)), flavor="oro")
    problems = corpus_world.problems[:4]
    tags = [run_episode({"problem_id": p.problem_id, "query": p.query}, get_policy("careful"), service,
                        protocol="tags", record_prompt=True) for p in problems[:2]]
    native = [run_episode({"problem_id": p.problem_id, "query": p.query}, get_policy("expert"), service,
                          protocol="native", profile="oro7") for p in problems[2:]]
    return {"problems": problems, "tags": tags, "native": native}


def test_rollouts_round_trip_and_join_problems(tmp_path: Path, corpus_world: Any, episodes: dict[str, Any]) -> None:
    tags, native = episodes["tags"], episodes["native"]
    envelope = episode_envelope(native[0])
    # a query-only upstream line (no problem_id) is joined by its query
    anon = [{**s, "extra_info": {k: v for k, v in s["extra_info"].items() if k != "problem_id"}}
            for s in tags[1].steps]
    lines = [tags[0].steps, anon, native[1].steps, envelope]
    path = write_jsonl(tmp_path / "rollouts.jsonl", lines)
    problems = {p.problem_id: p for p in corpus_world.problems}
    rows = list(iter_rollouts(path, problems))
    assert all(isinstance(r, Trajectory) for r in rows) and len(rows) == 4
    assert [r.source for r in rows] == ["rollout", "rollout", "rollout", "oro_envelope"]
    expected = [episodes["problems"][0], episodes["problems"][1], episodes["problems"][3], episodes["problems"][2]]
    for row, line, problem in zip(rows, lines, expected, strict=True):
        assert isinstance(row, Trajectory)
        _canonical(row)
        assert (row.problem_id, row.bucket, row.cluster_id, row.suite) == (
            problem.problem_id, problem.bucket, problem.cluster_id, problem.suite)
        assert row.provenance["file"] == str(path) and row.axis_source == "text"
        assert "raw_steps" not in row.extras  # canonical input needs no fallback copy
        if isinstance(line, list):
            assert to_steps(row) == line
        else:
            assert to_envelope(row) == line and to_steps(row) == line["dialogue"]
    assert rows[0].axis == "A" and rows[0].tools == get_toolset("upstream4").specs()
    assert rows[2].extras["toolset"].startswith(("upstream4", "oro7"))
    assert rows[0].messages[0] == {"role": "user", "content": episodes["problems"][0].query}
    assert "prompt" in rows[0].extras["step_meta"][0]  # the tag prompt rides in extras, not in messages
    again = list(iter_rollouts(path, problems))
    assert [r.traj_id for r in again] == [r.traj_id for r in rows if isinstance(r, Trajectory)]


def test_non_canonical_steps_are_kept_verbatim(tmp_path: Path, episodes: dict[str, Any]) -> None:
    steps = json.loads(json.dumps(episodes["tags"][0].steps))
    step = next(s for s in steps if len(s["completion"]["message"].get("tool_call", [])) >= 1)
    # a second observation of the same call (an obs naming no call at all is invalid output: unknown_call_id)
    first_id = step["completion"]["message"]["tool_call"][0]["tool_call_id"]
    step["completion"]["message"]["obs"].append({"tool_call_id": first_id, "results": "lost by the canon"})
    rows = list(iter_rollouts(write_jsonl(tmp_path / "r.jsonl", [steps])))
    row = rows[0]
    assert isinstance(row, Trajectory) and "raw_steps" in row.extras
    assert to_steps(row) == steps


def test_envelopes_round_trip(tmp_path: Path, episodes: dict[str, Any]) -> None:
    envs = [json.loads(json.dumps(episode_envelope(ep))) for ep in episodes["tags"] + episodes["native"]]
    rows = list(iter_envelopes(write_jsonl(tmp_path / "output.jsonl", envs)))
    assert all(isinstance(r, Trajectory) for r in rows)
    for row, env in zip(rows, envs, strict=True):
        assert isinstance(row, Trajectory) and row.source == "oro_envelope"
        assert to_envelope(row) == env
        assert row.problem_id == env["problem_id"] and row.bucket is None


def test_step_sources_rejections_with_exact_counts(tmp_path: Path, corpus_world: Any,
                                                   episodes: dict[str, Any]) -> None:
    good = episodes["tags"][0].steps
    env = json.loads(json.dumps(episode_envelope(episodes["native"][0])))
    stranger = [{**s, "extra_info": {**s["extra_info"], "problem_id": "nope", "query": "no such query"}}
                for s in good]
    rollouts = write_jsonl(tmp_path / "r.jsonl", [
        good,                                   # 1 ok
        "{not json",                            # 2 bad_json
        "42",                                   # 3 bad_rollout
        "[1, 2]",                               # 4 step_not_object
        {"dialogue": "x"},                      # 5 bad_rollout
        [{"completion": {}}],                   # 6 missing_extra_info
        "[]",                                   # 7 empty_trace
        stranger,                               # 8 unknown_problem
        {**env, "dialogue": None},              # 9 empty_trace
    ])
    problems = {p.problem_id: p for p in corpus_world.problems}
    out = list(iter_rollouts(rollouts, problems))
    rej = [r for r in out if isinstance(r, Rejection)]
    assert len(out) == 9 and len(rej) == 8
    assert Counter(r.reason for r in rej) == Counter(bad_json=1, bad_rollout=2, step_not_object=1,
                                                     missing_extra_info=1, empty_trace=2, unknown_problem=1)
    assert [r.where for r in rej] == [f"{rollouts}:{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9)]
    assert isinstance(next(iter_rollouts(write_jsonl(tmp_path / "s.jsonl", [stranger]))), Trajectory)

    envelopes = write_jsonl(tmp_path / "e.jsonl", [
        env,                                    # 1 ok
        "nope",                                 # 2 bad_json
        "[1]",                                  # 3 not_object
        {**env, "dialogue": "x"},               # 4 bad_envelope
        {**env, "status": "DONE"},              # 5 bad_envelope
        {k: v for k, v in env.items() if k != "problem_id"},  # 6 bad_envelope
        {**env, "dialogue": [{"completion": {}}]},            # 7 missing_extra_info (the validator's code)
        {**env, "dialogue": None},              # 8 empty_trace
        {**env, "problem_id": "elsewhere", "dialogue": [  # 9 ok without problems, unknown_problem with them
            {**s, "extra_info": {**s["extra_info"], "query": "no such query"}} for s in env["dialogue"]]},
    ])
    plain = list(iter_envelopes(envelopes))
    assert Counter(r.reason for r in plain if isinstance(r, Rejection)) == Counter(
        bad_json=1, not_object=1, bad_envelope=3, missing_extra_info=1, empty_trace=1)
    joined = list(iter_envelopes(envelopes, problems))
    assert Counter(r.reason for r in joined if isinstance(r, Rejection)) == Counter(
        bad_json=1, not_object=1, bad_envelope=3, missing_extra_info=1, empty_trace=1, unknown_problem=1)
    assert sum(isinstance(r, Trajectory) for r in joined) == 1


def test_malformed_agent_output_is_rejected_with_the_validators_reason_code(tmp_path: Path,
                                                                            episodes: dict[str, Any]) -> None:
    """Rollouts and envelopes whose steps are malformed agent output are counted rejections carrying
    the same reason code the validator records (shoparena.env.output), one per line, never an exception."""
    good = json.loads(json.dumps(episodes["tags"][0].steps))
    env = json.loads(json.dumps(episode_envelope(episodes["native"][0])))

    def broken(steps: list[dict[str, Any]], fn: Any) -> list[dict[str, Any]]:
        steps = json.loads(json.dumps(steps))
        call = next(c for s in steps for c in s["completion"]["message"].get("tool_call") or [])
        fn(call)
        return steps

    no_id = broken(good, lambda c: c.pop("tool_call_id"))
    unknown = broken(good, lambda c: c.update(name="format_disk"))
    bad_args = broken(good, lambda c: c.update(parameters=[1]))
    rows = list(iter_rollouts(write_jsonl(tmp_path / "r.jsonl", [
        good, no_id, unknown, bad_args, [good[0], None], {"problem_id": "p", "dialogue": no_id}])))
    assert isinstance(rows[0], Trajectory)
    assert [(r.reason, r.where.rsplit(":", 1)[1]) for r in rows[1:]] == [  # type: ignore[union-attr]
        ("tool_call_missing_id", "2"), ("unknown_tool", "3"), ("bad_arguments", "4"), ("step_not_object", "5"),
        ("tool_call_missing_id", "6")]
    envs = list(iter_envelopes(write_jsonl(tmp_path / "e.jsonl", [
        env, {**env, "dialogue": broken(env["dialogue"], lambda c: c.pop("tool_call_id"))},
        {**env, "dialogue": [{**env["dialogue"][0], "extra_info": {"step": "one", "query": "q"}}]}])))
    assert isinstance(envs[0], Trajectory)
    assert [r.reason for r in envs[1:]] == ["tool_call_missing_id", "wrong_type"]  # type: ignore[union-attr]
    assert all(r.reason in REASONS for r in rows[1:] + envs[1:])  # type: ignore[union-attr]
    with pytest.raises(DataError, match="INVALID_OUTPUT:tool_call_missing_id"):
        read_envelope({**env, "dialogue": no_id})


# ── ORO SFT rows ─────────────────────────────────────────────────────────────────────────────────────


def _real_lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in (DATA / "inputs.jsonl").read_text().splitlines()]


def _real_outputs() -> dict[str, str]:
    return {o["id"]: o["raw_text"] for o in map(json.loads, (DATA / "outputs.jsonl").read_text().splitlines())}


def test_real_oro_rows_round_trip_exactly() -> None:
    outputs = _real_outputs()
    rows = _real_lines()
    answered = [{**r, "messages": [*r["messages"], {"role": "assistant", "content": outputs[r["id"]]}]}
                for r in rows]
    for original in rows + answered:
        t = from_oro_sft(json.loads(json.dumps(original)), "mem:1")
        assert isinstance(t, Trajectory), t
        _canonical(t)
        assert to_oro_sft(t) == original
        assert "overrides" not in t.extras["oro"]  # the canonical renderer reproduces the real text itself
        assert t.tools == get_toolset("oro_sft4").specs()
        assert t.messages[0]["role"] == "system" and t.messages[1]["role"] == "user"
        assert t.provenance["row_id"] == original["id"]
    t = from_oro_sft(answered[0], "mem:1")
    assert isinstance(t, Trajectory) and t.axis == "A"
    asst = t.messages[-1]
    assert asst["content"] == "" and asst["reasoning_content"].startswith("I need to find a single patch")
    call = asst["tool_calls"][0]
    assert call["function"]["name"] == "find_product"
    assert json.loads(call["function"]["arguments"]) == {"q": "patch one size color family 3", "price": "104",
                                                         "page": 1}


def _turn(think: str, *calls: tuple[str, dict[str, Any]], content: str = "") -> dict[str, Any]:
    text = f"<think>\n{think}\n</think>\n\n{content}"
    for k, (name, args) in enumerate(calls):
        text += ("\n" if content or k else "") + "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) \
            + "\n</tool_call>"
    return {"role": "assistant", "content": text}


def _synthetic_rows() -> list[dict[str, Any]]:
    base = _real_lines()[0]
    head = base["messages"]
    find = ("find_product", {"q": "patch", "page": 1})
    view = ("view_product_information", {"product_ids": ["11", "12"]})
    rec = ("recommend_product", {"product_ids": "11"})
    term = ("terminate", {})
    obs = json.dumps([{"product_id": "11", "title": "Patch", "price": 150.0}])
    # 1: role tool with the calls' ids lent by the results
    with_ids = {**base, "messages": [*head, _turn("Search first.", find), _tool("t1", obs),
                                     _turn("Two to check.", view), _tool("t2", "[]"),
                                     _turn("Done.", rec, term), _tool("t3", "\"ok\""), _tool("t4", "\"success\"")]}
    # 2: role tool without ids (paired by position)
    no_ids = {**base, "messages": [*head, _turn("Search.", find), {"role": "tool", "content": obs},
                                   _turn("Finish.", rec, term, content="Recommending 11."),
                                   {"role": "tool", "content": "ok"}, {"role": "tool", "content": "success"}]}
    # 3: results as <tool_response>-wrapped user messages (parallel calls in one user turn)
    wrapped = {**base, "messages": [*head, _turn("Both at once.", find, view),
                                    {"role": "user", "content": f"<tool_response>\n{obs}\n</tool_response>\n"
                                                                "<tool_response>\n[]\n</tool_response>"},
                                    _turn("Done.", rec), {"role": "user",
                                                          "content": "<tool_response>\nok\n</tool_response>"}]}
    # 4: already-structured assistant turns with object arguments and an extra key on a tool message
    structured = {**base, "messages": [*head, {"role": "assistant", "content": "", "reasoning_content": "Look.",
                                               "tool_calls": [{"id": "c1", "type": "function", "function": {
                                                   "name": "find_product", "arguments": {"q": "patch"}}}]},
                                       {"role": "tool", "tool_call_id": "c1", "name": "find_product",
                                        "content": obs}]}
    # 5: no tools key, no extra keys; Python-injected observation before any call (axis B)
    python = {"messages": [{"role": "user", "content": "a patch"}, {"role": "tool", "content": obs},
                           _turn("Pick.", rec)]}
    return [with_ids, no_ids, wrapped, structured, python]


def test_synthetic_multi_turn_rows_round_trip(tmp_path: Path) -> None:
    rows = _synthetic_rows()
    path = write_jsonl(tmp_path / "sft.jsonl", rows)
    out = list(iter_oro_sft(path))
    assert all(isinstance(t, Trajectory) for t in out) and len(out) == 5
    for t, original in zip(out, rows, strict=True):
        assert isinstance(t, Trajectory)
        _canonical(t)
        assert to_oro_sft(t) == original
        assert t.provenance["file"] == str(path)
    with_ids, no_ids, wrapped, structured, python = out
    assert [m["role"] for m in wrapped.messages[2:]] == ["assistant", "tool", "tool", "assistant", "tool"]
    calls = wrapped.messages[2]["tool_calls"]
    assert [m["tool_call_id"] for m in wrapped.messages[3:5]] == [c["id"] for c in calls]
    assert [m["tool_call_id"] for m in with_ids.messages if m["role"] == "tool"] == ["t1", "t2", "t3", "t4"]
    assert with_ids.tool_calls()[0]["id"] == "t1"
    assert no_ids.messages[-3]["content"] == "Recommending 11."
    assert structured.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"q": "patch"}'
    assert "overrides" in structured.extras["oro"]  # original dict arguments / extra key kept verbatim
    assert "overrides" not in with_ids.extras["oro"] and "overrides" not in wrapped.extras["oro"]
    assert (with_ids.axis, wrapped.axis, python.axis) == ("A", "A", "B")
    assert python.messages[1] == {"role": "tool", "tool_call_id": "", "content": rows[4]["messages"][1]["content"]}
    assert python.tools == get_toolset("upstream4").specs()
    for t in (with_ids, no_ids, wrapped):
        steps = to_steps(t)
        for s in steps:
            StepRecord.model_validate(s)
            assert format_reward(s["completion"]["content"]) == 1.0
    with pytest.raises(DataError):
        to_steps(python)  # an observation no call asked for cannot be a step record
    # a changed message is rendered from the canonical form, not from the stale verbatim copy
    structured.messages[2] = {**structured.messages[2], "reasoning_content": "Changed."}
    assert to_oro_sft(structured)["messages"][2]["content"].startswith("<think>\nChanged.\n</think>")


def test_oro_sft_rejections_with_exact_counts(tmp_path: Path) -> None:
    base = _real_lines()[0]
    head = base["messages"]
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "find_product", "arguments": "{}"}}]}
    lines: list[Any] = [
        base,                                                                               # 1 ok
        "{oops",                                                                            # 2 bad_json
        "42",                                                                               # 3 not_object
        {"tools": []},                                                                      # 4 missing_keys
        {"messages": "hi"},                                                                 # 5 bad_trace
        {"messages": []},                                                                   # 6 empty_trace
        {"messages": ["hi"]},                                                               # 7 bad_message
        {"messages": [{"role": "robot", "content": "x"}]},                                  # 8 bad_message
        {"messages": [{"role": "user", "content": ["part"]}]},                              # 9 bad_message
        {**base, "tools": [{"description": "no name"}]},                                    # 10 bad_tools
        {**base, "tools": "find_product"},                                                  # 11 bad_tools
        {"messages": [*head, {"role": "assistant", "content": "<tool_call>\n{not json}\n</tool_call>"}]},  # 12
        {"messages": [*head, {"role": "assistant", "content": "<tool_call>\n{\"name\": \"f\", "}]},       # 13
        {"messages": [*head, {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "function": {"name": "f", "arguments": "{bad"}}]}]},                # 14 bad_tool_call
        {"messages": [*head, {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}]},                 # 15 bad_tool_call
        {"messages": [*head, call, {"role": "user", "content": "<tool_response>\nx\n</tool_response> and more"}]},
        {"messages": [*head, call, {"role": "user", "content": "<tool_response>\nx"}]},    # 17 bad_tool_response
        {"messages": [*head, call, _tool("c2")]},                                           # 18 unpaired_tool_call_id
        {"messages": [*head, call, _tool("c1"), _tool("c1")]},                              # 19 unpaired (used up)
        {"messages": [*head, call, {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]},  # 20
        {"messages": [*head, call, {"role": "tool", "content": "1"}, {"role": "tool", "tool_call_id": 5,
                                                                      "content": "2"}]},    # 21 bad_message
    ]
    path = write_jsonl(tmp_path / "sft.jsonl", lines)
    out = list(iter_oro_sft(path))
    rej = [r for r in out if isinstance(r, Rejection)]
    assert len(out) == len(lines) and len(rej) == len(lines) - 1
    assert Counter(r.reason for r in rej) == Counter(
        bad_json=1, not_object=1, missing_keys=1, bad_trace=1, empty_trace=1, bad_message=4, bad_tools=2,
        bad_tool_call=4, bad_tool_response=2, unpaired_tool_call_id=2, extra_tool_result=1)
    assert [r.where for r in rej] == [f"{path}:{n}" for n in range(2, len(lines) + 1)]
    assert all(r.stage == "normalize" and r.message and r.reason in REASONS for r in rej)


def test_iter_store_counts_an_unreadable_body(tmp_path: Path, corpus_world: Any) -> None:
    import shutil
    import sqlite3

    db = tmp_path / "damaged.db"
    shutil.copy(corpus_world.store_url.removeprefix("sqlite:///"), db)
    with sqlite3.connect(db) as conn:  # damage one stored body behind the store's append-only guards
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("UPDATE trajectory_records SET body = '{broken' WHERE seq = 2")
    rows = _rows(f"sqlite:///{db}")
    rej = [r for r in rows if isinstance(r, Rejection)]
    assert len(rows) == 36 and [(r.reason, r.where) for r in rej] == [("bad_json", "store:2")]
