"""Voucher arithmetic for the bundle choice (docs/shoppingbench.md §3.3, §7.3).

The shopper pays the bundle total, or the discounted total when the voucher applies: a platform voucher
always, a shop voucher only when every product comes from one shop, and either only from the threshold on
(the scorer tests ``total ≥ threshold``). Fixed vouchers take ``face_value`` off; percentage vouchers take
``discount · total`` capped at ``cap``. A bundle fits when the total, or the discounted total where the
voucher applies, is within the budget.

- :func:`choose_bundle` (expert): enumerate the best few verified candidates per item, keep the bundles that
  fit, prefer good matches and a bundle that uses the budget (the request names the budget it means to spend).
- :func:`naive_bundle` (careful): best match per item, add up, take the discount off when over budget without
  checking the shop scope or the cap, and swap the priciest item once if still over.
"""

from __future__ import annotations

from itertools import product as cartesian
from typing import TYPE_CHECKING, Any

from shoparena.llm.policies.knowledge import Cand, Match
from shoparena.llm.policies.parse import VoucherSpec
from shoparena.llm.policies.render import money

if TYPE_CHECKING:
    from shoparena.llm.policies.engine import Ctx

__all__ = ["choose_bundle", "naive_bundle", "voucher_args"]

Pick = tuple[Cand, Match] | None
MAX_BUNDLES = 600


def voucher_args(v: VoucherSpec, prices: list[float]) -> dict[str, Any]:
    """``calculate_voucher`` arguments (ORO semantics: the discount as a percent, cap 0 = none)."""
    value = v.face_value if v.kind == "fixed" else v.percent()
    return {"product_prices": ",".join(f"{p:g}" for p in prices), "voucher_type": v.kind,
            "discount_value": value, "threshold": v.threshold, "budget": v.budget, "cap": v.cap or 0}


def explain(v: VoucherSpec, cands: list[Cand]) -> str:
    total = sum(c.price or 0.0 for c in cands)
    one_shop = len({c.shop for c in cands}) == 1
    if total <= v.budget:
        return f"Bundle total {money(total)} is within the budget {money(v.budget)} even without the voucher."
    applies = v.scope == "platform" or one_shop
    if not applies:
        return (f"Bundle total {money(total)} exceeds {money(v.budget)} and the shop voucher does not apply "
                f"across shops.")
    if total < v.threshold:
        return f"Bundle total {money(total)} is below the voucher threshold {money(v.threshold)}."
    pay = v.pays(total, one_shop)
    verdict = "within" if pay <= v.budget else "over"
    return (f"Bundle total {money(total)} ≥ threshold {money(v.threshold)}, so the voucher takes "
            f"{money(total - pay)} off: {money(pay)}, {verdict} the budget {money(v.budget)}.")


def _intent(v: VoucherSpec, total: float, pay: float, cheaper: bool) -> float:
    """How well a bundle reads as what the shopper means (≤ 0): "my budget is only B" means spending close to
    B (within about a tenth), and a voucher mentioned is one the bundle qualifies for (total at least a little
    above the threshold, not many times it)."""
    if cheaper:
        return 0.0
    budget = max(1.0, float(v.budget))
    slack = max(0.0, budget - min(pay, total)) / budget
    s = -1.0 * slack - (8.0 + 20.0 * (slack - 0.1) if slack > 0.1 else 0.0)
    if v.threshold and (total < 1.1 * v.threshold or total > 10 * v.threshold):
        s -= 3.0
    return s


def _candidate_sets(ctx: Ctx, n: int) -> list[list[list[tuple[float, Cand, Match]]]]:
    """Per-item option lists to combine: the best few overall, and for a shop voucher the best few of each shop
    that has every item (bundles the voucher applies to)."""
    ranked = [[t for t in ctx.ranked(i) if t[1].price is not None and not t[2].bad] or ctx.ranked(i)[:1]
              for i in range(n)]
    per_item = max(2, min(8, int(MAX_BUNDLES ** (1 / max(1, n)))))
    sets = [[r[:per_item] for r in ranked]]
    v = ctx.req.voucher
    if v is not None and v.scope == "shop" and n > 1:
        shops: dict[str, list[list[tuple[float, Cand, Match]]]] = {}
        for i, r in enumerate(ranked):
            for t in r:
                lists = shops.setdefault(t[1].shop, [[] for _ in range(n)])
                if len(lists[i]) < 3:
                    lists[i].append(t)
        full = [lists for lists in shops.values() if all(lists)]
        full.sort(key=lambda ls: -sum(lst[0][0] for lst in ls))
        sets += full[:8]
    return sets


