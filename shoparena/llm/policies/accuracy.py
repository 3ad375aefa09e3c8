"""How well the query parser reads problems, measured against their reward annotations (evaluation only).

The policies never import this module: it compares ``parse_request(problem.query)`` with what the problem
record says (bucket, item count, per-item price mode and bounds, service codes, the voucher fields and, for
generated problems, the attribute/option values), to report and pin the parser's accuracy on the real
upstream queries (``tests/data/shoppingbench``) and on generated ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shoparena.llm.policies.parse import parse_request
from shoparena.tasks.types import Problem, RewardItem

__all__ = ["ParserAccuracy", "parser_accuracy"]


@dataclass
class ParserAccuracy:
    """Hits and totals per measured field."""

    hits: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    misses: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, ok: bool, query: str = "") -> None:
        self.totals[name] = self.totals.get(name, 0) + 1
        self.hits[name] = self.hits.get(name, 0) + int(ok)
        if not ok and query:
            self.misses.setdefault(name, []).append(query)

    def rate(self, name: str) -> float:
        return self.hits.get(name, 0) / self.totals[name] if self.totals.get(name) else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {k: {"rate": round(self.rate(k), 4), "hits": self.hits.get(k, 0), "total": n}
                for k, n in self.totals.items()}


def _price(item: RewardItem) -> tuple[str, float | None, float | None] | None:
    if not item.price:
        return None
    (mode, (lo, hi)), = item.price[0].items()
    return mode, lo, hi


def _values(item: RewardItem) -> list[str]:
    return [v.lower() for _, v in item.sku_attr_pairs()]


def parser_accuracy(problems: Iterable[Problem], *, values: bool = False) -> ParserAccuracy:
    """Accuracy of ``parse_request`` on ``problems`` (product / shop / voucher buckets).

    ``bucket``: detected bucket; ``items``: item count (shop and voucher problems); ``price`` and
    ``service``: per item, over problems whose items were split correctly (mode and both bounds must match;
    the service set must match); ``voucher``: every voucher field (scope, threshold, kind, face value,
    discount fraction, cap, budget); ``values`` (optional): share of annotated attribute/option values that
    the parser extracted as a phrase of the right item."""
    acc = ParserAccuracy()
    for p in problems:
        if p.bucket not in ("product", "shop", "voucher"):
            continue
        req = parse_request(p.query)
        acc.add("bucket", req.bucket == p.bucket, p.query)
        if p.bucket != "product":
            acc.add("items", len(req.items) == len(p.reward), p.query)
        if len(req.items) == len(p.reward):
            for spec, item in zip(req.items, p.reward, strict=True):
                got = (spec.price.mode, spec.price.lo, spec.price.hi) if spec.price else None
                acc.add("price", got == _price(item), p.query)
                acc.add("service", set(spec.services) == set(item.service or []), p.query)
                if values:
                    for v in _values(item):
                        acc.add("values", any(r.value == v or r.value.endswith(" " + v) or
                                              r.value.startswith(v + " ") for r in spec.reqs), p.query)
        if p.voucher is not None:
            v, w = req.voucher, p.voucher
            ok = v is not None and (v.scope, v.threshold, v.kind, v.face_value, v.cap, v.budget) == (
                w.voucher_type, w.threshold, w.discount_type, w.face_value, w.cap, w.budget) and (
                (v.discount is None and w.discount is None) or
                (v.discount is not None and w.discount is not None and abs(v.discount - w.discount) < 1e-9))
            acc.add("voucher", ok, p.query)
    return acc
