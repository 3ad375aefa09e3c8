"""Tool registry, rendering, argument coercion and the ORO helper tools (docs/shoppingbench.md §4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.catalog.search import SearchService
from shoparena.env.tools import ToolContext, Toolset, get_toolset, normalize_tool_specs
from shoparena.errors import ConfigError


class SpyBackend:
    """Delegates to the real search service and records every find_product call's arguments."""

    def __init__(self, inner: SearchService) -> None:
        self.inner = inner
        self.finds: list[dict[str, Any]] = []
        self.views: list[Any] = []

    def find_product(self, q: str, page: int | str = 1, **kw: Any) -> Any:
        self.finds.append({"q": q, "page": page, **kw})
        return self.inner.find_product(q, page, **kw)

    def view_product_information(self, product_ids: Any) -> Any:
        self.views.append(product_ids)
        return self.inner.view_product_information(product_ids)


@pytest.fixture
def spy(backend: SearchService) -> SpyBackend:
    return SpyBackend(backend)


def run(tool: str, args: Any, backend: Any, profile: str = "upstream4", **ctx: Any) -> Any:
    ts = get_toolset(profile)
    return ts.execute(tool, args, ToolContext(backend, **ctx))


# ── registry and rendering (§4.1, §4.4) ──


def test_profiles_list_tools_in_upstream_and_oro_order_4_4() -> None:
    assert [t.name for t in get_toolset("upstream4").tools] == [
        "find_product", "view_product_information", "recommend_product", "terminate"]
    assert [t.name for t in get_toolset("oro7").tools] == [
        "find_product", "view_product_information", "recommend_product", "terminate",
        "check_product_match", "find_products_in_same_shop", "calculate_voucher"]
    extra = get_toolset("upstream4", web_search=True, python_execute=True)
    assert [t.name for t in extra.tools][-2:] == ["web_search", "python_execute"]


def test_unknown_profile_is_a_config_error_with_hint() -> None:
    with pytest.raises(ConfigError) as err:
        get_toolset("oro8")
    assert "oro7" in str(err.value)


