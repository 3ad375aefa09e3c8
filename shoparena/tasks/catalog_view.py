"""A light index over a product sequence for the generator: positions grouped by shop and by category.

Built in one pass that reads each product once (``shop_id``, ``category``, ``product_id``) and keeps only
integer positions, so a lazy million-product sequence (len + indexing, e.g. over a memory-mapped index) is never
copied into Python objects. Build it once and pass it to ``generate_problems`` to reuse it across calls.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from shoparena.catalog.types import Product
from shoparena.tasks.constraints import price_axis, service_axis, sku_attr_axis
from shoparena.tasks.types import RewardItem


@dataclass
class CatalogView:
    """Positions of ``products`` by shop and by category; ``multi_shops`` = shops with ≥ 2 products."""

    products: Sequence[Product]
    by_shop: dict[str, list[int]] = field(default_factory=dict)
    by_category: dict[str, list[int]] = field(default_factory=dict)
    multi_shops: list[str] = field(default_factory=list)
    """In first-appearance order (deterministic)."""

    @classmethod
    def build(cls, products: Sequence[Product]) -> CatalogView:
        by_shop: dict[str, list[int]] = {}
        by_category: dict[str, list[int]] = {}
        for i in range(len(products)):
            p = products[i]
            by_shop.setdefault(p.shop_id, []).append(i)
            by_category.setdefault(p.category, []).append(i)
        multi = [s for s, idx in by_shop.items() if len(idx) >= 2]
        return cls(products, by_shop, by_category, multi)

    def __len__(self) -> int:
        return len(self.products)

    def distinct(self, positions: Iterable[int]) -> list[Product]:
        """The products at ``positions``, dropping repeated product ids."""
        out: list[Product] = []
        seen: set[str] = set()
        for i in positions:
            p = self.products[i]
            if p.product_id not in seen:
                seen.add(p.product_id)
                out.append(p)
        return out

    def pick_from_shop(self, shop: str, k: int, rng: random.Random) -> list[Product]:
        """Up to ``k`` distinct products of one shop, preferring distinct categories, then distinct titles."""
        positions = self.by_shop[shop]
        sample = self.distinct(rng.sample(positions, min(len(positions), 4 * k + 8)))
        chosen: list[Product] = []
        for want_new_category in (True, False):
            for p in sample:
                if len(chosen) == k:
                    return chosen
                if p in chosen or any(p.title == c.title for c in chosen):
                    continue
                if want_new_category and any(p.category == c.category for c in chosen):
                    continue
                chosen.append(p)
        for p in sample:
            if len(chosen) < k and all(p.product_id != c.product_id for c in chosen):
                chosen.append(p)
        return chosen

    def substitute(self, product: Product, item: RewardItem, rng: random.Random, scan: int,
                   exclude: Collection[str] = ()) -> Product | None:
        """A product of the same category but another shop (and title) meeting every non-title constraint of
        ``item``, and none of the ``exclude`` product ids (GT products of other clusters: a shared GT product
        links two clusters into one); scans at most ``scan`` candidates from a random offset; None when there is
        none."""
        positions = self.by_category.get(product.category, [])
        if len(positions) < 2:
            return None
        start = rng.randrange(len(positions))
        for step in range(min(scan, len(positions))):
            q = self.products[positions[(start + step) % len(positions)]]
            if (q.shop_id == product.shop_id or q.product_id == product.product_id or q.title == product.title
                    or q.product_id in exclude):
                continue
            if all(a.hits == a.total for a in (price_axis(q, item), service_axis(q, item), sku_attr_axis(q, item))):
                return q
        return None
