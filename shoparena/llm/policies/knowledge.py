"""What a policy has learned from observations, and how well a product fits a requested item.

:class:`Knowledge` merges every observation into one table of :class:`Cand` (search fields: shop, title,
price, services; view fields: attributes, SKU variants, descriptions; check reports). :func:`match` grades a
candidate against an :class:`~shoparena.llm.policies.phrases.ItemSpec` the way the rule scorer counts
constraints (docs/shoppingbench.md §7.2): price mode, each service code, each attribute/option phrase (matched
against attribute values or one SKU variant, exact and lowercased), plus the head noun in the title as a
stand-in for the title axis the policy cannot compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from shoparena.llm.policies.phrases import ItemSpec, Req, norm_words

__all__ = ["Cand", "Knowledge", "Match", "match", "noun_score", "readable_key", "req_hit"]

_FAMILY = {"color": ("colo",), "size": ("size",), "material": ("material",), "pattern": ("pattern",),
           "model": ("model",)}


@dataclass(slots=True)
class Cand:
    """One product as seen so far."""

    pid: str
    shop: str = ""
    title: str = ""
    price: float | None = None
    service: tuple[str, ...] = ()
    service_known: bool = False
    """Whether ``service`` came from a search result (ORO's same-shop tool does not report services)."""
    sold: int = 0
    rank: int = 99
    """Best (lowest) position in any search result list."""
    attrs: dict[str, list[str]] | None = None
    sku: dict[str, dict[str, str]] | None = None
    desc: str = ""
    check: dict[str, Any] | None = None
    twords: frozenset[str] = frozenset()
    idx: tuple[dict[str, tuple[str, ...]], list[dict[str, tuple[str, ...]]]] | None = None
    """Value → keys indexes of the attributes and of each SKU variant (built on first use)."""

    @property
    def viewed(self) -> bool:
        return self.attrs is not None

    def short(self, n: int = 48) -> str:
        t = self.title if len(self.title) <= n else self.title[: n - 1].rstrip() + "…"
        return f"{self.pid} '{t}'"


@dataclass(slots=True)
class Knowledge:
    cands: dict[str, Cand] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)

    def add(self, name: str, params: dict[str, Any], result: Any) -> list[Cand]:
        """Merge one observation; returns the candidates it listed (in order) for searches."""
        if name == "find_product" and isinstance(result, list):
            self.queries.append(str(params.get("q") or params.get("query") or ""))
            page = params.get("page") if isinstance(params.get("page"), int) else 1
            return [self._seen(p, (page - 1) * 10 + i) for i, p in enumerate(result) if isinstance(p, dict)]
        if name == "view_product_information" and isinstance(result, list):
            for p in result:
                if isinstance(p, dict) and p.get("product_id"):
                    c = self.cands.setdefault(str(p["product_id"]), Cand(str(p["product_id"])))
                    c.attrs = {str(k): [str(x) for x in (v if isinstance(v, list) else [v])]
                               for k, v in (p.get("attributes") or {}).items()}
                    sku = p.get("sku_options") or {}
                    c.sku = {str(k): {str(a): str(b) for a, b in v.items()} for k, v in sku.items()
                             if isinstance(v, dict)} if isinstance(sku, dict) else {}
                    c.desc = f"{p.get('short_description') or ''} {p.get('description') or ''}"
                    c.idx = None
            return []
        if name == "check_product_match" and isinstance(result, dict):
            pid = str(params.get("product_id") or "")
            if pid:
                self.cands.setdefault(pid, Cand(pid)).check = result
            return []
        if name == "find_products_in_same_shop" and isinstance(result, dict) and result.get("found"):
            return [self._seen(p, 50 + i) for i, p in enumerate(result.get("products") or []) if isinstance(p, dict)]
        return []

    def _seen(self, p: dict[str, Any], rank: int) -> Cand:
        pid = str(p.get("product_id") or "")
        c = self.cands.get(pid)
        if c is None:
            c = self.cands[pid] = Cand(pid)
        if p.get("title") is not None and not c.title:
            c.title = str(p.get("title"))
            c.twords = frozenset(norm_words(c.title))
        if p.get("shop_id") is not None:
            c.shop = str(p["shop_id"])
        if isinstance(p.get("price"), int | float):
            c.price = float(p["price"])
        if isinstance(p.get("service"), list):
            c.service = tuple(str(s) for s in p["service"])
            c.service_known = True
        if isinstance(p.get("sold_count"), int):
            c.sold = p["sold_count"]
        c.rank = min(c.rank, rank)
        return c


