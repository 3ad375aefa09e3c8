"""The reasoning written between the real calls: a deterministic template, and the grounding check every
reasoning text (template or LLM) must pass.

:func:`template_reasoning` writes, for step ``k`` of a :class:`~shoparena.corpus.rewrite.trace.RewritePlan`, what an
agent would think before making call ``k``: what the previous observation showed (candidate ids, titles, prices,
services; detail attributes whose values the request names; an empty result or an error) and which call it makes
next and why (the constraints it is checking). It states only facts present in the query, the observations so far
and the calls' own arguments: titles and request phrases appear in double quotes exactly as they are in the
source, numbers as they are there (prices without a trailing ``.0``).

:func:`grounding_errors` is that rule as a check: every double-quoted span must occur in a source text
(case-insensitive), and every number must equal one in a source — except small integers (≤ 50: counts, item
numbers, pages), which the reasoning derives by counting. The :class:`~shoparena.corpus.rewrite.LLMRewriter` falls
back to the template for any model text that fails it.
"""

from __future__ import annotations

import re
from typing import Any

from shoparena.corpus.rewrite.trace import RealCall, RewritePlan
from shoparena.env.tools import LISTING_TOOLS

__all__ = ["grounding_errors", "query_constraints", "sources_for", "template_reasoning"]

_MONEY = r"(?:PHP|₱|P)?\s*\d[\d,]*(?:\.\d+)?"
_PRICE = re.compile(
    rf"\b(?:between\s+{_MONEY}\s*(?:PHP|pesos?)?\s+and\s+{_MONEY}"
    rf"|(?:under|below|less than|at most|cheaper than|no more than|above|over|more than|at least|greater than"
    rf"|higher than)\s+{_MONEY}|from\s+{_MONEY}\s+to\s+{_MONEY})(?:\s*(?:PHP|pesos?))?",
    re.I)
_SERVICES = re.compile(r"free shipping|free delivery|cash on delivery|\bCOD\b|pay on delivery|lazmall|"
                       r"official (?:store|shop|seller)|flash ?sale|lazflash", re.I)
_BUDGET = re.compile(r"budget is (?:only )?`?(\d[\d,]*(?:\.\d+)?)`?", re.I)
_SAME_SHOP = re.compile(r"(?:from )?the same (?:shop|store)", re.I)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_QUOTED = re.compile(r'"([^"\n]{2,160})"')
_WORD = re.compile(r"[a-z0-9]+")
SMALL_INT = 50
"""Integers up to this are counts / positions the reasoning derives, not facts it must quote."""


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return str(int(value)) if float(value).is_integer() else str(value)


def _clip(text: str, limit: int = 70) -> str:
    """A prefix of ``text`` cut at a word boundary and before any double quote (a prefix stays a substring of its
    source, and the quote marks around it stay unambiguous)."""
    text = str(text).split('"')[0].split("\n")[0].split("\\")[0].strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut or text[:limit]


def _dq(text: str) -> str:
    return '"' + str(text).replace('"', "'") + '"'


def query_constraints(query: str) -> list[str]:
    """The request's explicit price / service / budget / same-shop phrases, each quoted as it is written."""
    head = query.split("My budget is")[0]
    out = [_dq(" ".join(m.group(0).split())) for m in _PRICE.finditer(head)]
    out += [_dq(m.group(0)) for m in _SERVICES.finditer(head)]
    if m := _SAME_SHOP.search(query):
        out.append(_dq(m.group(0)))
    if m := _BUDGET.search(query):
        out.append(f"a budget of {m.group(1)}")
    seen: set[str] = set()
    return [c for c in out if not (c.lower() in seen or seen.add(c.lower()))]  # type: ignore[func-returns-value]


