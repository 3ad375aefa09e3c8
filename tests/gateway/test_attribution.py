"""The axis-attribution rule on its own (shoparena.llm.gateway.attribution), no HTTP."""

from __future__ import annotations

import json

from shoparena.llm.gateway.attribution import Attribution, Attributor, find_key, view_key


def test_find_key_normalises_what_the_tool_layer_normalises() -> None:
    base = find_key({"q": "violin bow", "page": "1"})
    assert find_key({"q": "violin bow"}) == base  # omitted page == 1
    assert find_key({"q": "violin  bow ", "page": 1}) == base  # int page, whitespace runs
    assert find_key({"query": "violin bow", "page": "01"}) == base  # the query alias
    assert find_key({"q": "violin bow", "sort": "default", "service": "default", "shop_id": ""}) == base
    assert find_key({"q": "x", "service": "COD,official"}) == find_key({"q": "x", "service": ["official", "COD"]})
    assert find_key({"q": "x", "service": "COD,default"}) == find_key({"q": "x", "service": "COD"})
    assert find_key({"q": "x", "shop_id": 3450032, "price": "0-100"}) == \
        find_key({"q": "x", "shop_id": "3450032", "price": "0-100"})
    assert find_key({"q": "x", "page": 2}) != find_key({"q": "x"})
    assert find_key({"q": "x", "sort": "priceasc"}) != find_key({"q": "x"})


def test_view_key_accepts_comma_text_arrays_and_product_id() -> None:
    assert view_key({"product_ids": "1, 2,"}) == ("1", "2")
    assert view_key({"product_ids": ["1", 2]}) == ("1", "2")
    assert view_key({"product_id": "7"}) == ("7",)
    assert view_key({"product_ids": "2,1"}) != view_key({"product_ids": "1,2"})


def test_direct_match_consumes_each_emission_once() -> None:
    att = Attributor()
    att.on_completion(3, [("find_product", {"q": "violin", "page": 1})])
    params = {"q": "violin", "page": "1"}
    assert att.attribute("find_product", params) == Attribution("A", None, 3)
    assert att.attribute("find_product", params) == Attribution("B")  # consumed


def test_two_emissions_justify_two_calls_earliest_first() -> None:
    att = Attributor()
    att.on_completion(1, [("view_product_information", {"product_ids": ["5"]})])
    att.on_completion(4, [("view_product_information", {"product_id": "5"})])
    assert att.attribute("view_product_information", {"product_ids": "5"}).attributed_to == 1
    assert att.attribute("view_product_information", {"product_ids": "5"}).attributed_to == 4
    assert att.attribute("view_product_information", {"product_ids": "5"}).axis == "B"


def test_calls_never_emitted_are_axis_b_and_other_tools_are_not_search_emissions() -> None:
    att = Attributor()
    att.on_completion(0, [("recommend_product", {"product_ids": "5"}), ("terminate", {"status": "success"}),
                          ("find_product", "not a dict")])
    assert att.attribute("view_product_information", {"product_ids": "5"}) == Attribution("B")
    assert att.attribute("find_product", {"q": "x"}) == Attribution("B")


def test_direct_emissions_survive_later_inference_requests() -> None:
    att = Attributor()
    att.on_completion(0, [("find_product", {"q": "a"})])
    att.on_inference_request()
    assert att.attribute("find_product", {"q": "a"}).axis == "A"


def test_check_product_match_admits_one_view_of_its_product_until_the_next_inference() -> None:
    att = Attributor()
    att.on_completion(2, [("check_product_match", {"product_id": "9", "requirements": "{}"})])
    assert att.attribute("view_product_information", {"product_ids": "8"}) == Attribution("B")
    assert att.attribute("view_product_information", {"product_ids": "9"}) == Attribution("A", "check_product_match", 2)
    assert att.attribute("view_product_information", {"product_ids": "9"}).axis == "B"  # budget 1
    att.on_completion(5, [("check_product_match", {"product_id": "9", "requirements": "{}"})])
    att.on_inference_request()  # the agent went back to the model: the window is closed
    assert att.attribute("view_product_information", {"product_ids": "9"}).axis == "B"


