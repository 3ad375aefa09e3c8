"""Native protocol: Qwen3 text parsing on real ORO outputs, API tool calls, reply coercion (§5.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.env.protocol_native import (
    assistant_from_openai,
    coerce_reply,
    parse_qwen3,
    parse_reply_native,
    split_think,
)
from shoparena.env.protocol_tags import tool_call_id
from shoparena.env.types import AssistantMessage, ToolCall
from shoparena.scoring.format import format_reward

KNOWN = frozenset({"find_product", "view_product_information", "recommend_product", "terminate"})


def _outputs(data_dir: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (data_dir / "oro_samples" / "outputs.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in rows}


def test_qwen3_parser_on_real_oro_outputs_keeps_malformed_filters_5_2(data_dir: Path) -> None:
    rows = _outputs(data_dir)
    expected = {
        "oro-eval-row-0": {"q": "dental elastics", "price": "above:10", "service": "lazmall"},
        "oro-eval-row-50": {"q": "patch one size color family 3", "price": "104", "page": 1},
        "oro-eval-row-53": {"q": "patch", "page": 1, "price": "139.0-157.0"},
    }
    for row_id, args in expected.items():
        p = parse_qwen3(rows[row_id]["raw_text"], KNOWN)
        assert p.errors == []
        assert p.calls == [{"name": "find_product", "parameters": args,
                            "tool_call_id": tool_call_id("find_product", args)}]
        assert p.think.startswith("I need to find") and "</think>" not in p.think
        assert p.response == ""
        assert format_reward(p.content) == 1.0  # re-rendered tag content passes the format check (§6.3)


def test_qwen3_parallel_blocks_and_text_response() -> None:
    text = ("<think>two calls</think>\n\n<tool_call>\n{\"name\": \"view_product_information\", \"arguments\": "
            "{\"product_ids\": \"1,2\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"terminate\", \"arguments\": {}}\n"
            "</tool_call>\nAll done.")
    p = parse_qwen3(text, KNOWN)
    assert [c["name"] for c in p.calls] == ["view_product_information", "terminate"]
    assert p.response == "All done."


def test_qwen3_only_complete_blocks_after_think_are_parsed() -> None:
    inside = ('<think>maybe <tool_call>{"name": "terminate", "arguments": {}}</tool_call> later</think>\n'
              '<tool_call>\n{"name": "find_product", "arguments": {"q": "x"}}\n</tool_call>\n<tool_call>\n{"name": "ter')
    p = parse_qwen3(inside, KNOWN)
    assert [c["name"] for c in p.calls] == ["find_product"]
    assert p.errors == ["unclosed <tool_call> block dropped"] and p.response == ""


def test_qwen3_unterminated_think_swallows_everything() -> None:
    p = parse_qwen3('<think>still thinking <tool_call>{"name": "terminate", "arguments": {}}</tool_call>', KNOWN)
    assert p.calls == [] and p.think.startswith("still thinking")


def test_qwen3_think_opening_tag_optional_and_malformed_block_noted() -> None:
    assert split_think("prefilled reasoning</think>\nrest") == ("prefilled reasoning", "\nrest")
    p = parse_qwen3('r</think><tool_call>{"name": "terminate", "arguments": {oops}}</tool_call>', KNOWN)
    assert p.calls == [] and p.errors[0].startswith("malformed <tool_call> block")


def test_qwen3_unknown_tool_skipped_and_no_think_uses_reasoning_content() -> None:
    p = parse_qwen3('<tool_call>{"name": "buy", "arguments": {}}</tool_call>', KNOWN, reasoning_content="api think")
    assert p.calls == [] and p.think == "api think" and p.errors == ["unknown tool 'buy' skipped"]


def test_api_tool_calls_win_and_keep_their_ids() -> None:
    reply = AssistantMessage(content="<think>t</think>Searching.", reasoning_content=None,
                             tool_calls=[ToolCall(id="call_1", name="find_product", arguments={"q": "bow"}),
                                         ToolCall(name="terminate", arguments={"status": "success"})])
    p = parse_reply_native(reply, KNOWN)
    assert [c["tool_call_id"] for c in p.calls] == ["call_1", "NR0gqQng"]
    assert p.think == "t" and p.response == "Searching."
    assert format_reward(p.content) == 1.0


def test_assistant_from_openai_decodes_string_arguments_and_drops_malformed() -> None:
    msg = {"role": "assistant", "content": None, "reasoning_content": "r",
           "tool_calls": [{"id": "a", "type": "function", "function": {"name": "find_product", "arguments": '{"q": "x"}'}},
                          {"id": "b", "type": "function", "function": {"name": "find_product", "arguments": "{bad"}},
                          {"id": "c", "type": "function", "function": {"name": "terminate", "arguments": ""}}]}
    out = assistant_from_openai(msg, {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                                     "completion_tokens_details": {"reasoning_tokens": 1}})
    assert [(t.id, t.arguments) for t in out.tool_calls] == [("a", {"q": "x"}), ("c", {})]
    assert out.content == "" and out.reasoning_content == "r" and out.usage and out.usage.total_tokens == 7


def test_coerce_reply_accepts_message_dict_and_str() -> None:
    assert coerce_reply("<think>x</think>").content == "<think>x</think>"
    flat = coerce_reply({"content": "c", "tool_calls": [{"id": "1", "name": "terminate", "arguments": {}}]})
    assert flat.tool_calls[0].name == "terminate"
    with pytest.raises(TypeError):
        coerce_reply(42)