@lru_cache(maxsize=16384)
def readable_key(key: str) -> str:
    words = key.lower().replace("_", " ").split()
    if len(words) > 1 and words[0] == "fa":
        words = words[1:]
    return " ".join(words)


def _key_ok(kind: str, key: str) -> bool:
    k = key.lower()
    if kind == "brand":
        return "brand" in k
    fam = _FAMILY.get(kind)
    return fam is None or any(f in k for f in fam)


def req_hit(req: Req, key: str, value: str) -> bool:
    """Whether one (key, value) pair of a product satisfies one requirement phrase."""
    return _hit(req, {value.lower(): (key,)})


Index = dict[str, tuple[str, ...]]


def _index(pairs: Any) -> Index:
    """value (lowercased) → the keys carrying it."""
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        out.setdefault(str(v).lower(), []).append(str(k))
    return {v: tuple(ks) for v, ks in out.items()}


def _hit(req: Req, idx: Index) -> bool:
    if req.kind == "generic":  # "top fit types regular": some split is a readable key and its value
        words = req.value.split()
        for j in range(len(words)):
            keys = idx.get(" ".join(words[j:]))
            if keys:
                head = " ".join(words[:j]).rstrip(":")
                if not head or any(readable_key(k) == head for k in keys):
                    return True
        for j in range(1, len(words)):  # "<value> <key>"
            keys = idx.get(" ".join(words[:j]))
            if keys and any(readable_key(k) == " ".join(words[j:]) for k in keys):
                return True
        return False
    keys = idx.get(req.value)
    if not keys:
        return False
    if req.kind == "kv":
        return any(readable_key(k) == req.key for k in keys)
    return any(_key_ok(req.kind, k) for k in keys)


@dataclass(slots=True)
class Match:
    """A candidate against one item: satisfied, violated and not-yet-known constraints."""

    ok: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    noun: float = 0.0
    vals: int = 0
    """Attribute/option phrases confirmed (a product named differently can still be the item)."""
    extra: int = 0
    """Attribute keys and services the product has beyond what was asked (known after a view)."""

    @property
    def complete(self) -> bool:
        return not self.bad and not self.unknown

    @property
    def strong(self) -> bool:
        """Every stated constraint confirmed, and the title names the item or a stated value was confirmed."""
        return self.complete and (self.noun >= 0.5 or self.vals > 0)

    def score(self) -> float:
        """Higher is better: −4 per violated constraint, −1 per unknown one, up to −2 for a title that does not
        name the item (halved once stated values are confirmed)."""
        miss = (1.0 - self.noun) * (1.0 if self.vals == 0 else 0.5)
        return -4.0 * len(self.bad) - 1.0 * len(self.unknown) - 2.0 * miss


def _reqs_hits(reqs: tuple[Req, ...], c: Cand) -> list[bool]:
    """Per requirement: met by an attribute or by the one SKU variant that meets the most (scorer rule)."""
    if c.idx is None:
        attr_idx = _index((k, v) for k, vs in (c.attrs or {}).items() for v in vs)
        c.idx = (attr_idx, [_index(variant.items()) for variant in (c.sku or {}).values()])
    attr_idx, variants = c.idx
    base = [_hit(r, attr_idx) for r in reqs]
    best, top = base, sum(base)
    if top < len(reqs):
        for vidx in variants:
            hits = [b or _hit(r, vidx) for r, b in zip(reqs, base, strict=True)]
            if sum(hits) > top:
                best, top = hits, sum(hits)
    return best