def choose_bundle(ctx: Ctx, shop_picks: list[Pick] | None, *, cheaper: bool = False,
                  unverified: list[Cand] | None = None) -> tuple[list[Pick], str]:
    """The expert's bundle (module docstring); ``cheaper`` after a failed calculator check; ``unverified``
    collects the not-yet-inspected candidates of the leading bundles."""
    from shoparena.llm.policies.engine import choose_all

    v = ctx.req.voucher
    n = len(ctx.req.items)
    assert v is not None
    sets = _candidate_sets(ctx, n)
    if shop_picks and all(shop_picks):
        sets.append([[(ctx.rank_score(i, p[0], p[1]), p[0], p[1])] for i, p in enumerate(shop_picks) if p])
    if any(not o for o in sets[0]):
        return choose_all(ctx, list(range(n))), ""
    bundles, scores, seen = [], [], set()
    budget = float(v.budget)
    for options in sets:
        for combo in cartesian(*options):
            pids = tuple(t[1].pid for t in combo)
            if len(set(pids)) < n or pids in seen:
                continue
            seen.add(pids)
            total = sum(t[1].price or 0.0 for t in combo)
            one_shop = len({t[1].shop for t in combo}) == 1
            pay = v.pays(total, one_shop)
            fits = total <= budget or pay <= budget
            bundles.append(combo)
            scores.append(sum(t[0] for t in combo) + (0.0 if fits else -12.0) + _intent(v, total, pay, cheaper))
    if not bundles:
        return choose_all(ctx, list(range(n))), ""
    if unverified is not None:  # what to open before deciding: unknowns in the leading bundles
        for k in sorted(range(len(bundles)), key=lambda k: -scores[k])[:12]:
            unverified.extend(t[1] for t in bundles[k] if t[2].unknown and t[1] not in unverified)
    best = bundles[ctx.dec.pick([x * ctx.skill.decisive for x in scores])]
    picks: list[Pick] = [(c, m) for _, c, m in best]
    return picks, explain(v, [c for _, c, _ in best])


def naive_bundle(ctx: Ctx) -> tuple[list[Pick], str]:
    """The careful reader's bundle (module docstring): may be wrong on shop scope and capped percentages."""
    v = ctx.req.voucher
    assert v is not None
    from shoparena.llm.policies.engine import choose_all

    picks = choose_all(ctx, list(range(len(ctx.req.items))))
    if not all(picks):
        return picks, ""

    def pays(ps: list[Pick]) -> tuple[float, float]:
        total = sum((p[0].price or 0.0) for p in ps if p)
        if total <= v.budget or total < v.threshold:
            return total, total
        off = (v.face_value or 0.0) if v.kind == "fixed" else total * (v.discount or 0.0)
        return total, total - off

    total, pay = pays(picks)
    if pay > v.budget:
        j = max(range(len(picks)), key=lambda k: picks[k][0].price or 0.0 if picks[k] else 0.0)
        taken = {p[0].pid for p in picks if p}
        alts = [(c, m) for _, c, m in ctx.ranked(j) if c.price is not None and not m.bad and c.pid not in taken
                and c.price < (picks[j][0].price or 0.0)]  # type: ignore[index]
        if alts:
            picks[j] = min(alts, key=lambda t: t[0].price or 0.0)
            total, pay = pays(picks)
    note = (f"Total {money(total)}; after the voucher about {money(pay)} against the budget {money(v.budget)}."
            if pay != total else f"Total {money(total)} against the budget {money(v.budget)}.")
    return picks, note
