"""Constraint predicates shared by the generator (solvability checks) and the scorer (docs/shoppingbench.md §7.2–7.3).

Pure functions over a product and a reward item; they know nothing about scoring modes. The scorer decides
what an absent axis is worth, the generator asserts that ground truth satisfies every constraint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shoparena.catalog.types import Product
from shoparena.tasks.types import RewardItem, Voucher


@dataclass(frozen=True)
class AxisCount:
    """Hits and total atomic constraints on one axis."""

    hits: int
    total: int


def price_in_mode(price: float, mode: str, lower: float | None, upper: float | None) -> bool:
    """``less than``: price ≤ upper; ``greater than``: price ≥ lower; ``between``: inclusive both sides.
    A null bound is open (no limit on that side)."""
    if mode == "less than":
        return upper is None or price <= upper
    if mode == "greater than":
        return lower is None or price >= lower
    if mode == "between":
        return (lower is None or price >= lower) and (upper is None or price <= upper)
    raise ValueError(f"unknown price mode {mode!r}")


def price_axis(product: Product, item: RewardItem) -> AxisCount:
    """One constraint per mode entry of ``item.price``."""
    hits = total = 0
    for entry in item.price or []:
        for mode, (lower, upper) in entry.items():
            total += 1
            hits += price_in_mode(product.price, mode, lower, upper)
    return AxisCount(hits, total)


def service_axis(product: Product, item: RewardItem) -> AxisCount:
    """One constraint per requested service code; exact, case-sensitive membership."""
    codes = item.service or []
    have = set(product.service)
    return AxisCount(sum(code in have for code in codes), len(codes))


def sku_attr_axis(product: Product, item: RewardItem) -> AxisCount:
    """One constraint per (key, value) pair. A pair hits when it equals a pair of the chosen SKU variant or a
    key/value of the product's attributes; the count is maximised over every variant plus the empty one, so
    all SKU pairs must come from one variant."""
    pairs = item.sku_attr_pairs()
    if not pairs:
        return AxisCount(0, 0)
    attrs = product.attributes
    variants: list[dict[str, str]] = [*product.sku_options.values(), {}]
    best = 0
    for variant in variants:
        hits = sum(1 for k, v in pairs if variant.get(k) == v or v in attrs.get(k, ()))
        if hits > best:
            best = hits
            if best == len(pairs):
                break
    return AxisCount(best, len(pairs))


def voucher_discounted(total: float, voucher: Voucher) -> float:
    """The bundle price after the voucher (ignores threshold and scope).

    fixed: total − face_value; percentage: max(total·(1 − discount), total − cap), discount a fraction.
    A percentage voucher with a null cap is treated as uncapped (absent from the data; docs/shoppingbench.md §7.3).
    """
    if voucher.discount_type == "fixed":
        return total - float(voucher.face_value or 0)
    pct = total * (1 - float(voucher.discount or 0))
    if voucher.cap is None:
        return pct
    return max(pct, total - float(voucher.cap))


def voucher_applies(voucher: Voucher, shop_ids: Sequence[str]) -> bool:
    """Platform vouchers always apply; shop vouchers only when every product comes from one shop."""
    return voucher.voucher_type == "platform" or len(set(shop_ids)) == 1


def within_budget(prices: Sequence[float], shop_ids: Sequence[str], voucher: Voucher) -> bool:
    """total ≤ budget, or (voucher applies and total ≥ threshold and discounted ≤ budget).

    The threshold test is ≥ although the query says "exceeds" (docs/shoppingbench.md §7.3, §9.5).
    """
    total = float(sum(prices))
    if total <= voucher.budget:
        return True
    return (
        voucher_applies(voucher, shop_ids)
        and total >= voucher.threshold
        and voucher_discounted(total, voucher) <= voucher.budget
    )
