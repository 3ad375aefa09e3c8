"""Per-item rules (docs/shoppingbench.md §7.2), on the 20-product fixture with a similarity the test controls."""

from __future__ import annotations

from typing import Any

import pytest

from shoparena.catalog.types import Product
from shoparena.scoring.items import axis_totals, score_item
from shoparena.scoring.types import FIELDS, Mode
from shoparena.tasks.types import RewardItem
from tests.scoring._scoring_helpers import FixedSimilarity

BOW = "3706669986"  # 256.0, shop 3450032, service [COD], sku size 1/4|4/4 violin bow, material horsetail
SHOES = "4428034196"  # 899.0, variants {eu:42 black}, {eu:43 white}, {eu:42 white}


def item(**kw: Any) -> RewardItem:
    kw.setdefault("product_id", "999")
    kw.setdefault("title", ["Some GT Title"])
    return RewardItem.model_validate(kw)


def run(product: Product | None, it: RewardItem, mode: Mode = "upstream", sim: float = 1.0) -> Any:
    return score_item(product, it, position=0, product_id=product.product_id if product else None,
                      mode=mode, similarity=FixedSimilarity(sim))


@pytest.mark.parametrize("mode", ["upstream", "strict"])
def test_gt_id_short_circuits_rule_one_all_axes_hit_shoppingbench_7_2(by_id: dict[str, Product], mode: Mode) -> None:
    it = item(product_id=BOW, price=[{"greater than": [100000, None]}], service=["official"])
    sim = FixedSimilarity(0.0)
    s = score_item(by_id[BOW], it, position=0, product_id=BOW, mode=mode, similarity=sim)
    assert (s.gt, s.rule, s.short_circuit, s.hit) == (1.0, 1.0, True, True)
    assert s.axes["price"].hits == s.axes["price"].total == 1  # reported hit though the price misses
    assert s.axes["service"].score == 1.0 and s.axes["title"].score == 1.0
    absent = 1.0 if mode == "upstream" else 0.0
    assert s.axes["sku & attrs"].total == 0 and s.axes["sku & attrs"].score == absent
    assert sim.calls == []  # no similarity computed on a GT match


def test_absent_axis_scores_one_upstream_zero_strict_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    it = item()  # title only
    up, st = run(by_id[BOW], it, "upstream"), run(by_id[BOW], it, "strict")
    assert up.rule == st.rule == 1.0
    for f in ("price", "service", "sku & attrs"):
        assert up.axes[f].score == 1.0
        assert st.axes[f].score == 0.0
    assert up.axes["title"].score == st.axes["title"].score == 1.0


@pytest.mark.parametrize("mode", ["upstream", "strict"])
def test_no_scoreable_constraint_rule_zero_shoppingbench_7_2(by_id: dict[str, Product], mode: Mode) -> None:
    it = item(title=[])
    assert run(by_id[BOW], it, mode).rule == 0.0
    assert run(by_id[BOW], item(product_id=BOW, title=[]), mode).rule == 1.0  # GT still short-circuits


@pytest.mark.parametrize(("sim", "upstream_hit", "strict_hit"), [
    (0.5, 1, 0), (0.4999, 0, 0), (0.7, 1, 1), (0.6999, 1, 0), (1.0, 1, 1), (0.0, 0, 0),
])
def test_title_thresholds_inclusive_half_and_seven_tenths_shoppingbench_7_2(
    by_id: dict[str, Product], sim: float, upstream_hit: int, strict_hit: int,
) -> None:
    it = item()
    assert run(by_id[BOW], it, "upstream", sim).axes["title"].hits == upstream_hit
    assert run(by_id[BOW], it, "strict", sim).axes["title"].hits == strict_hit
    assert run(by_id[BOW], it, "strict", sim).title_similarity == sim


def test_similarity_called_with_candidate_then_gt_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    sim = FixedSimilarity(0.9)
    score_item(by_id[BOW], item(title=["GT A", "GT B"]), position=0, product_id=BOW, mode="upstream",
               similarity=sim)
    assert sim.calls == [(by_id[BOW].title, "GT A"), (by_id[BOW].title, "GT B")]


