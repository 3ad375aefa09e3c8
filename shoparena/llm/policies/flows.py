"""The strategies per bucket: one product, several products from one shop, a bundle under a voucher budget.

``play(ctx)`` is the whole episode as a generator (see ``engine``): understand → search → verify → choose →
``recommend_product`` → ``terminate``. What the levels do differently is read from ``ctx.skill``.
"""

from __future__ import annotations

import json

from shoparena.llm.policies.engine import Ctx, Flow, Pick, choose_all, item_label
from shoparena.llm.policies.knowledge import Cand, Match
from shoparena.llm.policies.render import fmt_cand, fmt_match, join, money
from shoparena.llm.policies.search import gather, search_calls, verify
from shoparena.llm.policies.vouchers import choose_bundle, naive_bundle, voucher_args

__all__ = ["play"]


def play(ctx: Ctx) -> Flow:
    """The whole episode."""
    req, sk = ctx.req, ctx.skill
    if req.bucket == "shop" and len(req.items) > 1 and sk.shops > 0:
        picks = yield from shop_flow(ctx)
    elif req.bucket == "voucher" and req.voucher is not None and sk.voucher != "ignore":
        picks = yield from voucher_flow(ctx)
    else:
        yield from gather(ctx, list(range(len(req.items))), intro=opening(ctx))
        picks = choose_all(ctx, list(range(len(req.items))))
    yield from finish(ctx, picks)


def opening(ctx: Ctx) -> str:
    """The first sentence(s) of the first think: what was asked."""
    req = ctx.req
    if ctx.skill.detail == 0:
        return ""
    n = len(req.items)
    what = join([item_label(req, i) for i in range(n)])
    head = {"product": f"The user wants one product, {what}.",
            "shop": f"The user wants {n} products from a single shop: {what}.",
            "voucher": f"The user wants {n} product(s) within a budget: {what}."}[req.bucket]
    v = req.voucher
    if v is not None:
        rule = (f"fixed {money(v.face_value)} off" if v.kind == "fixed"
                else f"{v.percent():g}% off capped at {money(v.cap)}")
        head += (f" Budget {money(v.budget)}; {v.scope} voucher, {rule}, valid from a total of "
                 f"{money(v.threshold)}.")
    return head + " "


def _rank_shops(ctx: Ctx, order: list[int], anchor: int) -> list[str]:
    """Shops worth searching, best first. Levels anchoring on the most specific item rank every shop seen by
    how many items it already covers (a confirmed candidate counts double, the anchor item once more); the
    others take the anchor item's shops in search order."""
    cover: dict[str, dict[int, float]] = {}
    first: dict[str, int] = {}
    for i in order if ctx.skill.anchor_specific else [anchor]:
        for c in ctx.pool(i):
            m = ctx.grade(i, c)
            if m.bad or not (m.noun >= 0.5 or m.strong) or not c.shop:
                continue
            items = cover.setdefault(c.shop, {})
            items[i] = max(items.get(i, 0.0), (2.0 if m.strong else 1.0) + (1.0 if i == anchor else 0.0))
            first[c.shop] = min(first.get(c.shop, 99), c.rank)
    if not ctx.skill.anchor_specific:
        return sorted(cover, key=lambda sh: first[sh])
    return sorted(cover, key=lambda sh: (-sum(cover[sh].values()), first[sh]))


def shop_flow(ctx: Ctx) -> Flow:
    """One shop for every item: search broadly, rank the shops that hold the anchor item, search the missing
    items inside the best shops (a few per step when parallel), verify, and stop at the first shop where
    every item is confirmed."""
    req, sk = ctx.req, ctx.skill
    n = len(req.items)
    items = list(range(n))
    tried_tool = ctx.has("find_products_in_same_shop")
    if tried_tool:
        picks = yield from same_shop_tool(ctx)
        if picks is not None:
            return picks
    order = items
    if sk.anchor_specific:
        order = sorted(items, key=lambda i: (-(len(req.items[i].reqs) + len(req.items[i].services)
                                                + (req.items[i].price is not None)), i))
    anchor = order[0]
    intro = ("The same-shop tool gave no fully confirmed set; searching myself. " if tried_tool and sk.detail
             else opening(ctx)) + (f"Starting from the most specific one, {item_label(req, anchor)}. "
                                   if anchor and sk.detail else "")
    if sk.anchor_specific:
        yield from gather(ctx, order, intro=intro, rounds=min(1, sk.reformulate))
    else:
        yield from gather(ctx, [anchor], intro=intro)
    best: tuple[float, list[Pick]] | None = None
    width = 2 if sk.parallel else 1
    shops = _rank_shops(ctx, order, anchor)[:sk.shops]
    for g in range(0, len(shops), width):
        group = shops[g:g + width]
        if not ctx.can_explore(2):
            break
        batch = [(i, ctx.queries(i)[0], 1, shop) for shop in group for i in order
                 if sk.prior or not ctx.plausible(i, ctx.pool(i, shop))]
        if batch:
            think = f"Shop {join(group)} {'look' if len(group) > 1 else 'looks'} promising."
            yield from search_calls(ctx, batch, think + " ")
        viable = [s for s in group if all(ctx.plausible(i, ctx.pool(i, s), noun=0.0) for i in items)]
        if not viable:
            continue
        yield from verify(ctx, items, shops=list(viable), per_item=3 if sk.exact else 1)
        for shop in viable:
            picks = choose_all(ctx, items, {i: ctx.pool(i, shop) for i in items})
            score = sum(p[1].score() for p in picks if p) - 10.0 * sum(p is None for p in picks)
            if best is None or score > best[0]:
                best = (score, picks)
            if all(p and p[1].strong for p in picks):
                return picks
    return best[1] if best is not None else choose_all(ctx, items)


