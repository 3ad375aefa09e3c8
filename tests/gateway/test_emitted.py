"""The tool calls a completion emitted, in native, tag-protocol and Qwen3 form (shoparena.llm.gateway.emitted)."""

from __future__ import annotations

import json

from shoparena.env.types import AssistantMessage, ToolCall
from shoparena.llm.gateway.emitted import emitted_calls


def test_native_calls_win_and_keep_their_ids() -> None:
    native = AssistantMessage(tool_calls=[ToolCall(id="call_1", name="find_product", arguments={"q": "a"}),
                                          ToolCall(name="terminate", arguments={"status": "success"})],
                              content='<tool_call>{"name": "ignored", "arguments": {}}</tool_call>')
    assert [(c["name"], c["arguments"], c["id"]) for c in emitted_calls(native)] == [
        ("find_product", {"q": "a"}, "call_1"), ("terminate", {"status": "success"}, "NR0gqQng")]


def test_tag_protocol_array() -> None:
    tag = AssistantMessage(content='<think>search first</think>\n<tool_call>[{"name": "find_product", '
                                   '"parameters": {"q": "violin bow", "page": 1}}, {"name": "terminate", '
                                   '"parameters": {"status": "success"}}]</tool_call>')
    calls = emitted_calls(tag)
    assert [c["name"] for c in calls] == ["find_product", "terminate"]
    assert calls[0]["id"] == "6MtnW7sD"  # the upstream MD5 id (docs/shoppingbench.md §5.1)


def test_qwen3_blocks_skip_malformed_ones() -> None:
    qwen = AssistantMessage(content="<think>two calls</think>\n" + "\n".join(
        f"<tool_call>\n{json.dumps({'name': 'view_product_information', 'arguments': {'product_ids': i}})}\n</tool_call>"
        for i in ("1", "2")) + "\n<tool_call>{broken</tool_call>\n<tool_call>{\"name\": \"x\"")
    assert [c["arguments"] for c in emitted_calls(qwen)] == [{"product_ids": "1"}, {"product_ids": "2"}]


def test_think_and_reasoning_text_are_not_emissions_when_real_calls_follow() -> None:
    text = ('<think>maybe <tool_call>{"name": "find_product", "arguments": {"q": "x"}}</tool_call></think>'
            '<tool_call>{"name": "find_product", "arguments": {"q": "y"}}</tool_call>')
    assert [c["arguments"]["q"] for c in emitted_calls(AssistantMessage(content=text))] == ["y"]
    reasoning = AssistantMessage(content="no calls", reasoning_content='<tool_call>{"name": "find_product"}</tool_call>')
    assert emitted_calls(reasoning) == []
    assert emitted_calls(AssistantMessage(content='<tool_call>[1, {"name": 3}]</tool_call>')) == []
