"""Answers to the narrow axis-B prompts of ``shoparena.llm.subtasks`` (classify_intent, score_match, narrate).

The same query understanding and matching the agentic strategies use: ``classify_intent`` reports the parse,
``score_match`` grades the product fields it is shown against the requested item (calibrated: a product that
meets every stated constraint and names the item scores ≥ 0.9, one violated constraint pulls it below 0.5,
unverifiable details count half), ``narrate`` names the chosen products and what they satisfy. Weaker
levels answer with noisier scores and plainer text.
"""

from __future__ import annotations

import json
from typing import Any

from shoparena.llm.policies.decide import Decider
from shoparena.llm.policies.knowledge import Cand, Knowledge, match
from shoparena.llm.policies.levels import Skill
from shoparena.llm.policies.parse import Request, parse_request
from shoparena.llm.policies.phrases import norm_words
from shoparena.llm.policies.render import join, money

__all__ = ["answer_subtask", "classify", "score_product"]


def _user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")


def _split(text: str, marker: str) -> tuple[str, str]:
    head, _, tail = text.partition(marker)
    return head.removeprefix("Request:\n").strip(), tail.strip()


def classify(query: str, skill: Skill) -> dict[str, Any]:
    """``{"bucket", "items", "queries"}`` from the parse; queries in the level's search style."""
    from shoparena.llm.policies.engine import Ctx

    req = parse_request(query)
    ctx = Ctx(req, frozenset(), skill, Decider(0))
    queries = [ctx.queries(i)[0] for i in range(len(req.items))]
    return {"bucket": req.bucket, "items": len(req.items), "queries": queries}


def _cand(product: dict[str, Any]) -> Cand:
    kb = Knowledge()
    pid = str(product.get("product_id") or "candidate")
    kb.add("find_product", {"q": "", "page": 1}, [{**product, "product_id": pid}])
    if "attributes" in product or "sku_options" in product:
        kb.add("view_product_information", {}, [{**product, "product_id": pid}])
    return kb.cands[pid]


def _item_index(req: Request, c: Cand, item: int | None) -> int:
    if item is not None and 0 <= item < len(req.items):
        return item
    overlap = [len(set(norm_words(it.noun)) & c.twords) for it in req.items]
    return max(range(len(req.items)), key=lambda i: (overlap[i], -i))


def score_product(query: str, product: dict[str, Any], item: int | None = None,
                  vocabulary: bool = True) -> tuple[float, str]:
    """Calibrated match score in [0, 1] and a one-sentence reason (module docstring); ``vocabulary`` lets other
    names of the item's kind of product count for the title (``Skill.vocabulary``)."""
    req = parse_request(query)
    c = _cand(product)
    i = _item_index(req, c, item)
    nouns = [norm_words(req.items[i].noun)]
    if vocabulary:
        from shoparena.llm.policies.vocab import siblings

        nouns += [norm_words(s) for s in siblings(req.items[i].noun)]
    m = match(req.items[i], c, nouns=nouns)
    total = len(m.ok) + len(m.bad) + len(m.unknown)
    base = (len(m.ok) + 0.5 * len(m.unknown)) / total if total else 0.8
    if m.bad:
        base = min(base, 0.45) * (0.6 ** (len(m.bad) - 1))
    named = max(m.noun, 0.7 if m.vals else 0.0)
    score = base * (0.55 + 0.45 * named)
    if not m.bad and not m.unknown and named >= 0.9:
        score = max(score, 0.92)
    parts = [f"meets {join(m.ok[:4])}" if m.ok else "", f"misses {join(m.bad[:3])}" if m.bad else "",
             f"cannot confirm {join(m.unknown[:3])}" if m.unknown else ""]
    noun = req.items[i].noun
    kind = ("is the requested" if named >= 0.9 else "may not be the requested" if named < 0.5
            else "resembles the requested")
    reason = f"The product {kind} '{noun}'" + (": " + "; ".join(p for p in parts if p) if any(parts) else "") + "."
    return round(min(1.0, max(0.0, score)), 3), reason


def _match_answer(messages: list[dict[str, Any]], skill: Skill, dec: Decider) -> str:
    text = _user(messages)
    head, product_text = _split(text, "\n\nProduct:\n")
    item = None
    if "\nRequested item: number " in head:
        head, _, rest = head.partition("\nRequested item: number ")
        digits = "".join(ch for ch in rest.split()[0] if ch.isdigit()) if rest.split() else ""
        item = int(digits) - 1 if digits else None
    try:
        product = json.loads(product_text)
    except ValueError:
        product = {}
    if not isinstance(product, dict):
        product = {}
    score, reason = score_product(head, product, item, skill.vocabulary)
    score = min(1.0, max(0.0, score + dec.noise(skill.noise * 0.12)))
    return json.dumps({"score": round(score, 3), "reason": reason})


def _narrate(messages: list[dict[str, Any]], skill: Skill, dec: Decider) -> str:
    query, products_text = _split(_user(messages), "\n\nChosen products:\n")
    try:
        products = json.loads(products_text)
    except ValueError:
        products = []
    products = [p for p in products if isinstance(p, dict)] if isinstance(products, list) else []
    if not products:
        return "I could not find products that fit the request."
    req = parse_request(query)
    lines = []
    for k, p in enumerate(products[:4]):
        title = str(p.get("title") or p.get("product_id") or "this product")
        price = p.get("price")
        price_s = f" at {money(float(price))}" if isinstance(price, int | float) else ""
        if skill.detail == 0:
            lines.append(f"{title}{price_s}")
            continue
        i = min(k, len(req.items) - 1)
        m = match(req.items[i], _cand(p))
        why = f" — it has {join(m.ok[:3])}" if m.ok else ""
        lines.append(f"{title} ({p.get('product_id', '?')}){price_s}{why}")
    lead = dec.phrase(["I recommend", "My pick:", "Best match:"]) if skill.detail else "Here you go:"
    text = f"{lead} " + "; ".join(lines) + "."
    if req.voucher is not None and skill.detail:
        total = sum(float(p.get("price")) for p in products if isinstance(p.get("price"), int | float))
        if total:
            text += f" The bundle comes to {money(total)} before the voucher, budget {money(req.voucher.budget)}."
    return text


def answer_subtask(task: str, messages: list[dict[str, Any]], skill: Skill, dec: Decider) -> str:
    """The reply text for one sub-task conversation."""
    if task == "classify_intent":
        return json.dumps(classify(_user(messages), skill))
    if task == "score_match":
        return _match_answer(messages, skill, dec)
    if task == "narrate":
        return _narrate(messages, skill, dec)
    return json.dumps({"error": f"unknown sub-task {task!r}"})