@pytest.mark.parametrize(("entry", "hit"), [
    ({"between": [256, 300]}, 1), ({"between": [200, 256]}, 1), ({"between": [257, 300]}, 0),
    ({"greater than": [256, None]}, 1), ({"greater than": [257, None]}, 0),
    ({"less than": [None, 256]}, 1), ({"less than": [None, 255]}, 0),
])
def test_price_bounds_inclusive_shoppingbench_7_2(by_id: dict[str, Product], entry: dict, hit: int) -> None:
    s = run(by_id[BOW], item(price=[entry]), "strict")
    assert (s.axes["price"].hits, s.axes["price"].total) == (hit, 1)


def test_service_one_constraint_per_code_exact_case_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    s = run(by_id[BOW], item(service=["COD", "freeShipping", "cod"]))
    assert (s.axes["service"].hits, s.axes["service"].total) == (1, 3)


def test_sku_pairs_must_come_from_one_variant_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    # eu:43 exists only with white, black only with eu:42: no single variant has both
    mixed = run(by_id[SHOES], item(sku_options=[{"shoe size": "eu:43", "color_family": "black"}]))
    assert (mixed.axes["sku & attrs"].hits, mixed.axes["sku & attrs"].total) == (1, 2)
    one = run(by_id[SHOES], item(sku_options=[{"shoe size": "eu:42", "color_family": "white"}]))
    assert (one.axes["sku & attrs"].hits, one.axes["sku & attrs"].total) == (2, 2)


def test_attribute_pairs_and_sku_pairs_share_one_axis_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    it = item(sku_options=[{"shoe size": "eu:43"}],
              attributes=[{"clothing_material": ["mesh"]}, {"fa_pattern": ["floral"]}])
    s = run(by_id[SHOES], it)
    assert (s.axes["sku & attrs"].hits, s.axes["sku & attrs"].total) == (2, 3)
    # an attribute constraint may be met by a SKU pair and a SKU constraint by an attribute
    bow = run(by_id[BOW], item(sku_options=[{"material": "horsetail"}], attributes=[{"size": ["4/4 violin bow"]}]))
    assert bow.axes["sku & attrs"].hits == 2


def test_attribute_value_list_membership_exact_key_shoppingbench_7_2() -> None:
    p = Product(product_id="1", shop_id="9", title="t", price=1.0, attributes={"color": ["red", "blue"]})
    assert run(p, item(attributes=[{"color": ["blue"]}])).axes["sku & attrs"].hits == 1
    assert run(p, item(attributes=[{"colour": ["blue"]}])).axes["sku & attrs"].hits == 0
    assert run(p, item(attributes=[{"color": ["Blue"]}])).axes["sku & attrs"].hits == 0  # exact strings


def test_rule_is_hits_over_all_atomic_constraints_shoppingbench_7_2(by_id: dict[str, Product]) -> None:
    it = item(price=[{"greater than": [1000, None]}], service=["COD", "official"],
              sku_options=[{"size": "4/4 violin bow"}], attributes=[{"material": ["nylon"]}])
    s = run(by_id[BOW], it, "upstream", sim=0.6)
    # title 1/1, price 0/1, service 1/2, sku & attrs 1/2  →  3/6
    assert s.rule == pytest.approx(0.5)
    assert {f: s.axes[f].score for f in FIELDS} == {"title": 1.0, "price": 0.0, "service": 0.5, "sku & attrs": 0.5}
    assert run(by_id[BOW], it, "strict", sim=0.6).rule == pytest.approx(2 / 6)


def test_unresolved_item_scores_zero_keeps_totals_shoppingbench_7_3() -> None:
    it = item(price=[{"between": [1, 2]}], service=["COD"], attributes=[{"a": ["b"]}, {"c": ["d"]}])
    s = run(None, it)
    assert (s.resolved, s.gt, s.rule, s.hit) == (False, 0.0, 0.0, False)
    assert {f: s.axes[f].total for f in FIELDS} == axis_totals(it) == {
        "title": 1, "price": 1, "service": 1, "sku & attrs": 2}
    assert all(s.axes[f].score == 0.0 for f in FIELDS)


def test_hit_is_resolved_upstream_rule_positive_strict_shoppingbench_7_3(by_id: dict[str, Product]) -> None:
    wrong = item(attributes=[{"material": ["nylon"]}])
    assert run(by_id[BOW], wrong, "upstream", sim=0.0).hit is True
    assert run(by_id[BOW], wrong, "strict", sim=0.0).hit is False
    assert run(by_id[BOW], wrong, "strict", sim=0.9).hit is True
