"""Query understanding: bucket, the requested items in order, and the voucher block (docs/shoppingbench.md §3.3).

``parse_request(query)`` is what every policy (and the ``classify_intent`` answer) starts from. It reads only
the query text, never a problem record, and is cached by text. Items are split on numbered lists (``(1) …;
(2) …``), ordinal sentences (``First, … Second, … Finally, …``), semicolons, and, in free text, on ``, a …`` /
``and a …`` boundaries; the request frame (``Find a shop that offers …``, ``… from the same store.``) is
stripped so the first and last items keep only their own words.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import regex as re

from shoparena.llm.policies.phrases import (
    SERVICE_ORDER,
    ItemSpec,
    find_price,
    find_services,
    parse_item,
)

__all__ = ["Request", "VoucherSpec", "parse_request", "parse_voucher"]

_NUM = r"`?(\d[\d,]*(?:\.\d+)?)`?"
_V_BUDGET = re.compile(rf"budget is (?:only |just )?(?:of )?{_NUM}", re.I)
_V_THRESH = re.compile(rf"(?:exceeds|exceeding|at least|over|above|reaches)\s+{_NUM}", re.I)
_V_FIXED = re.compile(rf"fixed discount of\s+{_NUM}", re.I)
_V_PCT = re.compile(rf"percentage discount of\s+`?(\d+(?:\.\d+)?)\s*%`?(?:\s*with a cap of\s+{_NUM})?", re.I)
_V_START = re.compile(r"\n?\s*my budget is\b", re.I)

_NUMBERED = re.compile(r"(?:\(\s*\d\s*\)|(?<![\w.])\d\))\s*")
_ORDINAL = re.compile(r"(?:^|(?<=[.!?:;]\s+))(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|fourth|fifth|next|then|also|"
                      r"additionally|finally|lastly|last)\b,?\s*", re.I)
_ARTICLE_SPLIT = re.compile(r",?\s+and also\s+(?:sell(?:s|ing)|offer(?:s|ing)|search(?:es|ing) for|look(?:s|ing) for|has|"
                            r"carr(?:y|ies|ying))?\s*|,\s+as well as\s+(?:stores? selling\s+)?|\s*,\s*(?:and\s+|as well as\s+|plus\s+)?(?:also\s+(?:selling\s+|offering\s+)?)?"
                            r"(?=(?:a|an|another|one|some|two|three)\s)"
                            r"|\s+(?:and|as well as|plus)\s+(?:also\s+(?:selling\s+|offering\s+)?)?"
                            r"(?=(?:a|an|another|one|some)\s)", re.I)
_ADDITIVE = re.compile(r"^(?:also|additionally|next|then|lastly|finally|plus|another|and)\b,?\s*(?:i\s+(?:also\s+)?"
                       r"(?:want|need|am looking for|'m looking for|'m searching for)|look for|search for|find|"
                       r"get)?\s*", re.I)
_REQUEST_SENTENCE = re.compile(r"^(?:please|can you|could you|only show|show|the shop|the store|all |make sure|"
                               r"i want (?:all|them|everything)|everything|they |it should|these|find me a shop|"
                               r"help me find a (?:shop|store))", re.I)
_NOT_ITEM_START = re.compile(r"^(?:a|an)\s+(?:price|cost|budget|\d|maximum|minimum|range|discount|cap|"
                             r"lazflash|lazmall|flash|free|fast|7-day|guarantee|warranty|total)\b", re.I)
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey)[,!]?\s+)?(?:please\s+)?(?:can|could|would) you\s+(?:please\s+)?(?:help me\s+)?|"
    r"^(?:please\s+)(?:help me\s+)?|^help me\s+|"
    r"^(?:i'm|i am|i'd|i would|i)\s+(?:also\s+)?(?:really\s+)?|"
    r"^(?:is there|are there|where can i|which|any|do you have|here's|here is)\s*", re.I)
_VERB = re.compile(
    r"^(?:(?:looking|searching|shopping|planning|trying|like|love|want|need|wanting)(?:\s+(?:to|for))?\s+)?"
    r"(?:(?:find|show|get|buy|purchase|order|pick|search for|shop for|look up|locate|recommend|put together a cart"
    r" with|recommendations for|what i need|a few things|the following)\b\s*(?:me\s+)?)?", re.I)
_SHOP_LEAD = re.compile(
    r"^.*?\b(?:shops?|stores?|sellers?)\b(?:\s+with\b|[^:]*?\b(?:offer(?:s|ing)?|sell(?:s|ing)?|carr(?:y|ies|ying)|"
    r"stocks?|has|have|get|buy|order)\b)(?:\s+(?:all|both|each|any)\s+of)?(?:\s+(?:the following|these(?:\s+\w+)?|"
    r"all|both|several \w+(?:\s+\w+)?))?\s*:?\s*", re.I)
_COLON_LEAD = re.compile(r"^[^:]{0,120}:\s*")
_TAIL = re.compile(
    r"(?:[.?!]\s+(?:the shop|all |everything|they |please |make sure|i want to|it should|can you|show|"
    r"only show|find|these |both |the store|please).*$)|(?:,?\s+(?:for me|please|in stock|within my budget|"
    r"all from the same (?:shop|store|seller))[.?!]*$)|[.?!]+$", re.I | re.S)
_SHOP_WORDS = re.compile(r"\b(?:shops?|stores?|sellers?|merchants?|vendors?)\b", re.I)
_SHOP_VERB = re.compile(r"\bshop(?:ping)? for\b", re.I)
_SERVICE_SHOP = re.compile(r"\b(?:sold by |from )?(?:an? |the )?official (?:lazmall )?(?:store|shop|seller)\b|"
                           r"\blazmall (?:store|shop|seller)\b", re.I)


@dataclass(frozen=True, slots=True)
class VoucherSpec:
    """The voucher rules as stated: ``scope`` platform|shop, ``kind`` fixed|percentage, ``discount`` a fraction."""

    budget: float
    scope: str
    threshold: float
    kind: str
    face_value: float | None = None
    discount: float | None = None
    cap: float | None = None

    def discounted(self, total: float) -> float:
        """The bundle price after the discount (threshold and scope not checked)."""
        if self.kind == "fixed":
            return total - (self.face_value or 0.0)
        cut = total * (self.discount or 0.0)
        return total - (cut if self.cap is None else min(cut, self.cap))

    def pays(self, total: float, one_shop: bool) -> float:
        """What the shopper pays: the discounted total when the voucher applies (scope, total ≥ threshold)."""
        if (self.scope == "platform" or one_shop) and total >= self.threshold:
            return self.discounted(total)
        return total

    def fits(self, total: float, one_shop: bool) -> bool:
        return total <= self.budget or self.pays(total, one_shop) <= self.budget

    def percent(self) -> float:
        return round((self.discount or 0.0) * 100, 6)


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed query: ``bucket`` product|shop|voucher, ``items`` in request order, the voucher if any."""

    query: str
    text: str
    bucket: str
    items: tuple[ItemSpec, ...]
    voucher: VoucherSpec | None = None


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def parse_voucher(query: str) -> VoucherSpec | None:
    """The voucher block's rules, or None when the query has no recognisable block."""
    b, t = _V_BUDGET.search(query), _V_THRESH.search(query)
    fixed, pct = _V_FIXED.search(query), _V_PCT.search(query)
    if not b or not (fixed or pct):
        return None
    scope = "shop" if re.search(r"same shop|same store|from the same seller|only applies to the products from",
                                query, re.I) else "platform"
    threshold = _num(t.group(1)) if t else 0.0
    if fixed:
        return VoucherSpec(_num(b.group(1)), scope, threshold, "fixed", face_value=_num(fixed.group(1)))
    assert pct is not None
    cap = _num(pct.group(2)) if pct.group(2) else None
    return VoucherSpec(_num(b.group(1)), scope, threshold, "percentage", discount=_num(pct.group(1)) / 100, cap=cap)


