"""Searching and verifying: the steps every strategy is built from.

- :func:`gather` searches items (in parallel calls of one step, or one step each), inspects the best
  unverified candidates, and re-searches the unresolved items with another wording or the next page, for as
  many rounds as the level reformulates;
- :func:`verify` inspects candidates in one step: ``view_product_information`` (exact values) or, for levels
  that trust it, ORO's ``check_product_match`` (a lowercase substring test).
"""

from __future__ import annotations

import json
from typing import Any

from shoparena.llm.policies.engine import Ctx, Flow, item_label
from shoparena.llm.policies.knowledge import Cand, check_key, check_value
from shoparena.llm.policies.render import fmt_cand, join

__all__ = ["gather", "search_calls", "verify"]


def _filters_text(p: dict[str, Any]) -> str:
    return join([f"price {p['price']}" if "price" in p else "", f"service {p['service']}" if "service" in p else "",
                 f"shop {p['shop_id']}" if "shop_id" in p else ""])


def _first_think(ctx: Ctx, i: int, q: str, p: dict[str, Any]) -> str:
    item, label = ctx.req.items[i], item_label(ctx.req, i)
    if ctx.skill.detail == 0:
        return ctx.dec.phrase([f"Let me search for {label}.", f"I'll look up {label}.", f"Searching {label}."])
    asks = join([f"price {item.price.text()}" if item.price else "", *item.services,
                 *[r.text for r in item.reqs]][:6])
    need = f" needs {asks}" if asks else ""
    fl = _filters_text(p)
    return f"{label.capitalize()}{need}: searching '{q}'" + (f" with {fl}." if fl else ".")


def _retry_think(ctx: Ctx, i: int, q: str, p: dict[str, Any], last: str) -> str:
    label = item_label(ctx.req, i)
    if p.get("page", 1) > 1:
        return f"No confirmed match yet for {label}; checking page {p['page']} of '{q}'."
    fl = _filters_text(p)
    return f"'{last}' gave no confirmed match for {label}; reformulating as '{q}'" + (f" ({fl})." if fl else ".")


def _batch_think(ctx: Ctx, batch: list[tuple[int, str, int, str | None]],
                 calls: list[tuple[str, dict[str, Any]]]) -> str:
    """One sentence per shop (or for the whole catalog) listing the searches of a parallel step."""
    groups: dict[str | None, list[str]] = {}
    for (i, q, page, shop), (_, p) in zip(batch, calls, strict=True):
        fl = _filters_text({k: v for k, v in p.items() if k != "shop_id"})
        groups.setdefault(shop, []).append(f"'{q}'" + (f" p{page}" if page > 1 else "") + (f" ({fl})" if fl else "")
                                           + f" for item {i + 1}" * (len(ctx.req.items) > 1))
    parts = [("Across the catalog" if shop is None else f"In shop {shop}") + ", searching " + join(qs) + "."
             for shop, qs in groups.items()]
    return " ".join(parts)


def search_calls(ctx: Ctx, batch: list[tuple[int, str, int, str | None]], intro: str,
                 retry: dict[int, str] | None = None) -> Flow:
    """Run ``(item, query, page, shop)`` searches: one step with parallel calls, or one step per search. Found
    candidates join the item pools; returns the listed candidates per batch entry."""
    calls, thinks = [], []
    for i, q, page, shop in batch:
        p = ctx.params(i, q, page, shop)
        calls.append(("find_product", p))
        thinks.append(_retry_think(ctx, i, q, p, retry[i]) if retry and i in retry else _first_think(ctx, i, q, p))
    out: list[list[Cand]] = []
    if ctx.skill.parallel and len(calls) > 1:
        think = " ".join(thinks) if len(calls) <= 2 and not retry else _batch_think(ctx, batch, calls)
        results = yield from ctx.act(intro + think, calls)
        out = [ctx.add_pool(b[0], res) for b, res in zip(batch, results, strict=True)]
    else:
        for k, (b, call, think) in enumerate(zip(batch, calls, thinks, strict=True)):
            if not ctx.can_explore():
                break
            [res] = yield from ctx.act((intro if k == 0 else "") + think, [call])
            out.append(ctx.add_pool(b[0], res))
    return out


