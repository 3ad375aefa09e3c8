"""Problem checks shared by the generator and the tests: solvability against the GT and the difficulty rule.

:func:`check_solvable` is the generator's assertion (docs/shoppingbench.md §3.7, our rule): every GT product satisfies
every constraint of its own reward item (``tasks/constraints.py``: price, service and SKU/attribute axes all hit),
a shop problem's GT products share one shop, and a voucher problem's GT bundle is within budget under the scorer's
rule (``within_budget``) with a consistent ``price_after_voucher`` and the §3.4 budget rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shoparena.catalog.types import Product
from shoparena.tasks.constraints import (
    price_axis,
    service_axis,
    sku_attr_axis,
    voucher_applies,
    voucher_discounted,
    within_budget,
)
from shoparena.tasks.stats import budget_rule_holds
from shoparena.tasks.types import Problem, RewardItem


class GeneratorBug(RuntimeError):
    """A generated problem whose ground truth violates its own constraints (never a user error)."""


class _Lookup(Protocol):
    def get(self, product_id: str, /) -> Product | None: ...


def atomic_constraints(item: RewardItem) -> int:
    """Non-title atomic constraints of one item: price entries + service codes + SKU/attribute pairs."""
    return sum(len(e) for e in item.price or []) + len(item.service or []) + len(item.sku_attr_pairs())


def difficulty_of(bucket: str, reward: Sequence[RewardItem]) -> str:
    """Our difficulty rule (ORO's is not public, docs/shoppingbench.md §0).

    One item: ≤ 2 non-title constraints easy, ≤ 4 medium, else hard (fits the ORO Product suites but for one
    v1 'easy' with 3). Several items: 2 ⇒ easy, 3 ⇒ medium, 4 ⇒ hard (ORO's Shop suites exactly), one level up
    when the items average ≥ 5 constraints. ``bucket`` is accepted for future per-bucket rules.
    """
    del bucket
    counts = [atomic_constraints(item) for item in reward]
    levels = ("easy", "medium", "hard")
    if len(counts) <= 1:
        c = sum(counts)
        return levels[0 if c <= 2 else 1 if c <= 4 else 2]
    level = min(len(counts), 4) - 2
    if sum(counts) / len(counts) >= 5:
        level += 1
    return levels[min(level, 2)]


def check_solvable(problem: Problem, products: _Lookup) -> list[str]:
    """Every way the GT of ``problem`` fails its own constraints (empty = solvable). ``products`` maps GT ids
    to products (a dict, an index, anything with ``get``). Knowledge problems are not checked."""
    if problem.bucket == "knowledge":
        return []
    out: list[str] = []
    gts: list[Product] = []
    for i, item in enumerate(problem.reward):
        p = products.get(item.product_id)
        if p is None:
            out.append(f"item {i}: GT {item.product_id} not in the catalog")
            continue
        gts.append(p)
        if item.title != [p.title]:
            out.append(f"item {i}: title {item.title!r} is not the GT title")
        for axis, count in (("price", price_axis(p, item)), ("service", service_axis(p, item)),
                            ("sku & attrs", sku_attr_axis(p, item))):
            if count.hits != count.total:
                out.append(f"item {i}: {axis} {count.hits}/{count.total} on GT {p.product_id}")
    if out or not gts:
        return out or ["no reward items"]
    shops = [p.shop_id for p in gts]
    if problem.bucket == "shop" and len(set(shops)) != 1:
        out.append(f"shop problem with GT from several shops {sorted(set(shops))}")
    if problem.bucket == "voucher":
        v = problem.voucher
        if v is None:
            return [*out, "voucher problem without a voucher"]
        prices = [p.price for p in gts]
        if not within_budget(prices, shops, v):
            out.append(f"GT bundle {sum(prices)} not within budget {v.budget}")
        total = float(sum(prices))
        applies = voucher_applies(v, shops) and total >= v.threshold
        expected = voucher_discounted(total, v) if applies else total
        if abs(expected - v.price_after_voucher) > 1e-6 * max(1.0, abs(expected)):
            out.append(f"price_after_voucher {v.price_after_voucher} != {expected}")
        if not budget_rule_holds(v):
            out.append(f"budget {v.budget} breaks ceil(price_after) ≤ budget ≤ 1.109·ceil(price_after)")
    return out