@pytest.mark.parametrize("profile", ["upstream4", "oro7"])
def test_openai_function_specs_4_4(profile: str) -> None:
    for spec in get_toolset(profile).specs():
        assert set(spec) == {"type", "function"} and spec["type"] == "function"
        fn = spec["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert fn["parameters"]["type"] == "object" and fn["description"]
        json.dumps(spec)


@pytest.mark.parametrize("profile", ["upstream4", "oro7"])
def test_upstream_text_rendering_4_1(profile: str) -> None:
    ts = get_toolset(profile)
    text = ts.text()
    blocks = text.split("\n\n")
    assert len(blocks) == len(ts.tools)
    for i, (block, tool) in enumerate(zip(blocks, ts.tools, strict=True), 1):
        name, desc, params = block.split("\n", 2)
        assert name == f"{i}. Name: {tool.name}"
        assert desc.startswith("Description: ")
        assert params.startswith('Parameters: {"type":"object","properties":{')  # ujson: compact
        assert json.loads(params.removeprefix("Parameters: ")) == tool.parameters


def test_upstream_descriptions_verbatim_4_1() -> None:
    ts = get_toolset("upstream4")
    assert ts["find_product"].to_text().startswith(
        "Name: find_product\nDescription: Search for products and return up to 10 products, with each product "
        "including a product_id, shop_id, title, price, service, and sold_count.\nParameters: ")
    assert ts["recommend_product"].description.startswith('"Recommend the products')  # upstream's stray quote
    assert ts["find_product"].parameters["required"] == ["q", "page"]
    assert ts["terminate"].parameters["properties"]["status"]["enum"] == ["success", "failure"]


def test_oro_sft_profile_matches_the_released_rows_4_3(data_dir: Path) -> None:
    row = json.loads((data_dir / "oro_samples" / "inputs.jsonl").read_text().splitlines()[0])
    ours = [t.flat_spec() for t in get_toolset("oro_sft4").tools]
    assert ours == row["tools"]
    assert normalize_tool_specs(row["tools"]) == get_toolset("oro_sft4").specs()
    assert normalize_tool_specs(get_toolset("oro7").specs()) == get_toolset("oro7").specs()


# ── find_product: strings unchanged, upstream dropping rules, coercion (§4.1, §4.4) ──


def test_find_product_passes_strings_unchanged_and_drops_empty_and_default(spy: SpyBackend) -> None:
    out = run("find_product", {"q": "violin bow", "page": 1, "price": "above:10", "service": "lazmall",
                               "sort": "default", "shop_id": ""}, spy)
    assert spy.finds[-1] == {"q": "violin bow", "page": 1, "price": "above:10", "service": "lazmall"}
    assert [p["product_id"] for p in out] == ["3706669986", "1203344556"]  # malformed filters filter nothing
    run("find_product", {"q": "violin", "page": 1, "service": "COD,default", "sort": "priceasc"}, spy)
    assert spy.finds[-1] == {"q": "violin", "page": 1, "service": "COD", "sort": "priceasc"}
    run("find_product", {"q": "violin", "page": 1, "service": "default", "price": 104, "shop_id": 3450032}, spy)
    assert spy.finds[-1] == {"q": "violin", "page": 1, "price": "104", "shop_id": "3450032"}


def test_find_product_query_alias_and_page_coercion_4_4(spy: SpyBackend) -> None:
    run("find_product", {"query": "cymbal", "page": "2"}, spy)
    assert spy.finds[-1] == {"q": "cymbal", "page": 2}
    run("find_product", {"q": "cymbal"}, spy)  # ORO: page defaults to 1
    assert spy.finds[-1]["page"] == 1


@pytest.mark.parametrize(("args", "argument"), [
    ({"page": 1}, "q"), ({"q": "x", "page": "abc"}, "page"), ({"q": "x", "page": True}, "page"),
    ({"q": "x", "page": 1.5}, "page"), ({"q": ["a"], "page": 1}, "q"), ({"q": "x", "price": {"lo": 1}}, "price"),
])
def test_invalid_arguments_are_error_observations_not_exceptions(spy: SpyBackend, args: dict, argument: str) -> None:
    out = run("find_product", args, spy)
    assert out["tool"] == "find_product" and out["argument"] == argument and out["error"]
    assert spy.finds == []


def test_out_of_range_page_follows_the_backend(backend: SearchService, strict_backend: SearchService) -> None:
    assert run("find_product", {"q": "violin", "page": 9}, backend) == []
    assert run("find_product", {"q": "violin", "page": 9}, strict_backend)["argument"] == "page"
    assert run("find_product", {"q": "violin", "price": "above:10"}, strict_backend)["argument"] == "price"


def test_execute_never_raises() -> None:
    ts: Toolset = get_toolset("upstream4")
    ctx = ToolContext(None)
    assert ts.execute("buy_now", {}, ctx)["available"] == sorted(ts.names)
    assert ts.execute("terminate", ["success"], ctx)["error"] == "arguments must be a JSON object"
    assert "search backend" in ts.execute("find_product", {"q": "x"}, ctx)["error"]

    class Broken:
        def find_product(self, *a: Any, **k: Any) -> Any:
            raise ConnectionError("search server down")

    out = ts.execute("find_product", {"q": "x"}, ToolContext(Broken()))  # type: ignore[arg-type]
    assert out == {"error": "ConnectionError: search server down", "tool": "find_product"}


# ── view / recommend / terminate / offline tools ──


@pytest.mark.parametrize("args", [{"product_ids": "3706669986,591486855"}, {"product_ids": ["3706669986", 591486855]}])
def test_view_accepts_comma_string_or_array_4_4(spy: SpyBackend, args: dict) -> None:
    out = run("view_product_information", args, spy)
    assert [p["product_id"] for p in out] == ["3706669986", "591486855"]
    assert spy.views[-1] == "3706669986,591486855"
    assert set(out[0]) == {"product_id", "short_description", "description", "sku_options", "attributes"}


def test_view_product_id_alone_and_missing_ids(spy: SpyBackend) -> None:
    assert [p["product_id"] for p in run("view_product_information", {"product_id": "591486855"}, spy)] == ["591486855"]
    assert run("view_product_information", {}, spy)["argument"] == "product_ids"


def test_recommend_echoes_and_terminate_echoes_status_4_1() -> None:
    assert run("recommend_product", {"product_ids": "1,2"}, None) == \
        "Having recommended the products to the user: 1,2."
    assert run("recommend_product", {"product_ids": ["1", "2"]}, None) == \
        "Having recommended the products to the user: 1,2."
    assert run("recommend_product", {}, None)["argument"] == "product_ids"
    assert run("terminate", {"status": "failure"}, None) == "The interaction has been completed with status: failure"
    assert run("terminate", {}, None) == "The interaction has been completed with status: success"


def test_web_search_and_python_execute_are_offline_errors_4_1() -> None:
    ts = get_toolset("upstream4", web_search=True, python_execute=True)
    assert "offline" in ts.execute("web_search", {"q": "popmart"}, ToolContext(None))["error"]
    assert "disabled" in ts.execute("python_execute", {"code": "print(1)"}, ToolContext(None))["error"]


# ── ORO tools (§4.2) ──


def test_check_product_match_sku_bug_fixed_vs_parity_4_2(backend: SearchService) -> None:
    reqs = {"size": "4/4 violin bow"}  # only in 3706669986's SKU values
    fixed = run("check_product_match", {"product_id": "3706669986", "requirements": json.dumps(reqs)}, backend, "oro7")
    assert fixed["matched"] is True and fixed["matches"] == ["size"]
    buggy = run("check_product_match", {"product_id": "3706669986", "requirements": json.dumps(reqs)}, backend,
                "oro7", sku_bug_parity=True)
    assert buggy["matched"] is False and buggy["mismatches"] == ["size"]
    assert buggy["product_summary"] == {"product_id": "3706669986",
                                        "attributes": {"brand": ["heart string"], "material": ["horsetail"]}}


def test_check_product_match_attributes_substring_and_errors(backend: SearchService) -> None:
    out = run("check_product_match", {"product_id": "3706669986",
                                      "requirements": {"Brand": "Heart", "color": "red"}}, backend, "oro7")
    assert out["matches"] == ["Brand"] and out["mismatches"] == ["color"] and out["matched"] is False
    assert run("check_product_match", {"product_id": "1", "requirements": "{bad"}, backend, "oro7") == \
        {"matched": False, "error": "Invalid requirements JSON"}
    assert run("check_product_match", {"product_id": "999", "requirements": '{"a": "b"}'}, backend, "oro7") == \
        {"matched": False, "error": "Product not found", "matches": [], "mismatches": ["a"]}
    assert run("check_product_match", {"product_id": "1", "requirements": "[1]"}, backend, "oro7")["argument"] == \
        "requirements"


def test_find_products_in_same_shop_on_the_music_shop_4_2(backend: SearchService) -> None:
    specs = [{"q": "violin bow"}, {"q": "cymbal"}, {"q": "guitar strings"}, {"q": "drum sticks", "price": "0-200"}]
    out = run("find_products_in_same_shop", {"product_queries": json.dumps(specs)}, backend, "oro7")
    assert out["found"] is True and out["shop_id"] == "3450032" and out["shops_tried"] == 1
    assert [p["product_id"] for p in out["products"]] == ["3706669986", "591486855", "1203344557", "1203344558"]
    assert set(out["products"][0]) == {"product_id", "title", "price", "shop_id"}


def test_find_products_in_same_shop_tries_the_next_shop_and_fails_cleanly(backend: SearchService) -> None:
    out = run("find_products_in_same_shop", {"product_queries": [{"q": "drum sticks"}, {"q": "rice cooker"}]},
              backend, "oro7")
    assert out["found"] is True and out["shop_id"] == "4648081" and out["shops_tried"] == 2
    miss = run("find_products_in_same_shop", {"product_queries": [{"q": "violin bow"}, {"q": "earbuds"}]},
               backend, "oro7")
    assert miss == {"found": False, "error": "Could not find all 2 products in any single shop", "shops_tried": 1}
    assert run("find_products_in_same_shop", {"product_queries": "[]"}, backend, "oro7")["found"] is False
    assert run("find_products_in_same_shop", {"product_queries": "nope"}, backend, "oro7") == \
        {"found": False, "error": "Invalid JSON for product_queries"}
    none = run("find_products_in_same_shop", {"product_queries": [{"q": "zzzqqq"}]}, backend, "oro7")
    assert none["found"] is False and none["shops_tried"] == 0


def test_oro_find_product_in_shop_fallbacks_4_2(spy: SpyBackend) -> None:
    args = {"q": "maple drum sticks", "page": 1, "shop_id": "3450032", "service": "official"}
    assert run("find_product", args, spy, "upstream4") == []
    spy.finds.clear()
    out = run("find_product", args, spy, "oro7", shop_fallbacks=True)
    assert out[0]["product_id"] == "1203344558"
    assert [("service" in f) for f in spy.finds] == [True, False]
    spy.finds.clear()
    run("find_product", {"q": "zzz qqq xxx", "shop_id": "3450032", "service": "COD"}, spy, "oro7", shop_fallbacks=True)
    assert [(f["q"], "service" in f) for f in spy.finds] == [("zzz qqq xxx", True), ("zzz qqq xxx", False),
                                                            ("zzz qqq", False)]


def voucher(**kw: Any) -> dict[str, Any]:
    return run("calculate_voucher", kw, None, "oro7")


def test_calculate_voucher_oro_semantics_4_2() -> None:
    fixed = voucher(product_prices="100,50", voucher_type="fixed", discount_value=18, threshold=100, budget=140)
    assert fixed == {"prices": [100.0, 50.0], "total_before": 150.0, "discount_amount": 18, "total_after": 132.0,
                     "within_budget": True, "voucher_applied": True, "budget": 140}
    pct = voucher(product_prices="339", voucher_type="percentage", discount_value=34, threshold=65, budget=293, cap=60)
    assert (pct["discount_amount"], pct["total_after"], pct["within_budget"]) == (60, 279.0, True)  # §7.3 example
    uncapped = voucher(product_prices="200", voucher_type="percentage", discount_value=42, threshold=10, budget=100)
    assert uncapped["discount_amount"] == 84.0 and uncapped["within_budget"] is False  # 42 means 42 %, cap 0 = none
    at = voucher(product_prices="60,40", voucher_type="fixed", discount_value=10, threshold=100, budget=95)
    assert at["voucher_applied"] is True and at["total_after"] == 90.0  # threshold is >=
    below = voucher(product_prices="99.5", voucher_type="fixed", discount_value=10, threshold=100, budget=95)
    assert below["voucher_applied"] is False and below["discount_amount"] == 0.0
    scope = voucher(product_prices="150", voucher_type="platform", discount_value=10, threshold=100, budget=200)
    assert scope["voucher_applied"] is True and scope["discount_amount"] == 0.0  # scope is ignored


def test_calculate_voucher_coercion_and_errors() -> None:
    lst = voucher(product_prices=[100, "50"], voucher_type="fixed", discount_value="18", threshold="100", budget="140")
    assert lst["total_after"] == 132.0
    assert voucher(product_prices="1,x", voucher_type="fixed", discount_value=1, threshold=1, budget=1) == \
        {"error": "Invalid product_prices format. Use comma-separated numbers."}
    assert voucher(product_prices="1", voucher_type="fixed", threshold=1, budget=1)["argument"] == "discount_value"
    assert voucher(product_prices="1", voucher_type="fixed", discount_value="ten", threshold=1,
                   budget=1)["argument"] == "discount_value"


def test_tool_classification_covers_every_registered_tool_once() -> None:
    from shoparena.env import tools

    oro7 = get_toolset("oro7", web_search=True, python_execute=True)
    assert {tools.tool_kind(n) for n in oro7.names} == {"search", "composite", "answer", "optional"}
    assert tools.tool_kind("find_products") is None and tools.tool_kind("") is None
    kinds = (tools.SEARCH_TOOLS, tools.COMPOSITE_TOOLS, tools.ANSWER_TOOLS, frozenset(tools.OPTIONAL_TOOLS))
    union: frozenset[str] = frozenset().union(*kinds)
    assert sum(len(k) for k in kinds) == len(oro7.names) == len(union)  # disjoint and complete
    assert tools.SEARCH_TOOLS | tools.ANSWER_TOOLS == frozenset(tools.PROFILES["upstream4"])
    assert tools.VERIFY_TOOLS <= tools.SEARCH_TOOLS | tools.COMPOSITE_TOOLS
    assert tools.LISTING_TOOLS <= tools.SEARCH_TOOLS | tools.COMPOSITE_TOOLS
    assert not tools.NON_SEARCH_TOOLS & (tools.SEARCH_TOOLS | {"web_search"})


def test_every_package_reads_the_one_classification() -> None:
    from shoparena.corpus.normalize import NON_SEARCH_TOOLS
    from shoparena.corpus.rewrite import FINAL_TOOLS, SEARCH_TOOLS
    from shoparena.env import tools
    from shoparena.llm.gateway import COMPOSITE_TOOLS
    from shoparena.llm.gateway.app import SEARCH_PATHS
    from shoparena.llm.policies.state import UPSTREAM4

    assert SEARCH_TOOLS is tools.SEARCH_TOOLS and COMPOSITE_TOOLS is tools.COMPOSITE_TOOLS
    assert FINAL_TOOLS is tools.ANSWER_TOOLS and NON_SEARCH_TOOLS is tools.NON_SEARCH_TOOLS
    assert set(SEARCH_PATHS.values()) == tools.SEARCH_TOOLS
    assert all(path == f"/search/{name}" for path, name in SEARCH_PATHS.items())
    assert UPSTREAM4 == frozenset(tools.PROFILES["upstream4"])