def test_find_products_in_same_shop_admits_exactly_its_reference_searches() -> None:
    att = Attributor()
    specs = [{"q": "violin bow", "price": "0-500", "service": "COD"}, {"q": "maple drum sticks pair", "price": "-200"}]
    att.on_completion(7, [("find_products_in_same_shop", {"product_queries": json.dumps(specs)})])
    via = Attribution("A", "find_products_in_same_shop", 7)
    assert att.attribute("find_product", {"q": "violin bow", "page": "1", "price": "0-500", "service": "COD"}) == via
    for q in ("maple drum sticks pair", "maple drum", "maple"):  # in any shop, with the spec's price, no service
        assert att.attribute("find_product", {"q": q, "page": "1", "shop_id": "3450032", "price": "-200"}) == via
    refused = [
        {"q": "violin bow", "page": "2", "price": "0-500", "service": "COD"},  # not page 1
        {"q": "maple drum", "page": "1", "price": "-200"},  # an in-shop spec without a shop
        {"q": "maple drum", "page": "1", "shop_id": "1", "price": "-200", "service": "COD"},  # service in-shop
        {"q": "maple drum", "page": "1", "shop_id": "1", "price": "-300"},  # other price
        {"q": "guitar", "page": "1", "shop_id": "1", "price": "-200"},  # not a spec
        {"q": "maple drum", "page": "1", "shop_id": "1", "price": "-200", "sort": "order"},
    ]
    for params in refused:
        assert att.attribute("find_product", params) == Attribution("B"), params
    assert att.attribute("view_product_information", {"product_ids": "1"}) == Attribution("B")


def test_same_shop_window_budget_is_bounded_by_what_the_tool_can_issue() -> None:
    att = Attributor()
    att.on_completion(0, [("find_products_in_same_shop", {"product_queries": [{"q": "a"}, {"q": "b"}]})])
    params = {"q": "b", "page": "1", "shop_id": "1"}
    got = [att.attribute("find_product", params).axis for _ in range(32)]
    assert got == ["A"] * 31 + ["B"]  # 1 + 30·(n−1) with n = 2


def test_in_shop_find_product_fallbacks_are_attributed_via_find_product() -> None:
    att = Attributor()
    emitted = {"q": "violin bow rosin", "page": 1, "shop_id": "3450032", "service": "COD"}
    att.on_completion(1, [("find_product", emitted)])
    assert att.attribute("find_product", {**emitted, "page": "1"}) == Attribution("A", None, 1)
    no_service = {"q": "violin bow rosin", "page": "1", "shop_id": "3450032"}
    two_words = {"q": "violin bow", "page": "1", "shop_id": "3450032"}
    assert att.attribute("find_product", no_service) == Attribution("A", "find_product", 1)
    assert att.attribute("find_product", two_words) == Attribution("A", "find_product", 1)
    assert att.attribute("find_product", two_words) == Attribution("B")  # budget 2
    # without a shop there are no fallbacks, and the emitted call itself is never a fallback
    att.on_completion(2, [("find_product", {"q": "violin bow rosin"})])
    att.attribute("find_product", {"q": "violin bow rosin"})
    assert att.attribute("find_product", {"q": "violin bow"}) == Attribution("B")
    assert att.attribute("find_product", {"q": "violin bow rosin"}) == Attribution("B")


def test_calculate_voucher_never_justifies_a_search() -> None:
    att = Attributor()
    att.on_completion(0, [("calculate_voucher", {"product_prices": "1,2", "voucher_type": "fixed",
                                                 "discount_value": 1, "threshold": 0, "budget": 5})])
    assert att.attribute("find_product", {"q": "1"}) == Attribution("B")


def test_direct_matches_win_over_windows() -> None:
    att = Attributor()
    att.on_completion(0, [("check_product_match", {"product_id": "9", "requirements": "{}"})])
    att.on_completion(1, [("view_product_information", {"product_ids": "9"})])
    assert att.attribute("view_product_information", {"product_ids": "9"}) == Attribution("A", None, 1)
    assert att.attribute("view_product_information", {"product_ids": "9"}) == Attribution("A", "check_product_match", 0)


def test_malformed_composite_arguments_open_no_window() -> None:
    att = Attributor()
    att.on_completion(0, [("find_products_in_same_shop", {"product_queries": "not json"}),
                          ("find_products_in_same_shop", {"product_queries": [1, 2]}),
                          ("check_product_match", {"requirements": "{}"})])
    assert att.attribute("find_product", {"q": "not json"}) == Attribution("B")
    assert att.attribute("view_product_information", {"product_ids": ""}) == Attribution("B")
