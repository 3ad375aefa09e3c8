"""The search service: upstream ``/find_product`` and ``/view_product_information`` semantics over an index.

docs/shoppingbench.md §2. ``find_product`` analyses ``q``, takes the BM25 ranking (ties by product id), keeps the hits
passing the shop / price / service filters up to 50 (within the first ``CAPACITY`` unfiltered hits), sorts those
50 when asked (stable, so ties keep relevance order) and returns page ``page`` of 10.

Two input modes (§2.4): ``upstream`` reproduces the silent behaviour (a malformed ``price`` side or an unknown
service code filters nothing; a bad page gives ``[]``); ``strict`` answers a malformed argument with an error
observation naming the argument and the accepted forms. Two flavours: ``upstream`` (CAPACITY 100000, query text
as is) and ``oro`` (CAPACITY 10000, Lucene special characters turned into spaces).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import orjson
import regex

from shoparena.catalog.analysis import analyze
from shoparena.catalog.index import DocFilter, SearchIndex, TooManyClauses
from shoparena.catalog.index_build import service_mask
from shoparena.catalog.types import SERVICE_CODES, VIEW_FIELDS, Product
from shoparena.errors import ConfigError
from shoparena.types import FLAVORS as FLAVORS
from shoparena.types import MODES as MODES
from shoparena.types import Flavor
from shoparena.types import Mode as Mode

SORTS: tuple[str, ...] = ("order", "priceasc", "pricedesc")
PAGE_SIZE = 10
MAX_PAGE = 5
MAX_HITS = PAGE_SIZE * MAX_PAGE
CAPACITY = {"upstream": 100_000, "oro": 10_000}

_STRICT_PRICE = regex.compile(r"^\d*\.?\d*-\d*\.?\d*$")
_ORO_SPECIAL = regex.compile(r'[+\-&|!(){}\[\]^"~*?:\\/]')
_PRICE_FORMS = '"LOW-HIGH" with plain non-negative numbers, either side may be empty: "100-500", "1000-", "-250"'
_SERVICE_FORMS = f"a comma-separated subset of {', '.join(SERVICE_CODES)} (or default)"


def _error(argument: str, message: str, accepted: str) -> dict[str, Any]:
    return {"error": message, "argument": argument, "accepted": accepted}


def _bound(side: str) -> float | None:
    """One side of an upstream price range: a number, or no bound when it does not parse."""
    try:
        value = float(side)
    except ValueError:
        return None
    return None if value != value else value  # NaN compares false everywhere: treat it as no bound


def split_ids(product_ids: str | Sequence[str], *, strict: bool) -> list[str]:
    """Upstream: ``product_ids.split(",")`` as is. Strict: also strip whitespace and drop empty pieces."""
    ids = product_ids.split(",") if isinstance(product_ids, str) else [str(i) for i in product_ids]
    if strict:
        ids = [i.strip() for i in ids if i.strip()]
    return ids


class SearchService:
    """In-process implementation of :class:`shoparena.catalog.types.SearchBackend`."""

    def __init__(self, index: SearchIndex, *, mode: Mode = "upstream", flavor: Flavor = "upstream",
                 cache_size: int = 4096) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown search mode {mode!r}", hint=f"use one of {', '.join(MODES)}")
        if flavor not in FLAVORS:
            raise ConfigError(f"unknown search flavour {flavor!r}", hint=f"use one of {', '.join(FLAVORS)}")
        self.index = index
        self.mode = mode
        self.flavor = flavor
        self.capacity = CAPACITY[flavor]
        self._top = functools.lru_cache(maxsize=cache_size)(self._top_uncached)

    # ---- argument parsing --------------------------------------------------------------------------------
    def _parse(self, page: Any, shop_id: str | None, price: str | None, sort: str | None,
               service: str | None) -> tuple[int, DocFilter, str | None] | dict[str, Any] | None:
        """``(page, filter, sort)``; an error observation (strict); or None for upstream's silent ``[]``."""
        strict = self.mode == "strict"
        page_s = str(page).strip() if strict else str(page)
        if not (page_s.isdigit() and page_s.isascii() and 1 <= int(page_s) <= MAX_PAGE):
            return _error("page", f"invalid page {page!r}", f"an integer 1..{MAX_PAGE}") if strict else None
        lo = hi = None
        if price:
            if strict and not _STRICT_PRICE.match(price.strip()):
                return _error("price", f"malformed price range {price!r}", _PRICE_FORMS)
            parts = (price.strip() if strict else price).split("-")
            if len(parts) == 2:
                lo, hi = _bound(parts[0]), _bound(parts[1])
        mask = 0
        if service:
            codes = service.split(",")
            if strict:
                codes = [c.strip() for c in codes if c.strip()]
                bad = [c for c in codes if c not in SERVICE_CODES and c != "default"]
                if bad:
                    return _error("service", f"unknown service code(s) {', '.join(map(repr, bad))}", _SERVICE_FORMS)
            mask = service_mask(codes)
        if strict and sort and sort.strip() not in (*SORTS, "default"):
            return _error("sort", f"unknown sort {sort!r}", f"one of {', '.join(SORTS)} (or default)")
        shop = None
        if shop_id:
            shop = self.index.shop_code(shop_id.strip() if strict else shop_id)
        return int(page_s), DocFilter(shop=shop, price_lo=lo, price_hi=hi, services=mask), sort

    def _terms(self, q: str) -> tuple[str, ...]:
        if self.flavor == "oro":
            q = _ORO_SPECIAL.sub(" ", q)
        return tuple(analyze(q))

    def _top_uncached(self, terms: tuple[str, ...], flt: DocFilter) -> tuple[int, ...]:
        if flt.shop == -1:
            return ()
        hits = self.index.search(terms, k=MAX_HITS, flt=flt, capacity=self.capacity)
        return tuple(int(d) for d in hits.docs)

    def ranked_docs(self, q: str, page: Any = 1, shop_id: str | None = None, price: str | None = None,
                    sort: str | None = None, service: str | None = None) -> list[int] | dict[str, Any]:
        """Doc numbers of one result page (the work behind :meth:`find_product`), or an error observation."""
        parsed = self._parse(page, shop_id, price, sort, service)
        if parsed is None:
            return []
        if isinstance(parsed, dict):
            return parsed
        page_no, flt, sort_key = parsed
        if q is None or not str(q).strip():
            return _error("q", "empty query", "a non-empty search text") if self.mode == "strict" else []
        try:
            docs = list(self._top(self._terms(str(q)), flt))
        except TooManyClauses as exc:
            if self.mode == "strict":
                return _error("q", str(exc), "a shorter query")
            return []
        sort_key = (sort_key or "").strip() if self.mode == "strict" else sort_key
        if sort_key == "order":
            docs.sort(key=lambda d: -int(self.index.sold_counts[d]))
        elif sort_key == "priceasc":
            docs.sort(key=lambda d: float(self.index.prices[d]))
        elif sort_key == "pricedesc":
            docs.sort(key=lambda d: -float(self.index.prices[d]))
        start = (page_no - 1) * PAGE_SIZE
        return docs[start:start + PAGE_SIZE]

    # ---- the SearchBackend surface -----------------------------------------------------------------------
    def find_product(self, q: str, page: int | str = 1, shop_id: str | None = None, price: str | None = None,
                     sort: str | None = None, service: str | None = None) -> list[dict[str, Any]] | dict[str, Any]:
        docs = self.ranked_docs(q, page, shop_id, price, sort, service)
        if isinstance(docs, dict):
            return docs
        return [orjson.loads(self.index.find_json(d)) for d in docs]

    def find_product_json(self, q: str, page: int | str = 1, shop_id: str | None = None,
                          price: str | None = None, sort: str | None = None, service: str | None = None) -> bytes:
        """:meth:`find_product` serialised, built from pre-serialised items (the HTTP fast path)."""
        docs = self.ranked_docs(q, page, shop_id, price, sort, service)
        if isinstance(docs, dict):
            return orjson.dumps(docs)
        return b"[" + b",".join(self.index.find_json(d) for d in docs) + b"]"

    def _docs(self, product_ids: str | Sequence[str]) -> list[int]:
        ids = split_ids(product_ids, strict=self.mode == "strict")
        return [d for d in (self.index.doc_of(i) for i in ids) if d >= 0]

    def view_product_information(self, product_ids: str | Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for doc in self._docs(product_ids):
            record = orjson.loads(self.index.raw_json(doc))
            out.append({field: record[field] for field in VIEW_FIELDS})
        return out

    def get_product_raw(self, product_ids: str | Sequence[str]) -> list[dict[str, Any]]:
        return [orjson.loads(self.index.raw_json(doc)) for doc in self._docs(product_ids)]

    def get(self, product_id: str) -> Product | None:
        return self.index.get(product_id)
