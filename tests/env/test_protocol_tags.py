"""The tag text protocol: ids, parsing, history rendering (docs/shoppingbench.md §5.1)."""

from __future__ import annotations

from shoparena.env.protocol_tags import (
    TagHistory,
    parse_reply_tags,
    parse_tags,
    render_content,
    tool_call_id,
    ujson_dumps,
)
from shoparena.env.types import AssistantMessage, ToolCall
from shoparena.scoring.format import format_reward

KNOWN = frozenset({"find_product", "view_product_information", "recommend_product", "terminate"})


def test_tool_call_id_golden_shoppingbench_5_1() -> None:
    assert tool_call_id("find_product", {"q": "violin bow", "page": 1}) == "6MtnW7sD"
    assert tool_call_id("terminate", {"status": "success"}) == "NR0gqQng"


def test_tool_call_id_uses_python_repr_so_key_order_and_types_matter_5_1() -> None:
    a = tool_call_id("find_product", {"q": "violin bow", "page": 1})
    assert tool_call_id("find_product", {"page": 1, "q": "violin bow"}) != a
    assert tool_call_id("find_product", {"q": "violin bow", "page": "1"}) != a
    assert len(tool_call_id("x", {"flag": True, "none": None, "u": "ü"})) == 8


def test_parse_all_three_tags_first_occurrence_stripped_5_1() -> None:
    text = ('<think>  look for bows </think>\n<tool_call>[{"name": "find_product", "parameters": '
            '{"q": "violin bow", "page": 1}}]</tool_call>\n<response> ok </response><response>second</response>')
    p = parse_tags(text, None, KNOWN)
    assert p.think == "look for bows"
    assert p.calls == [{"name": "find_product", "parameters": {"q": "violin bow", "page": 1},
                        "tool_call_id": "6MtnW7sD"}]
    assert p.response == "ok"
    assert p.content == text and p.errors == []


def test_parse_no_think_takes_api_reasoning_content_5_1() -> None:
    p = parse_tags('<tool_call>[{"name": "terminate", "parameters": {"status": "success"}}]</tool_call>',
                   "<think>reasoned on the API side</think>", KNOWN)
    assert p.think == "reasoned on the API side"
    assert p.calls[0]["tool_call_id"] == "NR0gqQng"


def test_parse_single_dict_is_wrapped_in_a_list_5_1() -> None:
    p = parse_tags('<think>t</think><tool_call>{"name": "terminate", "parameters": {"status": "success"}}</tool_call>',
                   None, KNOWN)
    assert [c["name"] for c in p.calls] == ["terminate"]


def test_parse_unknown_tool_names_are_skipped_and_noted_5_1() -> None:
    p = parse_tags('<think>t</think><tool_call>[{"name": "buy_now", "parameters": {}}, '
                   '{"name": "terminate", "parameters": {"status": "success"}}]</tool_call>', None, KNOWN)
    assert [c["name"] for c in p.calls] == ["terminate"]
    assert p.errors == ["unknown tool 'buy_now' skipped"]


def test_parse_malformed_json_gives_no_calls_and_is_recorded_5_1() -> None:
    p = parse_tags('<think>t</think><tool_call>[{"name": "find_product", "parameters": {"q": }]</tool_call>',
                   None, KNOWN)
    assert p.calls == [] and p.think == "t"
    assert p.errors and p.errors[0].startswith("malformed <tool_call> JSON")
    assert not p.empty


def test_parse_missing_parameters_default_to_empty_like_oro() -> None:
    p = parse_tags('<think>t</think><tool_call>[{"name": "terminate"}]</tool_call>', None, KNOWN)
    assert p.calls == [{"name": "terminate", "parameters": {}, "tool_call_id": tool_call_id("terminate", {})}]


