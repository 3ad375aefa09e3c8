"""format_reward, the per-step format score and the length reward (docs/shoppingbench.md §5.1, §7.3)."""

from __future__ import annotations

import pytest

from shoparena.scoring.format import (
    format_reward,
    length_reward,
    render_message,
    trajectory_format,
)
from shoparena.scoring.types import ParityFlags
from tests.scoring._scoring_helpers import recommend, step, terminate

CALL = '[{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}]'


@pytest.mark.parametrize("content", [
    f"<think>a</think>\n<tool_call>{CALL}</tool_call>",
    "<think>a</think>\n<response>done</response>",
    f"<think>a</think><tool_call>{CALL}</tool_call><response>r</response>",
    "<think>a</think><tool_call>[]</tool_call>",  # an empty call list passes, as upstream
    f"prefix <think>a</think> mid <tool_call> {CALL} </tool_call> suffix",
])
def test_well_formed_outputs_score_one_shoppingbench_7_3(content: str) -> None:
    assert format_reward(content) == 1.0


def test_think_required_in_think_mode_shoppingbench_7_3() -> None:
    assert format_reward(f"<tool_call>{CALL}</tool_call>") == 0.0
    assert format_reward(f"<tool_call>{CALL}</tool_call>", think=False) == 1.0


def test_tool_call_or_response_required_shoppingbench_7_3() -> None:
    assert format_reward("<think>only thinking</think>") == 0.0


def test_no_think_mode_checks_tool_call_only_as_upstream_ablation_shoppingbench_7_3() -> None:
    # roles = ["tool_call"]: response and think tags are not looked at, tool_call is required
    assert format_reward("<response>hi</response>", think=False) == 0.0
    assert format_reward(f"<think>x<think><tool_call>{CALL}</tool_call>", think=False) == 1.0


@pytest.mark.parametrize("content", [
    f"<think>a</think><think>b</think><tool_call>{CALL}</tool_call>",  # duplicate pair
    f"<think>a</think><tool_call>{CALL}</tool_call><tool_call>{CALL}</tool_call>",
    f"<think>a<tool_call>{CALL}</tool_call>",  # unbalanced think
    f"<think>a</think><tool_call>{CALL}",  # unbalanced tool_call
    "<think>a</think></response>r<response>",  # closes before opening
])
def test_each_tag_once_and_balanced_shoppingbench_7_3(content: str) -> None:
    assert format_reward(content) == 0.0


@pytest.mark.parametrize("content", [
    f"<think>a <tool_call>{CALL}</tool_call> b</think>",  # nested
    f"<think>a <tool_call>{CALL}</think></tool_call>",  # overlapping
    "<think>a <response>r</think></response>",
])
def test_no_nesting_or_overlap_shoppingbench_7_3(content: str) -> None:
    assert format_reward(content) == 0.0


def test_order_think_tool_call_response_shoppingbench_7_3() -> None:
    out_of_order = f"<think>a</think><response>r</response><tool_call>{CALL}</tool_call>"
    assert format_reward(out_of_order) == 0.0
    assert format_reward(f"<tool_call>{CALL}</tool_call><think>a</think>") == 0.0
    # the upstream/ORO prm.py we read has no order check: parity switch
    assert format_reward(out_of_order, check_order=False) == 1.0


@pytest.mark.parametrize("body", [
    '{"name": "find_product", "parameters": {}}',  # a dict, not a list
    '[{"name": "find_product"}]',  # no parameters
    '[{"parameters": {}}]',  # no name
    '[{"name": 3, "parameters": {}}]',  # name not a string
    '[{"name": "x", "parameters": "q=1"}]',  # parameters not an object
    '["name parameters"]',  # not an object
    "[{'name': 'x', 'parameters': {}}]",  # Python repr, not JSON
    "[{\"name\": \"x\", \"parameters\": {}}",  # truncated
])
def test_tool_call_must_be_json_list_of_name_parameters_shoppingbench_7_3(body: str) -> None:
    assert format_reward(f"<think>a</think><tool_call>{body}</tool_call>") == 0.0


def test_render_message_is_upstream_to_string_shoppingbench_6_1() -> None:
    msg = {"think": "t", "tool_call": [{"name": "terminate", "parameters": {"status": "success"}}],
           "obs": [{"x": 1}], "response": ""}
    assert render_message(msg) == ('<think>t</think>\n<tool_call>[{"name": "terminate", '
                                   '"parameters": {"status": "success"}}]</tool_call>')
    assert format_reward(render_message(msg)) == 1.0


def test_trajectory_format_is_mean_over_steps_shoppingbench_7_3() -> None:
    good = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}])
    bad = step(content="no tags at all")
    assert trajectory_format([good, bad, good, good], mode="upstream") == 0.75
    assert trajectory_format([], mode="upstream") == 0.0


def test_malformed_step_scores_zero_but_counts_shoppingbench_7_3() -> None:
    good = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}])
    assert trajectory_format([good, "garbage", {"completion": None}], mode="upstream") == pytest.approx(1 / 3)


@pytest.mark.parametrize("ts", [None, 0, -5, "1767225600000", True])
def test_strict_halves_steps_without_valid_timestamp_shoppingbench_7_3(ts: object) -> None:
    ok = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}])
    missing = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}], timestamp=ts)
    assert trajectory_format([ok, missing], mode="strict") == pytest.approx((1 + 0.5) / 2)
    assert trajectory_format([ok, missing], mode="upstream") == 1.0


def test_timestamp_penalty_leaves_zero_at_zero_shoppingbench_7_3() -> None:
    bad = step(content="nothing", timestamp=None)
    assert trajectory_format([bad], mode="strict") == 0.0


def test_format_source_content_vs_message_parity_shoppingbench_7_3() -> None:
    # raw output out of order; the parsed message re-renders in order (what upstream/ORO score)
    s = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}],
             content=f"<tool_call>{CALL}</tool_call><think>a</think>", think="a")
    assert trajectory_format([s], mode="upstream") == 0.0
    assert trajectory_format([s], mode="upstream", parity=ParityFlags.exact()) == 1.0


def test_format_falls_back_to_message_without_content_shoppingbench_6_1() -> None:
    s = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}])
    del s["completion"]["content"]
    assert trajectory_format([s], mode="upstream") == 1.0


def test_length_is_inverse_steps_when_last_step_terminates_shoppingbench_7_3() -> None:
    search = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}])
    assert length_reward([search, recommend("1"), terminate()]) == pytest.approx(1 / 3)
    assert length_reward([search, terminate(), recommend("1")]) == 0.0
    assert length_reward([]) == 0.0
    failure = step([{"name": "terminate", "parameters": {"status": "failure"}}])
    assert length_reward([failure]) == 1.0  # terminate.status is ignored (§9.8)