def verify(ctx: Ctx, items: list[int], *, shops: list[str | None] | None = None,
           per_item: int | None = None) -> Flow:
    """Inspect the best unverified plausible candidates of ``items`` (per shop of ``shops``) in one step."""
    sk = ctx.skill
    n = sk.view if per_item is None else per_item
    if n > 3 and not ctx.dec.greedy:  # how many to open varies a little from sample to sample
        n -= ctx.dec.rng.randrange(3)
    if n <= 0 or not ctx.can_explore() or not ctx.dec.chance(sk.view_prob):
        return None
    picks: list[tuple[int, Cand]] = []
    for shop in shops or [None]:
        for i in items:
            graded = [(c, ctx.grade(i, c)) for c in ctx.pool(i, shop)]
            todo = sorted(((c, m) for c, m in graded if not c.viewed and c.check is None and not m.bad
                           and (m.unknown or (sk.prior and m.noun >= 0.5))),
                          key=lambda t: (-round(t[1].noun, 1), len(t[1].unknown), t[0].rank))
            picks.extend((i, c) for c, _ in todo[:n] if all(c is not x for _, x in picks))
    if not picks:
        return None
    ids = list(dict.fromkeys(c.pid for _, c in picks))
    if not sk.exact and "check_product_match" in ctx.tools and sk.oro_tools:
        calls = []
        for i, c in picks:
            reqs = {check_key(r): check_value(r) for r in ctx.req.items[i].reqs}
            calls.append(("check_product_match", {"product_id": c.pid, "requirements": json.dumps(reqs)}))
        think = f"Checking {len(calls)} candidate(s) against the requested details: {join(ids[:6])}."
    else:
        calls = [("view_product_information", {"product_ids": ",".join(ids)})]
        shown = "; ".join(fmt_cand(c, 34, services=False) for _, c in picks[:4])
        more = f" (+{len(ids) - 4} more)" if len(ids) > 4 else ""
        think = (f"Viewing {len(ids)} candidate(s) to check options and attributes: {shown}{more}." if sk.detail
                 else f"Let me look at {join(ids[:4])}.")
    yield from ctx.act(think, calls)
    return None


def gather(ctx: Ctx, items: list[int], *, shop: str | None = None, intro: str = "",
           rounds: int | None = None, verify_per_item: int | None = None) -> Flow:
    """Search, verify, and re-search unresolved items (module docstring)."""
    sk = ctx.skill
    rounds = sk.reformulate if rounds is None else rounds
    state = {i: [0, 1] for i in items}  # option index, page
    last: dict[int, str] = {}
    pending = list(items)
    for r in range(rounds + 1):
        if not pending or not ctx.can_explore():
            break
        batch = []
        for i in pending:
            options = ctx.queries(i)
            opt, page = state[i]
            batch.append((i, options[opt], page, shop))
        listed = yield from search_calls(ctx, batch, intro if r == 0 else "", last if r else None)
        yield from verify(ctx, pending, shops=[shop], per_item=verify_per_item)
        still = []
        for k, (i, q, page, _) in enumerate(batch):
            if ctx.resolved(i, shop):
                continue
            got = listed[k] if k < len(listed) else []
            last[i] = q
            options = ctx.queries(i)
            if len(got) == 10 and page < 3 and ctx.plausible(i, got):
                state[i] = [state[i][0], page + 1]
            elif state[i][0] + 1 < len(options):
                state[i] = [state[i][0] + 1, 1]
            elif page < 3 and got:
                state[i] = [state[i][0], page + 1]
            else:
                continue
            still.append(i)
        pending = [i for i in still if sk.prior or not ctx.plausible(i, ctx.pool(i, shop))]
    return None