def _strip_lead(text: str, shop: bool) -> str:
    t = text.strip()
    if shop:
        m = _SHOP_LEAD.match(t)
        if m and m.end() < len(t):
            return t[m.end():]
    m = _COLON_LEAD.match(t)
    if m and re.search(r"\b(?:items?|products?|following|things|need|these|seller|shop|store)\s*:\s*$", m.group(), re.I):
        return t[m.end():]
    for _ in range(2):
        t = _LEAD.sub("", t, count=1).strip()
    return _VERB.sub("", t, count=1).strip() or text.strip()


def _outside_parens(text: str, rx: re.Pattern[str]) -> list[str]:
    """``rx.split(text)`` ignoring matches inside parentheses."""
    depth, cuts = 0, []
    marks = {m.start(): m.end() for m in rx.finditer(text)}
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and i in marks and marks[i] > i:
            cuts.append((i, marks[i]))
            i = marks[i]
            continue
        i += 1
    out, last = [], 0
    for a, b in cuts:
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    return [p for p in out if p.strip()]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if s.strip()]


def _split(text: str, multi: bool) -> list[str]:
    if _NUMBERED.search(text) and len(_NUMBERED.findall(text)) >= 2:
        parts = _NUMBERED.split(text)
        pre, parts = parts[0], parts[1:]
        return [p.strip(" ;,.") for p in parts if p.strip(" ;,.")] or [pre]
    marks = list(_ORDINAL.finditer(text))
    if multi and len(marks) >= 2 and marks[0].group().lower().startswith("first"):
        parts = [text[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(text))]
                 for i, m in enumerate(marks)]
        return [p.strip(" .;,") for p in parts if p.strip(" .;,")]
    if not multi:
        return [text]
    if ";" in text:
        return [re.sub(r"^(?:and|also)\s+", "", p.strip(), flags=re.I) for p in text.split(";") if p.strip()]
    sents = [s for s in _sentences(text) if not _REQUEST_SENTENCE.match(s)]
    if len(sents) >= 2 and all(_ADDITIVE.match(s) for s in sents[1:]):
        return [_ADDITIVE.sub("", s, count=1) for s in sents]
    parts = _outside_parens(sents[0] if sents else text, _ARTICLE_SPLIT)
    merged: list[str] = []
    for p in parts:
        if merged and (_NOT_ITEM_START.match(p) or len(p.split()) < 2):
            merged[-1] = f"{merged[-1]} and {p}"
        else:
            merged.append(p)
    if len(merged) == 1:
        both = re.search(r"\bboth\s+", merged[0], re.I)
        if both:
            halves = _outside_parens(merged[0][both.end():], re.compile(r"\s+and\s+"))
            if len(halves) == 2:
                return halves
    return merged


