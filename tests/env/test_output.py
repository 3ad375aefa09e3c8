"""validate_steps: one reason code per defect, the offending path, never an exception."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoparena.env.output import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_STEPS,
    REASON_CODES,
    OutputDefect,
    ValidSteps,
    parse_reason,
    validate_steps,
)
from shoparena.env.records import steps_to_messages
from shoparena.env.types import StepRecord


def good_step(i: int = 1, calls: list[dict[str, Any]] | None = None, **message: Any) -> dict[str, Any]:
    calls = calls if calls is not None else [{"name": "terminate", "parameters": {"status": "success"},
                                              "tool_call_id": f"id{i}"}]
    return {"completion": {"reasoning_content": "", "content": "<think>x</think>",
                           "message": {"think": "x", "tool_call": calls, **message}},
            "extra_info": {"step": i, "query": "violin bow", "timestamp": 1767225600000}}


def with_(path: list[Any], value: Any, *, delete: bool = False) -> list[dict[str, Any]]:
    """One good step with the value at ``path`` replaced (or deleted)."""
    steps = [good_step()]
    node: Any = steps[0]
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return steps


MSG = ["completion", "message"]
CALL = [*MSG, "tool_call", 0]

ISSUE_EXAMPLE = [{"completion": {"content": "", "message": {"think": "x", "tool_call": [
    {"name": "terminate", "parameters": {"status": "failure"}}]}}, "extra_info": {"step": 0, "query": ""}}]

deep: Any = "leaf"
for _ in range(MAX_DEPTH + 5):
    deep = [deep]


class Opaque:
    pass


CASES: dict[str, tuple[Any, str, str]] = {
    # name: (raw output, reason code, path of the offending element; "…" at the end: a prefix of it)
    "issue_example": (ISSUE_EXAMPLE, "tool_call_missing_id", "steps[0].completion.message.tool_call[0]"),
    "none": (None, "not_a_list", "steps"),
    "string": ("done", "not_a_list", "steps"),
    "object": ({"steps": []}, "not_a_list", "steps"),
    "opaque": ([good_step(), Opaque()], "not_json", "steps[1]"),
    "int_key": ([{1: "x"}], "not_json", "steps[0]"),
    "too_many_steps": ([good_step(i) for i in range(MAX_STEPS + 1)], "too_many_steps", "steps"),
    "too_large": ([good_step()] + [{"completion": "x" * (MAX_BYTES // 4)}] * 5, "too_large", "steps[4].completion"),
    "too_deep": (with_(["extra_info", "proxy_calls"], [{"x": deep}]), "too_deep",
                 "steps[0].extra_info.proxy_calls[0].x[0][0]…"),
    "nan": (with_([*CALL, "parameters", "price"], float("nan")), "non_finite_number",
            "steps[0].completion.message.tool_call[0].parameters.price"),
    "infinity": (with_(["extra_info", "timestamp"], float("-inf")), "non_finite_number",
                 "steps[0].extra_info.timestamp"),
    "huge_int": (with_([*CALL, "parameters", "page"], 2**64), "number_out_of_range",
                 "steps[0].completion.message.tool_call[0].parameters.page"),
    "surrogate": (with_([*MSG, "think"], "a\ud800b"), "invalid_utf8", "steps[0].completion.message.think"),
    "surrogate_key": (with_([*CALL, "parameters"], {"\udcff": 1}), "invalid_utf8",
                      "steps[0].completion.message.tool_call[0].parameters"),
    "step_int": ([good_step(), 3], "step_not_object", "steps[1]"),
    "missing_completion": (with_(["completion"], None, delete=True), "missing_completion", "steps[0]"),
    "missing_message": (with_([*MSG], None, delete=True), "missing_message", "steps[0].completion"),
    "missing_extra_info": (with_(["extra_info"], None, delete=True), "missing_extra_info", "steps[0]"),
    "missing_query": (with_(["extra_info", "query"], None, delete=True), "missing_key", "steps[0].extra_info"),
    "unknown_step_key": (with_(["reward"], 1.0), "unknown_key", "steps[0].reward"),
    "unknown_call_key": (with_([*CALL, "arguments"], {}), "unknown_key",
                         "steps[0].completion.message.tool_call[0].arguments"),
    "completion_str": (with_(["completion"], "text"), "wrong_type", "steps[0].completion"),
    "message_list": (with_([*MSG], []), "wrong_type", "steps[0].completion.message"),
    "think_int": (with_([*MSG, "think"], 3), "wrong_type", "steps[0].completion.message.think"),
    "step_bool": (with_(["extra_info", "step"], True), "wrong_type", "steps[0].extra_info.step"),
    "step_str": (with_(["extra_info", "step"], "1"), "wrong_type", "steps[0].extra_info.step"),
    "tool_call_dict": (with_([*MSG, "tool_call"], {"name": "terminate"}), "wrong_type",
                       "steps[0].completion.message.tool_call"),
    "call_str": (with_(CALL, "terminate"), "tool_call_not_object", "steps[0].completion.message.tool_call[0]"),
    "call_no_name": (with_([*CALL, "name"], None, delete=True), "tool_call_missing_name",
                     "steps[0].completion.message.tool_call[0]"),
    "call_id_int": (with_([*CALL, "tool_call_id"], 7), "tool_call_missing_id",
                    "steps[0].completion.message.tool_call[0]"),
    "params_str": (with_([*CALL, "parameters"], '{"status": "success"}'), "bad_arguments",
                   "steps[0].completion.message.tool_call[0].parameters"),
    "params_missing": (with_([*CALL, "parameters"], None, delete=True), "bad_arguments",
                       "steps[0].completion.message.tool_call[0].parameters"),
    "unknown_tool": (with_([*CALL, "name"], "rm_rf"), "unknown_tool",
                     "steps[0].completion.message.tool_call[0].name"),
    "obs_unknown_id": (with_([*MSG, "obs"], [{"tool_call_id": "nope", "results": []}]), "unknown_call_id",
                       "steps[0].completion.message.obs[0]"),
    "obs_no_id": (with_([*MSG, "obs"], [{"results": []}]), "missing_key", "steps[0].completion.message.obs[0]"),
    "timestamp_fraction": (with_(["extra_info", "timestamp"], 1.5), "bad_step", "steps[0].extra_info.timestamp"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_defect_has_one_reason_code_and_a_path(name: str) -> None:
    raw, code, path = CASES[name]
    got = validate_steps(raw)
    assert isinstance(got, OutputDefect), name
    assert got.code == code, (name, got)
    assert got.path.startswith(path[:-1]) if path.endswith("…") else got.path == path, (name, got)
    assert got.code in REASON_CODES and got.message
    assert parse_reason(got.describe()) == code and got.describe().startswith(f"INVALID_OUTPUT:{code}: ")


def test_every_reason_code_is_exercised() -> None:
    assert {code for _, code, _ in CASES.values()} == set(REASON_CODES)


def test_valid_steps_pass_and_satisfy_the_record_converters() -> None:
    calls = [{"name": "find_product", "parameters": {"q": "bow"}, "tool_call_id": "a", "result": [{"id": 1}]},
             {"name": "recommend_product", "parameters": {"product_ids": "no-such-id"}, "tool_call_id": "b"}]
    steps = [good_step(1, calls, obs=[{"tool_call_id": "b", "results": "ok"}], response="done"), good_step(2)]
    for raw in (steps, [], [good_step(1, [])]):
        got = validate_steps(raw)
        assert isinstance(got, ValidSteps) and got.steps == raw
        for step in got.steps:
            StepRecord.model_validate(step)
        json.dumps(steps_to_messages(got.steps)).encode("utf-8")  # never raises on validated steps


def test_tools_can_be_narrowed_and_bounds_passed() -> None:
    assert isinstance(validate_steps([good_step()], tools={"find_product"}), OutputDefect)
    got = validate_steps([good_step(i) for i in range(3)], max_steps=2)
    assert isinstance(got, OutputDefect) and got.code == "too_many_steps"


def test_long_paths_are_capped() -> None:
    nested: Any = {}
    for _ in range(300):
        nested = {"k": nested}
    got = validate_steps(with_(["extra_info", "x"], nested))
    assert isinstance(got, OutputDefect) and got.code == "too_deep"
    assert len(got.path) <= 200 and got.path.startswith("steps[0].extra_info.x.k")


def test_the_input_is_never_modified() -> None:
    raw = copy.deepcopy(ISSUE_EXAMPLE)
    validate_steps(raw)
    assert raw == ISSUE_EXAMPLE


# ── property: random JSON never raises ──────────────────────────────────────────────────────────────

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**64 + 2) | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(st.characters(exclude_categories=()), max_size=8))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


def _near(keys: dict[str, Any]) -> Any:
    """Objects with the step format's keys, each value mostly its right shape, else random JSON; now and then
    with keys left out."""
    full = st.fixed_dictionaries({k: st.one_of(v, v, v, json_values) for k, v in keys.items()})
    return full | full | full | st.fixed_dictionaries({}, optional={k: v | json_values for k, v in keys.items()})


calls = _near({"name": st.sampled_from(["terminate", "find_product", "nope"]), "parameters": json_values,
               "tool_call_id": st.sampled_from(["a", "b"]), "result": json_values})
messages = _near({"think": st.text(max_size=5), "response": st.text(max_size=5), "tool_call": st.lists(calls, max_size=3),
                  "obs": st.lists(_near({"tool_call_id": st.sampled_from(["a", "b", "c"]), "results": json_values}),
                                  max_size=2)})
steps = _near({"completion": _near({"content": st.text(max_size=5), "message": messages,
                                    "reasoning_content": st.none() | st.text(max_size=5)}),
               "extra_info": _near({"step": st.integers(), "query": st.text(max_size=5),
                                    "timestamp": st.integers() | st.floats()}),
               "prompt": st.lists(st.dictionaries(st.text(max_size=3), json_values, max_size=2), max_size=2)})
outputs = json_values | st.lists(steps | json_values, max_size=4) | st.lists(steps, max_size=4)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs)
def test_random_output_is_steps_or_a_known_defect(raw: Any) -> None:
    got = validate_steps(raw)
    if isinstance(got, OutputDefect):
        assert got.code in REASON_CODES and got.path.startswith("steps")
    else:
        assert isinstance(got, ValidSteps)
        msgs = steps_to_messages(got.steps)
        json.dumps(msgs, allow_nan=False).encode("utf-8")