def _price_bounds(query: str) -> tuple[float | None, float | None] | None:
    m = _PRICE.search(query.split("My budget is")[0])
    if not m:
        return None
    nums = [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", m.group(0))]
    text = m.group(0).lower()
    if len(nums) >= 2:
        return min(nums[:2]), max(nums[:2])
    if not nums:
        return None
    if any(w in text for w in ("above", "over", "more than", "at least", "greater", "higher")):
        return nums[0], None
    return None, nums[0]


def _describe(call: RealCall) -> str:
    args = call.args()
    if call.name in LISTING_TOOLS:
        q = args.get("q") or args.get("query") or ""
        extras = [f"{k} {_dq(_num(v))}" for k, v in args.items() if k not in ("q", "query", "page") and v not in
                  (None, "")]
        page = args.get("page")
        if page not in (None, 1, "1"):
            extras.append(f"page {_num(page)}")
        return f"search the catalog for {_dq(q)}" + (f" with {', '.join(extras)}" if extras else "")
    if call.name == "view_product_information":
        ids = str(args.get("product_ids") or args.get("product_id") or "")
        return f"open the details of {ids} to check their attributes and options against the request"
    if call.name == "recommend_product":
        return f"recommend {args.get('product_ids') or args.get('product_id')}"
    if call.name == "terminate":
        return f"terminate with status {_dq(args.get('status', 'success'))}"
    return f"call {call.name} with {call.arguments}"


def _product_line(p: dict[str, Any]) -> str:
    bits = [str(p.get("product_id"))]
    if p.get("title"):
        bits.append(_dq(_clip(p["title"])))
    if isinstance(p.get("price"), int | float):
        bits.append(f"at {_num(p['price'])}")
    services = p.get("service")
    if isinstance(services, list) and services:
        bits.append("(" + ", ".join(str(s) for s in services) + ")")
    return " ".join(bits)


def _query_words(query: str) -> set[str]:
    return set(_WORD.findall(query.lower()))


def _detail_matches(p: dict[str, Any], qwords: set[str]) -> list[str]:
    """``attribute value`` pairs (and SKU option values) of a detail record whose value words the query names."""
    out: list[str] = []
    values: list[tuple[str, str]] = []
    attrs = p.get("attributes")
    if isinstance(attrs, dict):
        for k, vs in attrs.items():
            for v in vs if isinstance(vs, list) else [vs]:
                values.append((str(k), str(v)))
    skus = p.get("sku_options")
    if isinstance(skus, dict):
        for opt in skus.values():
            if isinstance(opt, dict):
                values.extend((str(k), str(v)) for k, v in opt.items())
    for k, v in values:
        words = _WORD.findall(v.lower())
        if words and all(w in qwords for w in words):
            item = f"{k} {_dq(v)}"
            if item not in out:
                out.append(item)
    return out[:4]


def _summary(call: RealCall, query: str, bounds: tuple[float | None, float | None] | None) -> str:
    """What the observation of ``call`` showed, in one or two sentences."""
    result = call.result()
    if isinstance(result, dict) and "error" in result:
        return f"The {call.name} call answered with an error: {_dq(_clip(str(result['error']), 120))}."
    if call.name in LISTING_TOOLS and isinstance(result, list):
        if not result:
            return f"The {call.name} call returned no products."
        items = [p for p in result if isinstance(p, dict)]
        shown = "; ".join(_product_line(p) for p in items[:4])
        text = f"The search returned {len(result)} products; the first ones: {shown}."
        if bounds is not None:
            lo, hi = bounds
            fit = [str(p.get("product_id")) for p in items[:4] if isinstance(p.get("price"), int | float)
                   and (lo is None or p["price"] >= lo) and (hi is None or p["price"] <= hi)]
            if fit:
                text += f" In the requested price range among them: {', '.join(fit)}."
        return text
    if call.name == "view_product_information" and isinstance(result, list):
        if not result:
            return "The detail view returned nothing."
        qwords = _query_words(query)
        parts = []
        for p in result[:4]:
            if not isinstance(p, dict):
                continue
            hits = _detail_matches(p, qwords)
            pid = p.get("product_id")
            parts.append(f"{pid} has {', '.join(hits)}" if hits else f"{pid} shows no attribute named in the request")
        return "The details: " + "; ".join(parts) + "." if parts else "The detail view returned no product records."
    if isinstance(result, str):
        return f"The {call.name} call answered {_dq(_clip(result, 120))}."
    return f"The {call.name} call returned a result."


def _observed_products(calls: list[RealCall]) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in calls:
        result = c.result()
        for p in result if isinstance(result, list) else []:
            if isinstance(p, dict) and p.get("product_id") is not None:
                seen.setdefault(str(p["product_id"]), {}).update(
                    {k: v for k, v in p.items() if k not in seen.get(str(p["product_id"]), {})})
    return seen


def template_reasoning(plan: RewritePlan, k: int) -> str:
    """The reasoning before step ``k`` of ``plan.steps()`` (module docstring). Deterministic."""
    steps = plan.steps()
    call = steps[k]
    bounds = _price_bounds(plan.query)
    parts: list[str] = []
    if k == 0:
        constraints = query_constraints(plan.query)
        if constraints:
            parts.append("The request states " + "; ".join(constraints) + ", so every candidate must be checked "
                         "against " + ("it." if len(constraints) == 1 else "them."))
        else:
            parts.append("The request states no price or service constraint; the product itself and its stated "
                         "attributes are what must match.")
    else:
        parts.append(_summary(steps[k - 1], plan.query, bounds))
    prev = steps[k - 1] if k else None
    if call.name == "recommend_product":
        products = _observed_products(plan.calls)
        unique = list(dict.fromkeys(plan.recommended_ids))
        picks = [_product_line({kk: v for kk, v in products.get(i, {"product_id": i}).items()
                                if kk in ("product_id", "title", "price")}) for i in unique]
        qwords = _query_words(plan.query)
        checked = [f"{i}: {', '.join(h)}" for i in unique if (h := _detail_matches(products.get(i, {}), qwords))]
        parts.append("Of the candidates I have seen, the best fit " + ("is " if len(picks) == 1 else "is the set ")
                     + "; ".join(picks) + "." + (" The details confirm " + "; ".join(checked) + "." if checked else ""))
        parts.append(f"I'll {_describe(call)}.")
    elif call.name == "terminate":
        parts.append(f"The recommendation is recorded, so I'll {_describe(call)}.")
    elif prev is not None and prev.name == call.name == "find_product" and prev.result() == [] \
            and prev.args().get("q") == call.args().get("q"):
        parts.append(f"Nothing matched with those filters, so I'll relax them and {_describe(call)}.")
    elif prev is not None and call.name == "find_product" and prev.name != "find_product":
        parts.append(f"Next I'll {_describe(call)} for the next part of the request.")
    else:
        parts.append(f"Next I'll {_describe(call)}.")
    return " ".join(parts)


def sources_for(plan: RewritePlan, k: int) -> list[str]:
    """What the reasoning before step ``k`` may cite: the query, every earlier call and observation, and the
    arguments of call ``k`` itself."""
    steps = plan.steps()
    out = [plan.query, *(m.get("content") for m in plan.head if isinstance(m.get("content"), str))]
    for c in steps[:k]:
        out += [c.arguments, c.observation]
    out.append(steps[k].arguments)
    return [s for s in out if isinstance(s, str)]


def _numbers(text: str) -> set[float]:
    out = set()
    for m in _NUMBER.findall(text):
        try:
            out.add(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


def grounding_errors(text: str, sources: list[str]) -> list[str]:
    """The facts in ``text`` no source states: double-quoted spans absent from every source and numbers (other than
    integers ≤ :data:`SMALL_INT`) equal to none in them. Empty when the text is grounded."""
    lowered = [s.lower() for s in sources]
    known = set().union(*(_numbers(s) for s in sources)) if sources else set()
    errors = [f"quote {q!r}" for q in _QUOTED.findall(text)
              if not any(q.lower() in s for s in lowered)]
    for n in sorted(_numbers(text)):
        if n.is_integer() and 0 <= n <= SMALL_INT:
            continue
        if n not in known:
            errors.append(f"number {_num(n)}")
    return errors
