"""Step records ↔ OpenAI messages (lossless both ways), flavours, ORO envelope (docs/shoppingbench.md §6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoparena.catalog.search import SearchService
from shoparena.env.protocol_tags import render_content, tool_call_id
from shoparena.env.records import (
    episode_envelope,
    last_recommendation,
    messages_to_steps,
    read_envelope,
    steps_to_messages,
    strip_meta,
    to_flavor,
)
from shoparena.env.runner import run_episode
from shoparena.env.types import StepRecord
from shoparena.errors import DataError
from shoparena.scoring.format import format_reward
from tests.env._env_helpers import ScriptedPolicy, tags

QUERY = "Looking for a violin bow — ümlaut, 中文, emoji 🎻"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
names = st.sampled_from(["find_product", "view_product_information", "recommend_product", "terminate", "x"])


@st.composite
def steps_strategy(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 4))
    flavor = draw(st.sampled_from(["upstream", "oro", "both"]))
    steps = []
    for i in range(n):
        think, response = draw(st.text(max_size=30)), draw(st.text(max_size=30))
        calls, obs = [], []
        for k in range(draw(st.integers(0, 3))):
            name = draw(names)
            params = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
            cid = draw(st.sampled_from([tool_call_id(name, params) + str(k), f"call_{i}_{k}"]))
            call: dict[str, Any] = {"name": name, "parameters": params, "tool_call_id": cid}
            if draw(st.booleans()) or flavor != "upstream":
                has_output = draw(st.integers(0, 9)) > 0
            else:
                has_output = True
            result = draw(json_values)
            if has_output and flavor != "upstream":
                call["result"] = result
            if has_output and flavor != "oro":
                obs.append({"tool_call_id": cid, "results": result})
            calls.append(call)
        message: dict[str, Any] = {}
        if think:
            message["think"] = think
        if calls:
            message["tool_call"] = calls
        if obs:
            message["obs"] = obs
        if response:
            message["response"] = response
        content = draw(st.sampled_from([render_content(think, calls, response), draw(st.text(max_size=40))]))
        extra: dict[str, Any] = {"step": draw(st.sampled_from([i + 1, i + 3])), "query": QUERY,
                                 "timestamp": draw(st.integers(1, 2**41))}
        if draw(st.booleans()):
            extra["problem_id"] = "p-1"
        if i == 0 and draw(st.booleans()):
            extra["execution_time"] = draw(st.floats(0, 100))
        step: dict[str, Any] = {}
        if draw(st.booleans()):
            step["prompt"] = [{"role": "system", "content": "s"}, {"role": "user", "content": f"h{i}"}]
        step["completion"] = {"reasoning_content": draw(st.sampled_from(["", None, think, "api reasoning"])),
                              "content": content, "message": message}
        step["extra_info"] = extra
        steps.append(step)
    return steps


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps_strategy(), st.sampled_from(["upstream", "oro"]))
def test_steps_messages_steps_is_lossless_6_3(steps: list[dict[str, Any]], default: str) -> None:
    messages = steps_to_messages(steps, query=QUERY, system="SYS", flavor=default)  # type: ignore[arg-type]
    assert messages_to_steps(messages, flavor=default) == steps  # type: ignore[arg-type]
    json.loads(json.dumps(messages))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps_strategy())
def test_messages_steps_messages_is_lossless_6_3(steps: list[dict[str, Any]]) -> None:
    plain = steps_to_messages(steps, query=QUERY, meta=False)
    assert all("step_meta" not in m for m in plain)
    assert steps_to_messages(messages_to_steps(plain), query=QUERY) == plain
    with_meta = steps_to_messages(steps, query=QUERY)
    assert steps_to_messages(messages_to_steps(with_meta), query=QUERY) == with_meta
    assert strip_meta(with_meta) == plain


def _step(i: int, message: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"completion": {"reasoning_content": "", "content": content if content is not None else render_content(
        message.get("think", ""), message.get("tool_call", []), message.get("response", "")), "message": message},
            "extra_info": {"step": i + 1, "query": QUERY}}


def test_parallel_calls_null_obs_and_response_only_final_turn_6_3() -> None:
    calls = [{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}, "tool_call_id": "6MtnW7sD"},
             {"name": "find_product", "parameters": {"q": "violin bow", "page": 1}, "tool_call_id": "6MtnW7sD"},
             {"name": "view_product_information", "parameters": {"product_ids": "1"}, "tool_call_id": "v"}]
    steps = [
        _step(0, {"think": "parallel", "tool_call": calls,
                  "obs": [{"tool_call_id": "6MtnW7sD", "results": None},
                          {"tool_call_id": "6MtnW7sD", "results": [{"title": "弓 🎻"}]},
                          {"tool_call_id": "v", "results": []}]}),
        _step(1, {"think": "done", "response": "Here is your bow."}),
    ]
    msgs = steps_to_messages(steps)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert msgs[0] == {"role": "user", "content": QUERY}
    assert msgs[1]["tool_calls"][0] == {"id": "6MtnW7sD", "type": "function",
                                        "function": {"name": "find_product",
                                                     "arguments": '{"q": "violin bow", "page": 1}'}}
    assert [m["content"] for m in msgs[2:5]] == ["null", '[{"title": "弓 🎻"}]', "[]"]
    assert msgs[5] == {"role": "assistant", "content": "Here is your bow.", "reasoning_content": "done"}
    assert messages_to_steps(msgs) == steps


def test_unknown_tool_calls_without_obs_have_no_tool_message() -> None:
    calls = [{"name": "web_search", "parameters": {"q": "x"}, "tool_call_id": "w"},
             {"name": "terminate", "parameters": {"status": "success"}, "tool_call_id": "NR0gqQng"}]
    steps = [_step(0, {"think": "t", "tool_call": calls, "obs": [{"tool_call_id": "NR0gqQng", "results": "bye"}]})]
    msgs = steps_to_messages(steps)
    assert [m.get("tool_call_id") for m in msgs if m["role"] == "tool"] == ["NR0gqQng"]
    assert messages_to_steps(msgs) == steps


def test_flavours_convert_both_ways_6_1() -> None:
    up = [_step(0, {"think": "t", "tool_call": [{"name": "terminate", "parameters": {}, "tool_call_id": "a"}],
                    "obs": [{"tool_call_id": "a", "results": "done"}]})]
    oro = to_flavor(up, "oro")
    assert oro[0]["completion"]["message"] == {
        "think": "t", "tool_call": [{"name": "terminate", "parameters": {}, "tool_call_id": "a", "result": "done"}]}
    assert to_flavor(oro, "upstream") == up
    both = to_flavor(up, "both")[0]["completion"]["message"]
    assert "obs" in both and both["tool_call"][0]["result"] == "done"
    assert messages_to_steps(steps_to_messages(oro), flavor="oro") == oro
    assert messages_to_steps(steps_to_messages(oro)) == oro  # the flavour rides in step_meta


def test_foreign_tool_content_that_is_not_json_becomes_a_string_result() -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "recommend_product", "arguments": {"product_ids": "1"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Recommended: 1"}]
    steps = messages_to_steps(msgs)
    assert steps[0]["completion"]["message"]["obs"] == [{"tool_call_id": "c1", "results": "Recommended: 1"}]
    assert steps[0]["extra_info"] == {"step": 1, "query": "q"}


def test_shapes_steps_cannot_hold_are_data_errors() -> None:
    with pytest.raises(DataError):
        messages_to_steps([{"role": "user", "content": "q"}, {"role": "user", "content": "again"}])
    with pytest.raises(DataError):
        messages_to_steps([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "x", "content": "1"}])
    with pytest.raises(DataError):
        messages_to_steps([{"role": "user", "content": "q"}, {"role": "assistant", "content": ""},
                           {"role": "tool", "tool_call_id": "x", "content": "1"}])


def test_last_recommendation_forms() -> None:
    def rec(params: dict[str, Any]) -> dict[str, Any]:
        return _step(0, {"tool_call": [{"name": "recommend_product", "parameters": params, "tool_call_id": "r"}]})

    assert last_recommendation([rec({"product_ids": "1,2"}), rec({"product_ids": ["3", "4"]})]) == "3,4"
    assert last_recommendation([rec({"product_id": "9"})]) == "9"
    assert last_recommendation([rec({"product_ids": "1"}), rec({})]) is None  # the last call wins, even empty
    assert last_recommendation([]) is None


def test_oro_envelope_build_and_read_6_2(backend: SearchService) -> None:
    pol = ScriptedPolicy([tags("s", [{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}]),
                          tags("t", [{"name": "terminate", "parameters": {"status": "success"}}])])
    ep = run_episode({"problem_id": "p-7", "query": QUERY}, pol, backend, record_prompt=True)
    env = episode_envelope(ep)
    assert list(env) == ["problem_id", "status", "execution_time", "inference_failure_count", "inference_total",
                         "error", "dialogue"]
    assert (env["problem_id"], env["status"], env["error"], env["inference_total"]) == ("p-7", "SUCCESS", None, 2)
    first = env["dialogue"][0]
    assert "prompt" not in first and "obs" not in first["completion"]["message"]
    assert first["completion"]["message"]["tool_call"][0]["result"][0]["product_id"] == "3706669986"
    assert first["extra_info"]["problem_id"] == "p-7" and first["extra_info"]["timestamp"] > 0
    assert read_envelope(json.loads(json.dumps(env))) == env
    failed = run_episode(QUERY, ScriptedPolicy([RuntimeError("boom")]), backend)
    fenv = episode_envelope(failed)
    assert fenv["status"] == "FAILED" and fenv["error"] == {"type": "RuntimeError", "message": "boom"}
    assert fenv["dialogue"] == []
    for bad in ({**env, "status": "DONE"}, {**env, "extra": 1}, {**env, "error": "x"},
                {**env, "dialogue": [{"completion": {}}]}):
        with pytest.raises(DataError):
            read_envelope(bad)


def test_native_steps_get_tag_content_that_format_reward_accepts_6_3(backend: SearchService) -> None:
    from shoparena.env.types import AssistantMessage, ToolCall

    pol = ScriptedPolicy([AssistantMessage(reasoning_content="look", tool_calls=[
        ToolCall(id="c1", name="find_product", arguments={"q": "violin bow"})]),
        AssistantMessage(content="<think>ok</think>\nBye.", tool_calls=[ToolCall(name="terminate")])])
    ep = run_episode(QUERY, pol, backend, protocol="native")
    assert [format_reward(s["completion"]["content"]) for s in ep.steps] == [1.0, 1.0]
    assert ep.steps[1]["completion"]["content"] == ('<think>ok</think>\n<tool_call>[{"name": "terminate", '
                                                    '"parameters": {}}]</tool_call>\n<response>Bye.</response>')
    for step in ep.steps:
        StepRecord.model_validate(step)
    assert messages_to_steps(ep.messages) == ep.steps
