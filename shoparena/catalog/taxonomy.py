"""The category tree and value vocabularies of the synthetic catalog, loaded from ``data/*.json``.

``data/taxonomy.json`` holds the top-level categories (weight, brands) and their leaves (nouns with
synonyms, title words, SKU option and attribute vocabulary names, price level); ``data/vocab.json`` holds
the shared vocabularies (key spellings, values, locale prefixes) and the description text pools. Edit the
JSON to extend the catalog; this module only validates it and precomputes sampling tables.

:func:`category_nouns` gives the noun and its synonyms of a leaf category (for query paraphrases).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from shoparena.errors import DataError


def zipf_table(values: tuple[str, ...], s: float = 0.9, size: int = 128) -> tuple[str, ...]:
    """A sampling table: ``table[int(random() * len(table))]`` draws ``values[i]`` with weight ∝ 1/(i+1)^s."""
    if not values:
        return ()
    w = [1.0 / (i + 1) ** s for i in range(len(values))]
    total = sum(w)
    size = max(size, 4 * len(values))
    out: list[str] = []
    for v, wi in zip(values, w, strict=True):
        out.extend([v] * max(1, round(wi / total * size)))
    return tuple(out)


@dataclass(frozen=True)
class Vocab:
    """A SKU-option or attribute vocabulary: key spellings, values and optional locale prefixes."""

    name: str
    keys: tuple[str, ...]
    key_cum: tuple[float, ...]
    """Cumulative spelling weights normalised to 1 (a shop's style number in [0, 1) picks one)."""
    values: tuple[str, ...]
    table: tuple[str, ...]
    """Zipf-weighted sampling table over ``values``."""
    prefixes: tuple[str, ...] = ("",)
    prefix_cum: tuple[float, ...] = (1.0,)
    salt: int = 0
    """Stable per-vocabulary number (CRC-32 of kind and name): decorrelates a shop's spelling choices."""

    def key_for(self, u: float) -> str:
        for key, c in zip(self.keys, self.key_cum, strict=True):
            if u < c:
                return key
        return self.keys[-1]

    def prefix_for(self, u: float) -> str:
        for p, c in zip(self.prefixes, self.prefix_cum, strict=True):
            if u < c:
                return p
        return self.prefixes[-1]


@dataclass(frozen=True)
class Leaf:
    """A leaf category and everything needed to make products in it."""

    category: str
    """Full path joined by ``" > "``, top level first."""
    top: str
    nouns: tuple[str, ...]
    """Canonical noun first, then synonyms."""
    pre: tuple[str, ...]
    post: tuple[str, ...]
    specs: tuple[str, ...]
    sku: tuple[Vocab, ...]
    attrs: tuple[Vocab, ...]
    price_median: float
    price_sigma: float
    brands: tuple[str, ...]


@dataclass(frozen=True)
class TopLevel:
    name: str
    weight: float
    brands: tuple[str, ...]
    leaves: tuple[Leaf, ...]


@dataclass(frozen=True)
class Taxonomy:
    tops: tuple[TopLevel, ...]
    leaves: tuple[Leaf, ...]
    text: dict[str, tuple[str, ...]]
    """Description text pools: ``bullets``, ``sentences``, ``spec_extras``."""


def _cum(weights: dict[str, float], what: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
    if not weights or any(w <= 0 for w in weights.values()):
        raise DataError(f"synthetic vocabulary {what}: weights must be a non-empty map of positive numbers")
    total = float(sum(weights.values()))
    acc, cum = 0.0, []
    for w in weights.values():
        acc += w / total
        cum.append(acc)
    cum[-1] = 1.0
    return tuple(weights), tuple(cum)


def _vocab(kind: str, name: str, spec: dict[str, Any]) -> Vocab:
    keys, key_cum = _cum(spec["keys"], f"{name}.keys")
    values = tuple(spec["values"])
    if not values or any(v != v.lower() or not v.strip() for v in (*values, *keys)):
        raise DataError(f"synthetic vocabulary {name}: keys and values must be non-empty lowercase strings")
    if len(set(values)) != len(values):
        raise DataError(f"synthetic vocabulary {name}: duplicate values")
    prefixes, prefix_cum = _cum(spec.get("prefixes", {"": 1}), f"{name}.prefixes")
    salt = zlib.crc32(f"{kind}:{name}".encode())
    return Vocab(name, keys, key_cum, values, zipf_table(values), prefixes, prefix_cum, salt)


def _read(name: str) -> dict[str, Any]:
    return json.loads(resources.files("shoparena.catalog").joinpath("data", name).read_text(encoding="utf-8"))


@cache
def load_taxonomy() -> Taxonomy:
    """Parse and check the packaged taxonomy (cached)."""
    voc = _read("vocab.json")
    options = {n: _vocab("option", n, s) for n, s in voc["options"].items()}
    attributes = {n: _vocab("attribute", n, s) for n, s in voc["attributes"].items()}
    tops: list[TopLevel] = []
    for top, spec in _read("taxonomy.json")["top_levels"].items():
        brands = tuple(spec["brands"])
        leaves = []
        for lf in spec["leaves"]:
            where = f"{top} > {lf['path']}"
            try:
                sku = tuple(options[n] for n in lf["sku"])
                attrs = tuple(attributes[n] for n in lf["attrs"])
            except KeyError as e:
                raise DataError(f"synthetic leaf {where}: unknown vocabulary {e.args[0]!r}") from None
            if not lf["nouns"] or len(sku) > 3:
                raise DataError(f"synthetic leaf {where}: needs nouns and at most 3 SKU option vocabularies")
            median, sigma = lf["price"]
            leaves.append(Leaf(
                category=where, top=top, nouns=tuple(lf["nouns"]), pre=tuple(lf["pre"]), post=tuple(lf["post"]),
                specs=tuple(lf["specs"]), sku=sku, attrs=attrs, price_median=float(median),
                price_sigma=float(sigma), brands=tuple(lf.get("brands", brands)),
            ))
        tops.append(TopLevel(top, float(spec["weight"]), brands, tuple(leaves)))
    all_leaves = tuple(lf for t in tops for lf in t.leaves)
    if len({lf.category for lf in all_leaves}) != len(all_leaves):
        raise DataError("synthetic taxonomy: duplicate leaf category")
    text = {k: tuple(v) for k, v in voc["text"].items()}
    return Taxonomy(tuple(tops), all_leaves, text)


@cache
def _nouns_by_category() -> dict[str, tuple[str, ...]]:
    return {lf.category: lf.nouns for lf in load_taxonomy().leaves}


def category_nouns(category: str) -> tuple[str, ...]:
    """The noun and its synonyms (canonical first) of a synthetic leaf category, or ``()`` if unknown."""
    return _nouns_by_category().get(category, ())


def __getattr__(name: str) -> Any:
    if name == "CATEGORY_NOUNS":  # lazy: the JSON is read on first use, not on import
        return MappingProxyType(_nouns_by_category())
    raise AttributeError(name)