def noun_score(nouns: list[list[str]], twords: frozenset[str]) -> float:
    """How well the title names the item: the noun's head word counts 0.6 and its modifiers 0.4; another name
    of the same kind of product (``nouns[1:]``, from the store's category vocabulary) counts 0.9 when all its
    words are there."""
    if not nouns or not nouns[0]:
        return 1.0
    words = nouns[0]
    own = 1.0 if words[-1] in twords else 0.0  # the head word ("flour" of "all purpose flour") counts most
    if len(words) > 1:
        own = 0.6 * own + 0.4 * sum(w in twords for w in words[:-1]) / (len(words) - 1)
    if own < 1.0:
        for other in nouns[1:]:
            if other and all(w in twords for w in other):
                return max(own, 0.9)
    return own


def match(item: ItemSpec, c: Cand, *, use_check: bool = False, nouns: list[list[str]] | None = None) -> Match:
    """Grade ``c`` against ``item`` (module docstring). Unviewed candidates leave value phrases unknown unless
    their words show in the title; ``use_check`` trusts a ``check_product_match`` report instead of a view;
    ``nouns`` are the item noun's words and those of other names for it (default: the noun alone)."""
    m = Match()
    if item.price is not None:
        (m.ok if item.price.ok(c.price) else m.bad).append(f"price {item.price.text()}")
    for code in item.services:
        (m.ok if code in c.service else m.bad if c.service_known else m.unknown).append(code)
    if item.reqs:
        if c.viewed:
            for r, hit in zip(item.reqs, _reqs_hits(item.reqs, c), strict=True):
                (m.ok if hit else m.bad).append(r.text)
                m.vals += hit
        elif use_check and c.check is not None:
            mism = {str(x).lower() for x in c.check.get("mismatches") or []}
            for r in item.reqs:
                hit = check_key(r).lower() not in mism
                (m.ok if hit else m.bad).append(r.text)
                m.vals += hit
        else:
            for r in item.reqs:
                words = norm_words(r.value)
                if words and all(w in c.twords for w in words):
                    m.ok.append(r.text)
                else:
                    m.unknown.append(r.text)
    m.noun = noun_score(nouns if nouns is not None else [norm_words(item.noun)], c.twords)
    if c.viewed:
        asked = len(item.reqs)
        m.extra = max(0, len(c.attrs or {}) + (1 if c.sku else 0) - asked) + max(0, len(c.service) - len(item.services))
    return m


def check_key(r: Req) -> str:
    """The requirement name sent to ``check_product_match`` for one phrase."""
    if r.kind in ("kv", "generic"):
        words = (r.key or r.value).split()
        return "_".join(words[:-1] if r.kind == "generic" and len(words) > 1 else words) or "detail"
    return r.kind


def check_value(r: Req) -> str:
    if r.kind == "generic":
        words = r.value.split()
        return words[-1] if len(words) > 1 else r.value
    return r.value


def prior(item: ItemSpec, c: Cand, m: Match) -> float:
    """How likely this listing is the one the shopper describes, beyond the stated constraints (≤ 0, nats).

    A shopper describing an item mentions some of its notable features, so a listing with many features left
    unmentioned is a less likely match (−0.35 per attribute, option set and service; an unviewed listing is
    assumed average). A stated price range is usually set around the intended item: cheaper listings inside
    the range are likelier (−log price, twice for a two-sided range), and listings below half of the upper
    bound, or above twenty times a lower bound, are unlikely (−3)."""
    attrs = (len(c.attrs or {}) + (1 if c.sku else 0)) if c.viewed else 2.5
    s = -0.35 * (attrs + len(set(c.service)))
    if c.sku and len(c.sku) > 1:
        s -= 0.2 * math.log(len(c.sku))
    price, rng = c.price, item.price
    if rng is not None and price:
        s -= 0.5 * (2.0 if rng.mode == "between" else 1.0) * math.log(max(1.0, price))
        if (rng.hi is not None and price < rng.hi / 2) or (rng.mode == "greater than" and rng.lo
                                                           and price > 20 * rng.lo):
            s -= 3.0
    return s
