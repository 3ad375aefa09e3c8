"""``find_product`` / ``view_product_information`` semantics (docs/shoppingbench.md §2, §2.4, §9.10–9.12)."""

from __future__ import annotations

import pytest

from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.types import FIND_FIELDS, VIEW_FIELDS, Product
from shoparena.errors import ConfigError


@pytest.fixture(scope="module")
def index(tiny_products, tmp_path_factory) -> SearchIndex:
    return SearchIndex.build(tiny_products, tmp_path_factory.mktemp("s") / "ix")


@pytest.fixture(scope="module")
def upstream(index) -> SearchService:
    return SearchService(index)


@pytest.fixture(scope="module")
def strict(index) -> SearchService:
    return SearchService(index, mode="strict")


@pytest.fixture(scope="module")
def mugs(tmp_path_factory) -> SearchService:
    """60 products matching "mug": longer titles score lower, so relevance order is by title length, and the
    cheapest / best-selling products are ranked last."""
    products = []
    for i in range(60):
        title = "mug " + " ".join(f"w{j}" for j in range(i))
        products.append(Product(product_id=str(1000 + i), shop_id=str(i % 3), title=title,
                                price=float(100 - i), sold_count=i, service=["COD"] if i % 2 else []))
    return SearchService(SearchIndex.build(products, tmp_path_factory.mktemp("m") / "ix"))


def ids(items: list[dict]) -> list[str]:
    return [item["product_id"] for item in items]


def test_result_items_have_exactly_the_upstream_fields_2_1(upstream) -> None:
    items = upstream.find_product("violin")
    assert items and all(tuple(item) == FIND_FIELDS for item in items)
    assert items[0] == {"product_id": "3706669986", "shop_id": "3450032",
                        "title": "Heart String Violin Bows Full Size Handmade Horsetail Hair Violin Bow",
                        "price": 256.0, "service": ["COD"], "sold_count": 2}


def test_pages_of_ten_up_to_five_and_a_cap_of_fifty_2_1(mugs) -> None:
    pages = [ids(mugs.find_product("mug", page=p)) for p in range(1, 6)]
    assert [len(p) for p in pages] == [10] * 5
    flat = [i for p in pages for i in p]
    assert flat == [str(1000 + i) for i in range(50)]  # relevance order, 50 hits only
    assert mugs.find_product("mug", page="3") == mugs.find_product("mug", page=3)
    for bad in (0, 6, "x", "1.0", "", -1):
        assert mugs.find_product("mug", page=bad) == []


def test_sort_applies_only_to_the_fifty_kept_hits_2_1(mugs) -> None:
    cheapest = mugs.find_product("mug", sort="priceasc")
    # the 10 cheapest products overall (ids 1050..1059) are beyond the top 50, so they never appear
    assert ids(cheapest) == [str(1000 + i) for i in range(49, 39, -1)]
    assert ids(mugs.find_product("mug", sort="pricedesc"))[:3] == ["1000", "1001", "1002"]
    assert ids(mugs.find_product("mug", sort="order"))[:2] == ["1049", "1048"]
    # unknown sort values keep relevance order
    assert mugs.find_product("mug", sort="popular") == mugs.find_product("mug")


def test_sort_is_stable_over_relevance(tmp_path) -> None:
    products = [Product(product_id=str(i), shop_id="1", title="lamp " + "x " * i, price=5.0) for i in range(1, 6)]
    svc = SearchService(SearchIndex.build(products, tmp_path / "ix"))
    assert ids(svc.find_product("lamp", sort="priceasc")) == ids(svc.find_product("lamp"))


