"""What a trajectory observed, and finding it again in reasoning text (the rubric judge's matchers).

:class:`Observed` indexes every datum the tool results showed — product and shop ids, prices, titles, brands,
attribute and SKU-option values — with the step whose results first showed it, so "observed before step k" is a
lookup. A product record counts only when the gateway's call log returned its id (when the log records returned
ids at all): a result the agent wrote into its own trace is not evidence. Values that also occur in the query are
dropped from the datum sets: repeating the request is not citing a result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shoparena.env.records import step_results

__all__ = ["Datum", "Observed", "observe"]

_ID = re.compile(r"(?<![\d.,])\d{5,12}(?![\d]|[.,]\d)")
_NUM = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?"
_PRICE = re.compile(rf"(?<![A-Za-z])(?:₱|PHP|P(?=\d))\s?{_NUM}(?!\d)|(?<![\d.,]){_NUM}\s?(?:PHP|php|pesos?)\b"
                    rf"|\bpriced?\s+(?:at\s+|of\s+|is\s+)?{_NUM}(?!\d)", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_LETTER = re.compile(r"[a-z]")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_PRODUCT_KEYS = ("product_id", "productId")
_TITLE_N = 4


@dataclass(frozen=True, slots=True)
class Datum:
    """One datum cited in a text: what it is, its value and where it lies in that text."""

    kind: str
    """``product``, ``shop``, ``price``, ``value`` (brand / attribute / SKU option) or ``title``."""
    value: str
    start: int
    end: int
    product: str | None = None
    """The product a ``product`` id or a ``title`` fragment names (candidate identity for gate 4)."""


def _money(whole: str, frac: str | None) -> float:
    return round(float(whole.replace(",", "") + ("." + frac if frac else "")), 2)


@dataclass
class Observed:
    """Data the tool results showed, each with the first step whose results showed it."""

    query: str
    returned: set[str] | None
    """Product ids the gateway returned (None: the log records no search results)."""
    ids: dict[str, tuple[str, int]] = field(default_factory=dict)
    prices: dict[float, int] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)
    grams: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)
    _qwords: set[str] = field(init=False, repr=False)
    _qnums: set[float] = field(init=False, repr=False)
    _qtext: str = field(init=False, repr=False)
    _value_rx: re.Pattern[str] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        q = " ".join(self.query.lower().split())
        self._qwords = set(_WORD.findall(q))
        self._qnums = {round(float(x), 2) for x in _DIGITS.findall(q.replace(",", ""))}
        self._qtext = q

    def in_query(self, text: str) -> bool:
        """Whether ``text`` occurs in the query as whole words (case-insensitive)."""
        return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", self._qtext) is not None

    # -- building -------------------------------------------------------------------------------------------
    def _id(self, value: Any, kind: str, step: int) -> None:
        s = str(value).strip()
        if s.isdigit() and s not in self.ids:
            self.ids[s] = (kind, step)

    def _value(self, value: Any, step: int) -> None:
        s = " ".join(str(value).lower().split())
        if 3 <= len(s) <= 60 and _LETTER.search(s) and s not in self.values and not self.in_query(s):
            self.values[s] = step
            self._value_rx = None

    def _product(self, rec: dict[str, Any], step: int) -> None:
        pid = next((str(rec[k]) for k in _PRODUCT_KEYS if rec.get(k) is not None), "")
        if pid and self.returned is not None and pid not in self.returned:
            return  # a product the gateway never returned: the agent wrote this record itself
        if pid:
            self._id(pid, "product", step)
        if rec.get("shop_id") is not None:
            self._id(rec["shop_id"], "shop", step)
        price = rec.get("price")
        if isinstance(price, int | float) and not isinstance(price, bool):
            p = round(float(price), 2)
            if p not in self._qnums:
                self.prices.setdefault(p, step)
        if rec.get("brand"):
            self._value(rec["brand"], step)
        for vals in (rec.get("attributes") or {}).values() if isinstance(rec.get("attributes"), dict) else ():
            for v in vals if isinstance(vals, list) else [vals]:
                self._value(v, step)
        skus = rec.get("sku_options")
        for opt in skus.values() if isinstance(skus, dict) else ():
            for v in opt.values() if isinstance(opt, dict) else ():
                self._value(v, step)
        words = _WORD.findall(str(rec.get("title") or "").lower())
        for i in range(len(words) - _TITLE_N + 1):
            gram = tuple(words[i:i + _TITLE_N])
            if not set(gram) <= self._qwords:
                self.grams.setdefault(gram, (pid, step))

    def add(self, result: Any, step: int) -> None:
        """Index one tool result observed at ``step``."""
        if isinstance(result, str):
            text = result.strip()
            if text[:1] in "[{":
                try:
                    result = json.loads(text)
                except ValueError:
                    result = None
            if isinstance(result, str) or result is None:
                for m in _ID.finditer(text):
                    if self.returned is None or m.group() in self.returned:
                        self._id(m.group(), "product", step)
                return
        if isinstance(result, dict):
            if any(k in result for k in _PRODUCT_KEYS) or "shop_id" in result:
                self._product(result, step)
            for v in result.values():
                if isinstance(v, dict | list):
                    self.add(v, step)
        elif isinstance(result, list):
            for v in result:
                self.add(v, step)

    # -- matching -------------------------------------------------------------------------------------------
    def cited(self, text: str, before: int) -> Iterator[Datum]:
        """Data observed before step ``before`` that ``text`` cites, in text order per kind."""
        for m in _ID.finditer(text):
            hit = self.ids.get(m.group())
            if hit is not None and hit[1] < before:
                yield Datum(hit[0], m.group(), m.start(), m.end(), m.group() if hit[0] == "product" else None)
        for m in _PRICE.finditer(text):
            whole, frac = next((m.group(g), m.group(g + 1)) for g in (1, 3, 5) if m.group(g))
            p = _money(whole, frac)
            if self.prices.get(p, before) < before:
                yield Datum("price", m.group(), m.start(), m.end())
        if self.values:
            if self._value_rx is None:
                alts = "|".join(re.escape(v) for v in sorted(self.values, key=len, reverse=True))
                self._value_rx = re.compile(rf"(?<![\w])(?:{alts})(?![\w])", re.IGNORECASE)
            for m in self._value_rx.finditer(text):
                if self.values.get(" ".join(m.group().lower().split()), before) < before:
                    yield Datum("value", m.group(), m.start(), m.end())
        words = [(w.group(), w.start(), w.end()) for w in _WORD.finditer(text.lower())]
        for i in range(len(words) - _TITLE_N + 1):
            hit = self.grams.get(tuple(w for w, _, _ in words[i:i + _TITLE_N]))
            if hit is not None and hit[1] < before:
                yield Datum("title", text[words[i][1]:words[i + _TITLE_N - 1][2]], words[i][1],
                            words[i + _TITLE_N - 1][2], hit[0] or None)


def observe(query: str, steps: list[dict[str, Any]], returned: set[str] | None) -> Observed:
    """Index every step's tool results (step ``k``'s results are observed at ``k``)."""
    obs = Observed(query=query, returned=returned)
    for k, step in enumerate(steps):
        comp = step.get("completion") if isinstance(step, dict) else None
        msg = comp.get("message") if isinstance(comp, dict) else None
        try:
            results = step_results(msg) if isinstance(msg, dict) else []
        except (TypeError, AttributeError, KeyError):
            continue
        for has, value in results:
            if has:
                obs.add(value, k)
    return obs
