"""The narrow prompts a sub-task (axis-B) pipeline sends to an LLM, and the parsers of their answers.

An axis-B agent keeps the search loop in Python and asks the model only for small judgements (paper §1: the
audited race winner used the LLM "as intent classifier, match scorer and narrator"). The three sub-tasks:

- ``classify_intent``: the request → ``{"bucket": "product"|"shop"|"voucher", "items": n, "queries": [...]}``
  (one short search query per requested product, in request order);
- ``score_match``: the request + one candidate product → ``{"score": 0..1, "reason": "..."}``;
- ``narrate``: the request + the chosen products → a short plain-text recommendation.

Each prompt's system message starts with ``### shoparena subtask: <name>`` so offline policy models can recognise
it; real LLMs just follow the instructions. Parsers are lenient about surrounding text and code fences and return
None when no usable answer is found (the caller falls back; a failure is data, not an exception).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "MARKER", "SUBTASKS", "intent_messages", "match_messages", "narrate_messages", "parse_intent", "parse_match",
    "subtask_of",
]

MARKER = "### shoparena subtask: "
SUBTASKS: tuple[str, ...] = ("classify_intent", "score_match", "narrate")

_INTENT = MARKER + """classify_intent
You read one shopping request and classify it. Answer with one JSON object and nothing else:
{"bucket": "product" | "shop" | "voucher", "items": <number of different products requested>,
 "queries": [<one short catalog search query per requested product, in the order the request lists them>]}
bucket is "voucher" when the request mentions a budget or a voucher, "shop" when several products must come
from the same shop, otherwise "product"."""

_MATCH = MARKER + """score_match
You judge whether one catalog product satisfies one requested item of a shopping request. Consider the product
type, every stated attribute or option (size, colour, material …), the price range and the services (free
shipping, cash on delivery, official store, flash sale). Answer with one JSON object and nothing else:
{"score": <number from 0 to 1>, "reason": "<one short sentence>"}"""

_NARRATE = MARKER + """narrate
You write the final message to the shopper: in two or three sentences, say which products you recommend and why
they fit the request. Plain text, no JSON."""

_SUBTASK_RE = re.compile(re.escape(MARKER) + r"(\w+)")
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def intent_messages(query: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": _INTENT}, {"role": "user", "content": query}]


def match_messages(query: str, product: dict[str, Any], item: int | None = None) -> list[dict[str, Any]]:
    """``product``: the fields the agent has seen (find_product and/or view_product_information items)."""
    which = f"\nRequested item: number {item + 1} of the request." if item is not None else ""
    user = f"Request:\n{query}{which}\n\nProduct:\n{json.dumps(product, ensure_ascii=False, sort_keys=True)}"
    return [{"role": "system", "content": _MATCH}, {"role": "user", "content": user}]


def narrate_messages(query: str, products: list[dict[str, Any]]) -> list[dict[str, Any]]:
    user = f"Request:\n{query}\n\nChosen products:\n{json.dumps(products, ensure_ascii=False)}"
    return [{"role": "system", "content": _NARRATE}, {"role": "user", "content": user}]


def subtask_of(messages: list[dict[str, Any]]) -> str | None:
    """The sub-task a conversation asks for (from its system message), or None for an agent conversation."""
    for m in messages:
        if m.get("role") == "system":
            found = _SUBTASK_RE.search(str(m.get("content") or ""))
            return found.group(1) if found else None
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    found = _JSON_OBJECT.search(text or "")
    if not found:
        return None
    try:
        obj = json.loads(found.group())
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_intent(text: str) -> dict[str, Any] | None:
    obj = _json_object(text)
    if not obj or obj.get("bucket") not in ("product", "shop", "voucher"):
        return None
    queries = obj.get("queries")
    queries = [str(q) for q in queries if str(q).strip()] if isinstance(queries, list) else []
    try:
        items = max(1, int(obj.get("items") or len(queries) or 1))
    except (TypeError, ValueError):
        items = max(1, len(queries))
    return {"bucket": obj["bucket"], "items": items, "queries": queries}


def parse_match(text: str) -> float | None:
    obj = _json_object(text)
    if not obj:
        return None
    try:
        score = float(obj.get("score"))
    except (TypeError, ValueError):
        return None
    return min(1.0, max(0.0, score)) if score == score else None