def test_parse_bad_items_are_skipped_individually() -> None:
    p = parse_tags('<think>t</think><tool_call>[1, {"name": "terminate", "parameters": "oops"}, '
                   '{"name": "terminate", "parameters": {"status": "failure"}}]</tool_call>', None, KNOWN)
    assert [c["parameters"] for c in p.calls] == [{"status": "failure"}]
    assert len(p.errors) == 2


def test_parse_empty_text_is_completely_empty_5_3() -> None:
    assert parse_tags("", None, KNOWN).empty
    assert parse_tags("just prose, no tags", None, KNOWN).empty
    assert parse_tags("<think></think>", None, KNOWN).empty  # (.+?) needs one character, as upstream


def test_parse_reply_ignores_api_tool_calls_in_the_tag_protocol() -> None:
    reply = AssistantMessage(content="<think>t</think>", tool_calls=[ToolCall(name="terminate")])
    p = parse_reply_tags(reply, KNOWN)
    assert p.calls == [] and "ignored" in p.errors[0]


def test_ujson_style_is_compact_ascii_with_escaped_slashes() -> None:
    assert ujson_dumps({"t": "6/8 ü", "n": [1, 2.5]}) == '{"t":"6\\/8 \\u00fc","n":[1,2.5]}'


def _turn() -> tuple[list[dict], list[dict]]:
    calls = [{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}, "tool_call_id": "6MtnW7sD"}]
    obs = [{"tool_call_id": "6MtnW7sD", "results": [{"product_id": "1", "title": "4/4 bow"}]}]
    return calls, obs


def test_history_upstream_rendering_5_1() -> None:
    h = TagHistory("I need a violin bow", "upstream")
    assert h.render() == "# Dialogue Records History\n<user>I need a violin bow</user>"
    calls, obs = _turn()
    h.add_turn("search first", calls, obs, "")
    h.add_turn("", [], [], "done")
    assert h.render() == (
        "# Dialogue Records History\n<user>I need a violin bow</user>\n\n"
        "<think>search first</think>\n"
        '<tool_call>[{"name":"find_product","parameters":{"q":"violin bow","page":1},"tool_call_id":"6MtnW7sD"}]'
        "</tool_call>\n"
        '<obs>[{"tool_call_id":"6MtnW7sD","results":[{"product_id":"1","title":"4\\/4 bow"}]}]</obs>\n\n'
        "<response>done</response>")
    assert [m["role"] for m in h.messages("SYS")] == ["system", "user"]


def test_history_oro_rendering_one_block_per_part_without_ids() -> None:
    h = TagHistory("q", "oro")
    calls, obs = _turn()
    h.add_turn("t", calls, obs, "r")
    assert h.render() == (
        "# Dialogue Records History\n<user>q</user>\n\n<think>t</think>\n\n"
        '<tool_call>[{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}]</tool_call>\n\n'
        '<obs>[{"tool_call_id": "6MtnW7sD", "results": [{"product_id": "1", "title": "4/4 bow"}]}]</obs>\n\n'
        "<response>r</response>")


def test_history_keeps_observations_untruncated_and_null() -> None:
    h = TagHistory("q")
    big = [{"product_id": str(i), "title": "x" * 500} for i in range(50)]
    h.add_turn("t", [{"name": "find_product", "parameters": {"q": "a"}, "tool_call_id": "A"},
                     {"name": "find_product", "parameters": {"q": "b"}, "tool_call_id": "B"}],
               [{"tool_call_id": "A", "results": big}, {"tool_call_id": "B", "results": None}], "")
    text = h.render()
    assert text.count("x" * 500) == 50 and '"results":null' in text


def test_render_content_is_accepted_by_format_reward_6_1() -> None:
    calls, _ = _turn()
    content = render_content("why", calls, "answer")
    assert content == ('<think>why</think>\n<tool_call>[{"name": "find_product", "parameters": '
                       '{"q": "violin bow", "page": 1}}]</tool_call>\n<response>answer</response>')
    assert format_reward(content) == 1.0
    assert render_content("", [], "") == ""
