"""Per-item scores: one recommended product against one reward item (docs/shoppingbench.md §7.2, §7.7).

- ``gt`` = 1 iff the product id equals the GT id exactly.
- GT id ⇒ ``rule`` = 1 at once and every axis the reward carries is reported hit (hits = total).
- Otherwise ``rule`` = hits / total over the atomic constraints of the four axes: ``title`` (one per GT title,
  hit iff similarity ≥ 0.5 upstream / 0.7 strict), ``price`` (one per mode entry), ``service`` (one per
  code), ``sku & attrs`` (one per pair, best single SKU variant; :func:`shoparena.tasks.constraints.sku_attr_axis`).
- An axis the reward does not carry scores 1 (upstream) / 0 (strict) in the per-axis field scores.
- A reward with no scoreable constraint scores ``rule`` 0 in both modes (strict: ORO; upstream divides by
  zero and crashes, a case we resolve the same way: no free credit).
- A missing or unknown id gives an unresolved item: everything 0, totals kept for the per-axis rates.
"""

from __future__ import annotations

from shoparena.catalog.types import Product
from shoparena.scoring.similarity import TitleSimilarity
from shoparena.scoring.types import (
    FIELDS,
    KNOWLEDGE_TITLE_THRESHOLD,
    TITLE_THRESHOLD,
    AxisScore,
    ItemScore,
)
from shoparena.tasks.constraints import AxisCount, price_axis, service_axis, sku_attr_axis
from shoparena.tasks.types import Problem, RewardItem
from shoparena.types import Mode


def axis_totals(item: RewardItem) -> dict[str, int]:
    """Atomic constraint counts per axis of a reward item."""
    return {
        "title": len(item.title),
        "price": sum(len(entry) for entry in item.price or []),
        "service": len(item.service or []),
        "sku & attrs": len(item.sku_attr_pairs()),
    }


def _axis(hits: int, total: int, mode: Mode) -> AxisScore:
    absent = 1.0 if mode == "upstream" else 0.0
    return AxisScore(hits=hits, total=total, score=hits / total if total else absent)


def score_item(
    product: Product | None,
    item: RewardItem,
    *,
    position: int,
    product_id: str | None,
    mode: Mode,
    similarity: TitleSimilarity,
    problem: Problem | None = None,
) -> ItemScore:
    """Score one position (module docstring)."""
    totals = axis_totals(item)
    if product is None:
        return ItemScore(
            position=position, gt_product_id=item.product_id, product_id=product_id,
            axes={f: AxisScore(hits=0, total=totals[f], score=0.0) for f in FIELDS},
        )
    common = {"position": position, "gt_product_id": item.product_id, "product_id": product_id,
              "resolved": True, "price": product.price, "shop_id": product.shop_id}
    if product.product_id == item.product_id:
        return ItemScore(**common, gt=1.0, rule=1.0, short_circuit=True, hit=True,
                         axes={f: _axis(totals[f], totals[f], mode) for f in FIELDS})

    threshold = TITLE_THRESHOLD[mode]
    sims = [similarity.similarity(product.title, t, problem=problem) for t in item.title]
    counts: dict[str, AxisCount] = {
        "title": AxisCount(sum(s >= threshold for s in sims), len(sims)),
        "price": price_axis(product, item),
        "service": service_axis(product, item),
        "sku & attrs": sku_attr_axis(product, item),
    }
    hits = sum(c.hits for c in counts.values())
    total = sum(c.total for c in counts.values())
    rule = hits / total if total else 0.0
    return ItemScore(
        **common, gt=0.0, rule=rule, title_similarity=sims[0] if sims else None,
        hit=rule > 0 if mode == "strict" else True,
        axes={f: _axis(counts[f].hits, counts[f].total, mode) for f in FIELDS},
    )


def knowledge_scores(
    product: Product | None,
    first_id: str | None,
    problem: Problem,
    *,
    mode: Mode,
    similarity: TitleSimilarity,
) -> tuple[ItemScore, float]:
    """Knowledge bucket (upstream ``eval_web``, §7.7): returns the item (``gt``, ``rule``, title similarity)
    and ``kw``.

    - ``gt``: upstream, the GT id is a **substring** of the first recommended id (§9.7); strict, equality.
    - GT product resolved ⇒ ``kw`` = ``title`` = 1.
    - ``kw``: the lowercased ``Knowledge_Attribute`` occurs in the lowercased title or description
      (strict strips the attribute's stray spaces, §3.5; an empty attribute never matches).
    - ``title``: similarity(product title, GT title) ≥ 0.8.
    - ``rule`` = (kw + title) / 2; success iff ``rule`` ≥ 1.
    """
    gt_product = problem.knowledge_product
    gt_id = gt_product.product_id if gt_product is not None else ""
    pid = first_id or ""
    if mode == "upstream":
        gt = 1.0 if gt_id and gt_id in pid else 0.0
    else:
        gt = 1.0 if gt_id and gt_id == pid else 0.0
    if product is None:
        return ItemScore(position=0, gt_product_id=gt_id, product_id=first_id, gt=gt), 0.0
    common = {"position": 0, "gt_product_id": gt_id, "product_id": first_id, "resolved": True,
              "price": product.price, "shop_id": product.shop_id, "gt": gt}
    title_axis = AxisScore(hits=1, total=1, score=1.0)
    if product.product_id == gt_id:
        return ItemScore(**common, rule=1.0, short_circuit=True, hit=True, axes={"title": title_axis}), 1.0
    kw_text = problem.knowledge_attribute or ""
    if mode == "strict":
        kw_text = kw_text.strip()
    needle = kw_text.lower()
    kw = 1.0 if needle and (needle in product.title.lower() or needle in product.description.lower()) else 0.0
    sim = similarity.similarity(product.title, gt_product.title, problem=problem) if gt_product else 0.0
    title = 1.0 if sim >= KNOWLEDGE_TITLE_THRESHOLD else 0.0
    rule = (kw + title) / 2
    axes = {"title": AxisScore(hits=int(title), total=1, score=title)}
    return ItemScore(**common, rule=rule, title_similarity=sim, hit=rule > 0, axes=axes), kw