def same_shop_tool(ctx: Ctx) -> Flow:
    """ORO's ``find_products_in_same_shop`` first; its products are verified before they are trusted."""
    req = ctx.req
    specs = []
    for i, item in enumerate(req.items):
        spec = {"q": ctx.queries(i)[0]}
        if item.price is not None and ctx.filters(i)[0]:
            spec["price"] = item.price.filter()
        specs.append(spec)
    think = opening(ctx) + "Trying find_products_in_same_shop to locate one shop with every item."
    [res] = yield from ctx.act(think, [("find_products_in_same_shop", {"product_queries": json.dumps(specs)})])
    if not isinstance(res, list) or len(res) != len(req.items):
        return None
    for i, c in enumerate(res):
        ctx.pools[i].setdefault(c.pid, c)
    yield from verify(ctx, list(range(len(req.items))), shops=[res[0].shop], per_item=1)
    picks: list[Pick] = [(c, ctx.grade(i, c)) for i, c in enumerate(res)]
    return picks if all(p and p[1].complete for p in picks) else None


def voucher_flow(ctx: Ctx) -> Flow:
    """Candidates per item (and a same-shop set for shop vouchers), then the bundle that fits the budget."""
    req, sk = ctx.req, ctx.skill
    v = req.voucher
    assert v is not None
    items = list(range(len(req.items)))
    shop_picks = None
    if v.scope == "shop" and len(items) > 1 and sk.voucher == "full" and sk.shops > 0:
        shop_picks = yield from shop_flow(ctx)
        missing = [i for i in items if not ctx.resolved(i)]
        if missing and ctx.can_explore(3):
            yield from gather(ctx, missing, rounds=0)
    else:
        yield from gather(ctx, items, intro=opening(ctx))
    full = sk.voucher == "full"
    if full:
        for _ in range(2):  # open the leading bundles' unverified products before settling
            todo: list[Cand] = []
            choose_bundle(ctx, shop_picks, unverified=todo)
            if not todo or not ctx.can_explore(2):
                break
            ids = ",".join(c.pid for c in todo[:12])
            yield from ctx.act(f"Before settling the bundle, checking the details of {ids}.",
                               [("view_product_information", {"product_ids": ids})])
    bundle, ctx.note = choose_bundle(ctx, shop_picks) if full else naive_bundle(ctx)
    if ctx.has("calculate_voucher") and ctx.can_explore() and bundle and all(bundle):
        prices = [p[0].price or 0.0 for p in bundle if p]
        [res] = yield from ctx.act(f"{ctx.note} Double-checking with calculate_voucher.",
                                   [("calculate_voucher", voucher_args(v, prices))])
        if full and isinstance(res, dict) and res.get("within_budget") is False:
            bundle, ctx.note = choose_bundle(ctx, shop_picks, cheaper=True)
    return bundle


def finish(ctx: Ctx, picks: list[Pick]) -> Flow:
    """``recommend_product`` with the picks in request order, then ``terminate``."""
    req, d = ctx.req, ctx.skill.detail
    chosen = [p for p in picks if p is not None]
    if not chosen:
        seen = [c for c in ctx.kb.cands.values() if c.title]
        chosen = [(seen[0], Match())] if seen else []
    ids = [c.pid for c, _ in chosen]
    ok = len(chosen) == len(req.items) and all(m.complete for _, m in chosen)
    if d == 0:
        why = " ".join(f"{c.short(40)} looks right." for c, _ in chosen)
    else:
        why = " ".join(f"{item_label(req, i).capitalize()}: {fmt_cand(c, 40)} — {fmt_match(m)}."
                       for i, (c, m) in enumerate(chosen))
        if req.bucket == "shop" and len(chosen) > 1:
            shops = {c.shop for c, _ in chosen}
            why += f" All from shop {chosen[0][0].shop}." if len(shops) == 1 else " They are not all from one shop."
        if ctx.note:
            why += f" {ctx.note}"
    if ids:
        yield from ctx.act(f"Recommending {', '.join(ids)}. {why}".strip(),
                           [("recommend_product", {"product_ids": ",".join(ids)})])
    bye = ctx.dec.phrase(["Recommendation made; ending the task.", "Done, the recommendation is submitted.",
                          "The products are recommended, terminating."])
    if not ok and d:
        bye = "Recommended the best available match, though not every constraint is confirmed; terminating."
    while True:
        yield from ctx.act(bye, [("terminate", {"status": "success" if ok else "failure"})])
