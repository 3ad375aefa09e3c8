"""Compact observation rendering (``shoparena.llm.compact``): what a short-context model sees of a tool result.
The results here come from the real ``upstream4`` tools over the real search service on the 20-product catalog
(the shared ``backend`` fixture)."""

from __future__ import annotations

import json
from typing import Any

from shoparena.catalog.search import SearchService
from shoparena.env.tools import ToolContext, get_toolset
from shoparena.llm.compact import CompactConfig, compact_messages


def _tool_message(name: str, args: dict[str, Any], backend: SearchService) -> dict[str, Any]:
    result = get_toolset("upstream4").execute(name, args, ToolContext(backend))
    return {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result, ensure_ascii=False)}


def _compact(message: dict[str, Any], config: CompactConfig) -> Any:
    return json.loads(compact_messages([message], config)[0]["content"])


def test_view_results_keep_the_attributes_and_sku_options_a_problem_asks_about(backend: SearchService) -> None:
    """upstream4's view_product_information answers with a JSON *list*: compaction must keep each product's
    details, not cut it to ``fields``, or a trained model is shown only ``{"product_id": …}``."""
    msg = _tool_message("view_product_information", {"product_ids": "3706669986,591486855"}, backend)
    assert isinstance(json.loads(msg["content"]), list)
    out = _compact(msg, CompactConfig(max_items=2, max_chars=4000))
    assert [p["product_id"] for p in out] == ["3706669986", "591486855"]
    assert out[0]["attributes"] == {"brand": ["heart string"], "material": ["horsetail"]}
    assert out[0]["sku_options"] == {"1": {"size": "1/4 violin bow"}, "2": {"size": "4/4 violin bow"}}
    assert all("description" not in p for p in out)  # long prose still goes
    bare = _compact(msg, CompactConfig(max_items=2, max_chars=4000, detail_fields=()))
    assert bare == [{"product_id": "3706669986"}, {"product_id": "591486855"}]  # the old rendering, on request


def test_search_results_are_cut_to_their_first_items_and_fields(backend: SearchService) -> None:
    msg = _tool_message("find_product", {"q": "violin"}, backend)
    full = json.loads(msg["content"])
    assert len(full) > 1
    out = _compact(msg, CompactConfig(max_items=1, fields=("product_id", "title"), max_chars=4000))
    assert out == [{"product_id": full[0]["product_id"], "title": full[0]["title"]}]


def test_dict_shaped_details_keep_the_same_fields_and_every_result_is_capped() -> None:
    """The ``{"<id>": {...}}`` shape some tools return is compacted like the list shape."""
    body = {"1": {"title": "t", "description": "long " * 50, "attributes": {"a": ["b"]}, "sku_options": {}},
            "2": {"title": "u", "attributes": {}}, "3": {"title": "v"}}
    msg = {"role": "tool", "content": json.dumps(body)}
    out = _compact(msg, CompactConfig(max_items=2, max_chars=4000))
    assert out == {"1": {"title": "t", "attributes": {"a": ["b"]}, "sku_options": {}}, "2": {"title": "u",
                                                                                          "attributes": {}}}
    capped = compact_messages([{"role": "tool", "content": "x" * 100}], CompactConfig(max_chars=20))[0]["content"]
    assert len(capped) == 20 and capped.endswith("…")


def test_fields_none_keeps_everything_and_other_roles_are_untouched(backend: SearchService) -> None:
    msg = _tool_message("view_product_information", {"product_ids": "3706669986"}, backend)
    assert _compact(msg, CompactConfig(fields=None, max_chars=4000)) == json.loads(msg["content"])
    user = {"role": "user", "content": msg["content"]}
    assert compact_messages([user], CompactConfig(max_chars=16)) == [user]
