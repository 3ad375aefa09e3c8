"""Summary statistics of a problem set, as in the table of docs/shoppingbench.md §3.4.

:func:`problem_stats` returns a JSON-serialisable dict (string keys only) so the CLI can print it as is:

- ``total``; ``counts`` (problems per bucket) and ``items`` (reward items per bucket);
- ``items_per_problem``: bucket → {"2": 89, …};
- ``constraints``: bucket → items carrying each key (``price``, ``attributes``, ``sku_options``, ``service``);
  ``atomic``: bucket → atomic constraint counts (price entries, service codes, SKU pairs, attribute pairs);
- ``price_modes``: bucket → mode → items;
- ``vouchers``: ``voucher_type``, ``discount_type``, ``items_by_type`` and ``budget_rule`` (how many vouchers
  satisfy ceil(price_after_voucher) ≤ budget ≤ 1.109·ceil(price_after_voucher));
- ``difficulty``: bucket → level → problems; ``suites``; ``variants``; ``clusters`` (distinct non-null
  ``cluster_id``) and ``unclustered``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from shoparena.tasks.types import BUCKETS, PRICE_MODES, Problem, Voucher

CONSTRAINT_KEYS: tuple[str, ...] = ("price", "attributes", "sku_options", "service")
#: Upper slack of the budget over ceil(price_after_voucher) seen in the upstream data (§3.4).
BUDGET_SLACK = 1.109


def budget_rule_holds(voucher: Voucher) -> bool:
    """ceil(price_after_voucher) ≤ budget ≤ 1.109·ceil(price_after_voucher) (docs/shoppingbench.md §3.4)."""
    floor = math.ceil(voucher.price_after_voucher)
    return floor <= voucher.budget <= BUDGET_SLACK * floor


def _hist(counter: Counter[Any]) -> dict[str, int]:
    return {str(k): counter[k] for k in sorted(counter)}


def problem_stats(problems: Iterable[Problem]) -> dict[str, Any]:
    """Counts per bucket, item histograms, constraint-key counts, voucher and difficulty breakdowns."""
    counts: Counter[str] = Counter()
    items: Counter[str] = Counter()
    per_problem: dict[str, Counter[int]] = {}
    carrying: dict[str, Counter[str]] = {}
    atomic: dict[str, Counter[str]] = {}
    modes: dict[str, Counter[str]] = {}
    difficulty: dict[str, Counter[str]] = {}
    vtype: Counter[str] = Counter()
    dtype: Counter[str] = Counter()
    v_items: dict[str, Counter[int]] = {}
    budget_ok = budget_bad = 0
    suites: Counter[str] = Counter()
    variants: Counter[str] = Counter()
    clusters: set[str] = set()
    unclustered = 0
    for p in problems:
        b = p.bucket
        counts[b] += 1
        items[b] += len(p.reward) if b != "knowledge" else 1
        if b != "knowledge":
            per_problem.setdefault(b, Counter())[len(p.reward)] += 1
        keys = carrying.setdefault(b, Counter({k: 0 for k in CONSTRAINT_KEYS}))
        atoms = atomic.setdefault(b, Counter({k: 0 for k in CONSTRAINT_KEYS}))
        mode_c = modes.setdefault(b, Counter({m: 0 for m in PRICE_MODES}))
        for item in p.reward:
            for key in CONSTRAINT_KEYS:
                if getattr(item, key) is not None:
                    keys[key] += 1
            for entry in item.price or []:
                mode_c.update(entry.keys())
                atoms["price"] += len(entry)
            atoms["service"] += len(item.service or [])
            atoms["sku_options"] += sum(len(s) for s in item.sku_options or [])
            atoms["attributes"] += sum(len(v) for a in item.attributes or [] for v in a.values())
        if p.voucher is not None:
            vtype[p.voucher.voucher_type] += 1
            dtype[p.voucher.discount_type] += 1
            v_items.setdefault(p.voucher.voucher_type, Counter())[len(p.reward)] += 1
            if budget_rule_holds(p.voucher):
                budget_ok += 1
            else:
                budget_bad += 1
        if p.difficulty is not None:
            difficulty.setdefault(b, Counter())[p.difficulty] += 1
        suites[p.suite or "-"] += 1
        if p.variant is not None:
            variants[p.variant] += 1
        if p.cluster_id is None:
            unclustered += 1
        else:
            clusters.add(p.cluster_id)
    order = [b for b in BUCKETS if b in counts]
    return {
        "total": sum(counts.values()),
        "counts": {b: counts[b] for b in order},
        "items": {b: items[b] for b in order},
        "items_per_problem": {b: _hist(per_problem[b]) for b in order if b in per_problem},
        "constraints": {b: dict(carrying[b]) for b in order},
        "atomic": {b: dict(atomic[b]) for b in order},
        "price_modes": {b: dict(modes[b]) for b in order},
        "vouchers": {
            "voucher_type": dict(sorted(vtype.items())),
            "discount_type": dict(sorted(dtype.items())),
            "items_by_type": {t: _hist(c) for t, c in sorted(v_items.items())},
            "budget_rule": {"holds": budget_ok, "violated": budget_bad},
        },
        "difficulty": {b: dict(sorted(difficulty[b].items())) for b in order if b in difficulty},
        "suites": dict(sorted(suites.items())),
        "variants": dict(sorted(variants.items())),
        "clusters": len(clusters),
        "unclustered": unclustered,
    }