def _clean_item(text: str, first: bool, last: bool, shop: bool) -> str:
    t = text.strip()
    if first:
        t = _strip_lead(t, shop)
    if last:
        t = _TAIL.sub("", t).strip()
        t = re.split(r"\.\s+(?=[A-Z])", t)[0] if t.count(". ") and not find_price(t.split(". ", 1)[1])[0] else t
    t = re.sub(r"^(?:i (?:want|need)|i'm (?:searching|looking) for|i'd like)\s+", "", t, flags=re.I)
    return t.strip(" ,.;:?!")


def _bucket(text: str, voucher: VoucherSpec | None, query: str) -> str:
    if voucher is not None or re.search(r"\bvouchers?\b|\bbudget\b", query, re.I):
        return "voucher"
    text = _SHOP_VERB.sub(" ", _SERVICE_SHOP.sub(" ", text))
    return "shop" if _SHOP_WORDS.search(text) else "product"


@lru_cache(maxsize=8192)
def parse_request(query: str) -> Request:
    """Parse a query (cached by text)."""
    m = _V_START.search(query)
    text = (query[:m.start()] if m else query).strip()
    voucher = parse_voucher(query[m.start():]) if m else None
    bucket = _bucket(text, voucher, query)
    multi = bucket != "product"
    body = text
    if multi:
        body = re.sub(r"(?<=[.?!])\s*(?:all items|everything|they|all of them|all products|all these|please make)"
                      r"[^.?!]*(?:same|one|single) (?:shop|store|seller)[^.?!]*[.?!]?\s*$", "", body, flags=re.I)
    parts = _split(body, multi) or [body]
    if len(parts) == 1 and multi:
        stripped = _strip_lead(parts[0], bucket == "shop")
        parts = _split(stripped, True) if stripped != parts[0] else parts
        items = [_clean_item(p, i == 0, i == len(parts) - 1, False) for i, p in enumerate(parts)]
    else:
        items = [_clean_item(p, i == 0, i == len(parts) - 1, bucket == "shop") for i, p in enumerate(parts)]
    specs = tuple(parse_item(t) for t in items if t) or (parse_item(text),)
    if bucket == "product":
        first = specs[0]
        price = first.price or find_price(text)[0]
        services = tuple(dict.fromkeys((*first.services, *find_services(text))))
        specs = (replace(first, price=price, services=tuple(c for c in SERVICE_ORDER if c in services)),)
    return Request(query=query, text=text, bucket=bucket, items=specs, voucher=voucher)