def test_price_filter_forms_upstream_2_1(mugs) -> None:
    assert {i["price"] for i in mugs.find_product("mug", price="95-97")} == {95.0, 96.0, 97.0}
    assert all(i["price"] >= 98 for i in mugs.find_product("mug", price="98-"))
    assert all(i["price"] <= 42 for i in mugs.find_product("mug", price="-42"))
    assert {i["price"] for i in mugs.find_product("mug", price="95.5-97.0")} == {96.0, 97.0}
    # malformed sides are no bound; malformed strings filter nothing (§9.11, real SFT-model outputs in §0)
    unfiltered = mugs.find_product("mug")
    for silly in ("above:10", "104", "lazmall", "1-2-3"):
        assert mugs.find_product("mug", price=silly) == unfiltered
    assert all(i["price"] >= 95 for i in mugs.find_product("mug", price="95-abc"))


def test_service_filter_requires_all_known_codes_and_ignores_unknown_2_1(upstream, mugs) -> None:
    got = mugs.find_product("mug", service="COD")
    assert got and all("COD" in i["service"] for i in got)
    assert mugs.find_product("mug", service="lazmall") == mugs.find_product("mug")
    assert mugs.find_product("mug", service="COD,lazmall") == got
    both = upstream.find_product("bluetooth earbuds power bank", service="official,COD")
    assert both and all({"official", "COD"} <= set(i["service"]) for i in both)


def test_shop_filter_is_exact_string_equality_2_1(upstream) -> None:
    got = upstream.find_product("violin guitar drum", shop_id="3450032")
    assert got and {i["shop_id"] for i in got} == {"3450032"}
    assert upstream.find_product("violin", shop_id="345003") == []
    assert upstream.find_product("violin", shop_id=" 3450032") == []


def test_strict_mode_names_the_bad_argument_2_4(strict, upstream) -> None:
    err = strict.find_product("mug", price="above:10")
    assert err["argument"] == "price" and "above:10" in err["error"] and "LOW-HIGH" in err["accepted"]
    err = strict.find_product("mug", service="lazmall")
    assert err["argument"] == "service" and "official" in err["accepted"]
    assert strict.find_product("mug", page=7)["argument"] == "page"
    assert strict.find_product("mug", sort="cheapest")["argument"] == "sort"
    assert strict.find_product("  ")["argument"] == "q"
    # well-formed arguments behave as upstream (strict also tolerates spaces around codes)
    assert strict.find_product("cotton", price="139.0-700") == upstream.find_product("cotton", price="139.0-700")
    assert strict.find_product("cotton", service="COD, freeShipping") == \
        upstream.find_product("cotton", service="COD,freeShipping")


def test_oro_flavour_strips_lucene_special_characters(index) -> None:
    oro = SearchService(index, flavor="oro")
    assert oro.find_product("men's t-shirt (cotton)") == oro.find_product("men's t shirt  cotton ")
    assert oro.find_product("+-&|!(){}[]^\"~*?:\\/") == []
    assert oro.capacity == 10_000 and SearchService(index).capacity == 100_000


def test_view_returns_the_view_fields_and_skips_unknown_ids_2_2(upstream, strict) -> None:
    items = upstream.view_product_information("591486855,nope,3706669986")
    assert ids(items) == ["591486855", "3706669986"]
    assert all(tuple(item) == VIEW_FIELDS for item in items)
    assert items[0]["sku_options"] == {"1": {"size": "16 inch"}, "2": {"size": "18 inch"}}
    # upstream does not strip: " 3706669986" is an unknown id (§9.1); strict strips
    assert ids(upstream.view_product_information("591486855, 3706669986")) == ["591486855"]
    assert ids(strict.view_product_information("591486855, 3706669986")) == ["591486855", "3706669986"]
    assert ids(upstream.view_product_information(["591486855", "3706669986"])) == ["591486855", "3706669986"]
    raw = upstream.get_product_raw("591486855")
    assert raw[0]["title"].startswith("Arborea") and raw[0]["price"] == 4350.0


def test_bad_mode_is_a_config_error(index) -> None:
    with pytest.raises(ConfigError):
        SearchService(index, mode="lenient")  # type: ignore[arg-type]
