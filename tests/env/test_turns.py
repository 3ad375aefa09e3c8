"""The turn predicates (shoparena/env/turns.py): a stated decision, a call present (in ``tool_calls`` or written in the
content as the native parser reads it), a callless turn, the think-then-stop shape, and which callless turns come
while the episode is still open."""

from __future__ import annotations

from typing import Any

import pytest

from shoparena.env.turns import (
    call_names,
    callless,
    content_calls,
    has_call,
    open_callless_turns,
    states_decision,
    think_then_stop,
)


def _call(name: str, args: str = "{}") -> dict[str, Any]:
    return {"id": f"c-{name}", "type": "function", "function": {"name": name, "arguments": args}}


def _assistant(reasoning: str = "", content: str = "", *calls: str) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if calls:
        m["tool_calls"] = [_call(c) for c in calls]
    return m


@pytest.mark.parametrize("text", ["Recommending 5365307451 as it fits.", "I'll recommend the blue one.",
                                  "Let me recommend product 12.", "My final recommendation is 9.",
                                  "call recommend_product now", "We are going to recommend 3"])
def test_a_stated_decision_is_recognised(text: str) -> None:
    assert states_decision(text)


@pytest.mark.parametrize("text", ["Looking at the results.", "The recommended price range is 100-200.",
                                  "recommendations from the shop", ""])
def test_other_text_states_no_decision(text: str) -> None:
    assert not states_decision(text)


def test_a_call_in_tool_calls_is_a_call() -> None:
    m = _assistant("Recommending 1.", "", "recommend_product")
    assert has_call(m) and not callless(m) and not think_then_stop(m)
    assert call_names(m) == ["recommend_product"]


def test_a_turn_without_a_call_that_states_the_decision_is_think_then_stop() -> None:
    m = _assistant("The first result fits. Recommending 5365307451.")
    assert callless(m) and think_then_stop(m)
    assert callless(_assistant("Looking at the results.")) and not think_then_stop(_assistant("Looking at it."))
    assert think_then_stop(_assistant("", "I recommend 12."))  # in the text, not the reasoning


def test_a_complete_tool_call_block_in_the_content_is_a_call_as_the_native_parser_reads_it() -> None:
    block = '<tool_call>\n{"name": "recommend_product", "arguments": {"product_ids": "1"}}\n</tool_call>'
    m = _assistant("Recommending 1.", block)
    assert content_calls(m) == ["recommend_product"] and has_call(m) and not think_then_stop(m)
    # the record forms whose text was already parsed read tool_calls alone
    assert not has_call(m, parse_content=False) and think_then_stop(m, parse_content=False)
    # an unclosed block (a turn cut at the token cap) or a malformed one is no call: the parser drops it
    cut = _assistant("Recommending 1.", '<tool_call>\n{"name": "recommend_product", "argu')
    bad = _assistant("Recommending 1.", "<tool_call>\nnot json\n</tool_call>")
    assert content_calls(cut) == [] and think_then_stop(cut) and think_then_stop(bad)


def test_only_callless_turns_of_the_open_episode_count() -> None:
    msgs = [
        {"role": "system", "content": "s"}, {"role": "user", "content": "find a dress"},
        _assistant("Searching.", "", "find_product"), {"role": "tool", "content": "[]", "tool_call_id": "c"},
        _assistant("Recommending 1."),  # 1: callless, the episode still open
        _assistant("", "", "recommend_product"), {"role": "tool", "content": "ok", "tool_call_id": "c"},
        _assistant("Done.", "", "terminate"), {"role": "tool", "content": "ok", "tool_call_id": "c"},
        _assistant("", "Thanks, the task is complete."),  # 4: a closing text after terminate
    ]
    assert open_callless_turns(msgs) == [1]
    assert open_callless_turns([m for i, m in enumerate(msgs) if i != 4]) == []
    assert open_callless_turns(["not a message", {"role": "assistant", "content": "hm"}]) == [0]
