"""Seeded synthetic catalog: upstream-schema products over the taxonomy of :mod:`shoparena.catalog.taxonomy`.

``generate_catalog(size, seed)`` streams products; the same arguments always give the same products (and,
through :func:`~shoparena.catalog.loader.write_documents`, the same bytes). How it is built:

* **Plan** (numpy, ~10 bytes per product): shop sizes are Zipf-like — about 78 % of products sit in shops of
  4 to ``0.8·√size`` products (P(k) ∝ k⁻², hundreds per shop at 1 M), the rest in shops of 1–3 — so at any
  scale ≥ 60 % of products are in shops with ≥ 4 products. Each shop sells in 1–3 top-level categories
  (a LazMall brand store, ``official``, in one). A shop's products are cut into *listing groups*: each further
  product is, with probability 0.15, a relist of the one before (same category, brand and attributes, often
  the same variants and title: the near-duplicates that make exact BM25 ties); the groups of all shops are
  shuffled into stream order.
* **Ids**: product ``i`` of the stream gets ``100000000 + (a·i + b) mod P`` (P prime ≈ 5.9e9): unique,
  9–10 digits, unsorted, no memory. Shop ids are made the same way (5–7 digits).
* **Long-tail filter**, exactly upstream's ``convert_products_to_documents.py``: one counter for SKU and
  attribute *keys*, one for *values*; a SKU pair counts once per variant, an attribute key once per product
  and each of its values once. A SKU pair is kept only if its key and its value both occur ≥ ``min_count``
  times; an attribute key must occur ≥ ``min_count`` times and keeps only its values that do (dropped when
  none remain). Emptied variants are removed and the rest renumbered ``"1".."n"``; variants that became
  identical are kept, as upstream keeps them. Counts are taken once, before filtering (also upstream), so a
  kept value can occur fewer than ``min_count`` times afterwards. Streaming: the SKU/attribute part of every
  product comes from its own random stream, so a first pass regenerates only that part to count, and the
  second pass regenerates it identically and adds titles, prices and texts from a second stream.
  ``min_count=1`` gives the unfiltered catalog (every product identical apart from the filter).
* **Cost**: memory is the plan (numpy, ~10 bytes per product), one small object per shop and the two
  counters, never the products: 1 M products take ~170 MB RSS and ~60 s to generate on one core (~100 s
  including ``write_documents`` to ``.jsonl.gz``, whose gzip level 9 is most of the rest).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from itertools import product as cartesian
from typing import Any

import numpy as np

from shoparena.catalog.loader import construct_product
from shoparena.catalog.taxonomy import CATEGORY_NOUNS as CATEGORY_NOUNS
from shoparena.catalog.taxonomy import Leaf, Taxonomy, Vocab, category_nouns, load_taxonomy
from shoparena.catalog.types import Product
from shoparena.errors import ConfigError

__all__ = ["CATEGORY_NOUNS", "DEFAULT_SIZE", "category_nouns", "default_min_count", "generate_catalog"]

DEFAULT_SIZE = 5000
UPSTREAM_MIN_COUNT = 20

_PID_BASE, _PID_P = 100_000_000, 5_899_999_979
_SID_BASE, _SID_P = 10_000, 5_998_987
_NUMS = tuple(str(i) for i in range(1, 10))
_RELIST = 0.15
_ACRONYMS = {w.lower(): w for w in (
    "USB-C USB LED TWS RGB UV PVC TPE PU EVA ABS BPA HB ICC 3D PD SPF LCD PFOA TSA ADHD AC Y2K DIY 21V OEM"
).split()}
_JUNK_KEYS = ("variation", "item", "options", "sort by", "services", "tag", "cover", "frame", "martin", "no.")
_HOSTS = ("https://ph-live.slatic.net/p/{h}.jpg", "https://filebroker-cdn.lazada.com.ph/kf/S{h}.jpg",
          "https://my-live-02.slatic.net/p/{h}.png", "https://sg-test-11.slatic.net/p/{h}.jpg")


def default_min_count(size: int) -> int:
    """Scale-aware long-tail threshold: upstream's 20 from 10,000 products up, ``size // 500`` below (at
    least 2), so small demo catalogs keep their attributes while one-off values still go."""
    return min(UPSTREAM_MIN_COUNT, max(2, size // 500))


def generate_catalog(size: int, seed: int = 0, *, min_count: int | None = None) -> Iterator[Product]:
    """Stream ``size`` synthetic products (module docstring); ``min_count`` defaults to
    :func:`default_min_count`, and ``1`` disables the long-tail filter."""
    if size < 0:
        raise ConfigError(f"catalog size must be >= 0 (got {size})")
    mc = default_min_count(size) if min_count is None else min_count
    if mc < 0:
        raise ConfigError(f"min_count must be >= 0 (got {mc})", hint="use 1 for no long-tail filter")
    return _generate(size, seed, mc)


# -- plan: shops, groups, ids ------------------------------------------------------------------------------

class _Shop:
    __slots__ = ("brand", "case", "host", "id", "leaves", "official", "pop", "price_f", "style")

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)


def _shop_sizes(size: int, rng: np.random.Generator) -> np.ndarray:
    def fill(target: int, ks: np.ndarray, p: np.ndarray) -> np.ndarray:
        if target <= 0:
            return np.zeros(0, dtype=np.int64)
        draws = rng.choice(ks, size=int(target / float(ks @ p) * 1.3) + 8, p=p)
        while draws.sum() < target:
            draws = np.concatenate([draws, rng.choice(ks, size=len(draws), p=p)])
        cs = np.cumsum(draws)
        n = int(np.searchsorted(cs, target)) + 1
        out = draws[:n].copy()
        out[-1] -= int(cs[n - 1]) - target
        return out

    kmax = int(min(1500, max(6, round(0.8 * math.sqrt(size)))))
    ks = np.arange(4, kmax + 1)
    big = fill(min(size, round(0.78 * size)), ks, ks**-2.0 / (ks**-2.0).sum())
    small = fill(size - int(big.sum()), np.array([1, 2, 3]), np.array([0.5, 0.3, 0.2]))
    sizes = np.concatenate([big, small])
    return sizes[rng.permutation(len(sizes))]


def _make_shops(sizes: np.ndarray, tax: Taxonomy, rng: random.Random) -> list[_Shop]:
    if len(sizes) >= _SID_P:
        raise ConfigError(f"too many shops ({len(sizes):,}) for the shop id space")
    tops = tax.tops
    top_w = [t.weight for t in tops]
    a, b = rng.randrange(1, _SID_P), rng.randrange(_SID_P)
    shops = []
    for s, n in enumerate(sizes.tolist()):
        official = rng.random() < (0.06 if n < 20 else 0.15)  # a brand's LazMall store: one top level
        ntop = 1
        if not official:
            ntop += (rng.random() < (0.35 if n < 30 else 0.6)) + (rng.random() < (0.1 if n < 30 else 0.3))
        chosen = list(dict.fromkeys(rng.choices(range(len(tops)), weights=top_w, k=ntop)))
        leaves: list[Leaf] = []
        for t in chosen:
            tl = tops[t].leaves
            k = min(len(tl), 1 + int(rng.random() * (2 + n // 40)))
            start = rng.randrange(len(tl))
            leaves.extend(tl[(start + j) % len(tl)] for j in range(k))
        r = rng.random()
        shops.append(_Shop(
            id=str(_SID_BASE + (a * s + b) % _SID_P), leaves=tuple(leaves), official=official,
            brand=rng.choice(tops[chosen[0]].brands) if official else "", style=rng.getrandbits(32),
            case="title" if r < 0.72 else ("lower" if r < 0.9 else "upper"), host=rng.choice(_HOSTS),
            price_f=math.exp(rng.gauss(0.0, 0.2)), pop=math.exp(rng.gauss(0.0, 0.7)),
        ))
    return shops


class _Plan:
    """Everything both passes share: shops and the stream order of listing groups."""

    def __init__(self, size: int, seed: int) -> None:
        self.tax = load_taxonomy()
        nrng = np.random.default_rng(random.Random(f"plan:{seed}").getrandbits(128))
        sizes = _shop_sizes(size, nrng)
        self.shops = _make_shops(sizes, self.tax, random.Random(f"shops:{seed}"))
        shop_of = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        starts = np.ones(size, dtype=bool)
        starts[1:] = (shop_of[1:] != shop_of[:-1]) | (nrng.random(size - 1) >= _RELIST)
        first = np.flatnonzero(starts)
        lens = np.diff(np.append(first, size)).astype(np.int32)
        order = nrng.permutation(len(first))
        self.group_shop = shop_of[first][order]
        self.group_len = lens[order]
        ids = random.Random(f"ids:{seed}")
        self.pid_a, self.pid_b = ids.randrange(1, _PID_P), ids.randrange(_PID_P)

    def product_id(self, i: int) -> str:
        return str(_PID_BASE + (self.pid_a * i + self.pid_b) % _PID_P)

    def groups(self) -> Iterator[tuple[_Shop, int]]:
        shops = self.shops
        for s, n in zip(self.group_shop.tolist(), self.group_len.tolist(), strict=True):
            yield shops[s], n


# -- core: the SKU/attribute part (own random stream; regenerated identically by both passes) -------------

_M32 = 0xFFFFFFFF
_N_VALUES = ((1, 2, 2, 3, 3, 4, 5, 6, 8, 9, 10), (1, 2, 2, 3, 3, 4, 5), (1, 2, 2, 3))
_Core = tuple[Leaf, str, list[dict[str, str]], dict[str, list[str]]]


def _style(shop: _Shop, v: Vocab) -> tuple[str, str]:
    """The key spelling and locale prefix this shop uses for vocabulary ``v`` (fixed per shop)."""
    x = ((shop.style ^ v.salt) * 0x9E3779B1) & _M32
    x ^= x >> 15
    x = (x * 0x85EBCA6B) & _M32
    x ^= x >> 13
    return v.key_for((x & 0xFFFF) / 65536.0), v.prefix_for((x >> 16) / 65536.0)


def _distinct(rnd: Any, table: tuple[str, ...], n: int) -> list[str]:
    out: list[str] = []
    size = len(table)
    for _ in range(3 * n):
        v = table[int(rnd() * size)]
        if v not in out:
            out.append(v)
            if len(out) == n:
                break
    return out


def _junk(rng: random.Random) -> str:
    """A seller-specific one-off string (the long tail the filter removes)."""
    return f"{rng.choice('abcdefghkmstxz')}{rng.randrange(100, 10_000)}-{rng.randrange(1000)}"


def _core_sku(rng: random.Random, shop: _Shop, leaf: Leaf) -> list[dict[str, str]]:
    rnd = rng.random
    opts = leaf.sku
    if not opts or rnd() < 0.27:
        return []
    r = rnd()
    k = min(len(opts), 1 if r < 0.55 else (2 if r < 0.9 else 3))
    axes: list[tuple[str, list[str]]] = []
    for v in opts[:k]:
        key, prefix = _style(shop, v)
        if any(key == a for a, _ in axes):
            continue
        choices = _N_VALUES[len(axes)]
        vals = _distinct(rnd, v.table, choices[int(rnd() * len(choices))])
        axes.append((key, [prefix + x for x in vals] if prefix else vals))
    if rnd() < 0.05:
        vals = axes[int(rnd() * len(axes))][1]
        vals[int(rnd() * len(vals))] = _junk(rng)
    keys = [a for a, _ in axes]
    sparse = rnd() < 0.25
    variants: list[dict[str, str]] = []
    for combo in cartesian(*(vals for _, vals in axes)):
        if sparse and rnd() < 0.3:
            continue
        variants.append(dict(zip(keys, combo, strict=True)))
        if len(variants) == 9:
            break
    if variants and rnd() < 0.03:
        jk, jv = f"{rng.choice(_JUNK_KEYS)} {rng.randrange(10_000)}", _junk(rng)
        for d in variants:
            d[jk] = jv
    return variants


def _core_attrs(rng: random.Random, shop: _Shop, leaf: Leaf, brand: str) -> dict[str, list[str]]:
    rnd = rng.random
    attrs: dict[str, list[str]] = {}
    for v in leaf.attrs:
        if rnd() < 0.55:
            key = _style(shop, v)[0]
            if key not in attrs:
                attrs[key] = _distinct(rnd, v.table, 2 if rnd() < 0.12 else 1)
    if brand and "brand" not in attrs and rnd() < 0.6:
        attrs["brand"] = [brand.lower()]
    if rnd() < 0.3:  # model codes: log-uniform numbers, so low ones recur and high ones are long tail
        attrs["model"] = [f"{leaf.nouns[0][:2].strip()}-{int(1000 ** rnd())}"]
    if rnd() < 0.03:
        attrs[f"{rng.choice(_JUNK_KEYS)} {rng.randrange(10_000)}"] = [_junk(rng)]
    return attrs


def _cores(plan: _Plan, seed: int) -> Iterator[tuple[_Shop, bool, _Core]]:
    """(shop, is_relist, core) for every product in stream order."""
    rng = random.Random(f"core:{seed}")
    rnd = rng.random
    for shop, n in plan.groups():
        leaves = shop.leaves
        leaf = leaves[int(len(leaves) * rnd() ** 1.5)]  # a shop's first leaves are its main ones
        if shop.official:
            brand = shop.brand
        else:
            brand = leaf.brands[int(rnd() * len(leaf.brands))] if rnd() < 0.42 else ""
        sku = _core_sku(rng, shop, leaf)
        core = (leaf, brand, sku, _core_attrs(rng, shop, leaf, brand))
        yield shop, False, core
        for _ in range(n - 1):
            if rnd() < 0.5:
                core = (leaf, brand, _core_sku(rng, shop, leaf), core[3])
            yield shop, True, core


# -- long-tail filter (upstream semantics, see module docstring) ------------------------------------------

def _count(cores: Iterator[tuple[_Shop, bool, _Core]]) -> tuple[dict[str, int], dict[str, int]]:
    kc: dict[str, int] = {}
    vc: dict[str, int] = {}
    kget, vget = kc.get, vc.get
    for _, _, (_, _, sku, attrs) in cores:
        for d in sku:
            for k, v in d.items():
                kc[k] = kget(k, 0) + 1
                vc[v] = vget(v, 0) + 1
        for k, vals in attrs.items():
            kc[k] = kget(k, 0) + 1
            for v in vals:
                vc[v] = vget(v, 0) + 1
    return kc, vc


def _filtered(
    sku: list[dict[str, str]], attrs: dict[str, list[str]], kc: dict[str, int] | None, vc: dict[str, int], mc: int
) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """Fresh SKU and attribute structures with the long tail dropped (``kc is None``: no filter)."""
    if kc is None:
        return {_NUMS[i]: dict(d) for i, d in enumerate(sku)}, {k: list(v) for k, v in attrs.items()}
    out_sku: dict[str, dict[str, str]] = {}
    for d in sku:
        kept = {k: v for k, v in d.items() if kc.get(k, 0) >= mc and vc.get(v, 0) >= mc}
        if kept:
            out_sku[_NUMS[len(out_sku)]] = kept
    out_attrs: dict[str, list[str]] = {}
    for k, vals in attrs.items():
        if kc.get(k, 0) >= mc:
            kept_vals = [v for v in vals if vc.get(v, 0) >= mc]
            if kept_vals:
                out_attrs[k] = kept_vals
    return out_sku, out_attrs


# -- aux: titles, prices, texts (second random stream) ---------------------------------------------------

_TC: dict[str, str] = {}
_NOUN_POS = (0, 0, 0, 0, 1, 1, 2, 3)
_PAD = ("Original", "New", "Sale")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_HYPE = ("hot sale", "ready stock", "new arrival", "2024 new", "COD", "best seller", "free shipping", "sale",
         "original", "high quality", "cheap", "on sale")


def _tc(phrase: str) -> str:
    """Title case for a lowercase vocabulary phrase (cached: the vocabulary is finite); a phrase that already
    has capitals (brand, model code, spec token) is kept as written."""
    c = _TC.get(phrase)
    if c is None:
        if not phrase.islower():
            return phrase
        c = " ".join(_ACRONYMS.get(t, t[:1].upper() + t[1:] if t.islower() else t) for t in phrase.split(" "))
        _TC[phrase] = c
    return c


def _title(rnd: Any, leaf: Leaf, brand: str, case: str, adjectives: tuple[str, ...]) -> str:
    parts: list[str] = []
    if brand and rnd() < 0.7:
        parts.append(brand)
    if rnd() < 0.3:  # a model code, as sellers put in titles: mostly unique
        parts.append(f"{_LETTERS[int(rnd() * 26)]}{_LETTERS[int(rnd() * 26)]}-{int(10 + rnd() * 9990)}")
    if rnd() < 0.5:
        parts.append(adjectives[int(rnd() * len(adjectives))])
    pre, post, nouns = leaf.pre, leaf.post, leaf.nouns
    s = int(rnd() * len(pre))
    parts.extend(pre[(s + j) % len(pre)] for j in range(min(len(pre), 1 + (rnd() < 0.7) + (rnd() < 0.35))))
    ni = _NOUN_POS[int(rnd() * len(_NOUN_POS))] % len(nouns)
    parts.append(nouns[ni])
    if rnd() < 0.3:
        parts.append(nouns[(ni + 1) % len(nouns)])
    if post:
        s = int(rnd() * len(post))
        parts.extend(post[(s + j) % len(post)] for j in range(min(len(post), (rnd() < 0.75) + (rnd() < 0.4))))
    if leaf.specs and rnd() < 0.5:
        parts.append(leaf.specs[int(rnd() * len(leaf.specs))])
    if rnd() < 0.2:
        parts.append(_HYPE[int(rnd() * len(_HYPE))])
    if case == "title":
        title = " ".join(_tc(p) for p in parts)
    else:
        title = " ".join(parts)
        title = title.upper() if case == "upper" else title[:1].upper() + title[1:]
    words = title.count(" ") + 1
    if words > 20:
        title = " ".join(title.split()[:20])
    elif words < 4:
        pad = " ".join(_PAD[: 4 - words])
        title = f"{title} {pad.upper() if case == 'upper' else pad}"
    return title


def _price(rnd: Any, gauss: Any, leaf: Leaf, shop: _Shop) -> float:
    x = max(1.0, leaf.price_median * shop.price_f * math.exp(leaf.price_sigma * gauss(0.0, 1.0)))
    r = rnd()
    if x < 100:
        v = round(x) if r < 0.55 else (round(x * 2) / 2 if r < 0.75 else (round(x) - 0.01 if r < 0.85 else x))
    elif x < 1000:
        v = round(x / 10) * 10 - 1 if r < 0.45 else (round(x / 5) * 5 if r < 0.75 else (round(x) if r < 0.92 else x))
    else:
        v = round(x / 100) * 100 - 1 if r < 0.45 else (round(x / 50) * 50 if r < 0.75 else round(x / 10) * 10)
    return max(1.0, round(float(v), 2))


def _services(rnd: Any, shop: _Shop) -> list[str]:
    out = []
    if shop.official and rnd() < 0.95:
        out.append("official")
    if rnd() < (0.6 if shop.official else 0.25):
        out.append("freeShipping")
    if rnd() < (0.4 if shop.official else 0.5):
        out.append("COD")
    if rnd() < 0.12:
        out.append("flashsale")
    return out


def _texts(rnd: Any, text: dict[str, tuple[str, ...]], noun: str, attrs: dict[str, list[str]]) -> tuple[str, str, str]:
    mat = next((vs[0] for k, vs in attrs.items() if "material" in k), "material")
    short = ""
    if rnd() < 0.5:
        b = text["bullets"]
        s = int(rnd() * len(b))
        short = ";".join(b[(s + 3 * j) % len(b)] for j in range(2 + (rnd() < 0.4))) + ";"
        short = short.replace("{noun}", noun).replace("{material}", mat)
    desc = ""
    if rnd() < 0.88:
        st = text["sentences"]
        s = int(rnd() * len(st))
        desc = f"{st[s]} {st[(s + 4) % len(st)]}".replace("{noun}", noun).replace("{Noun}", noun[:1].upper() + noun[1:])
        desc = desc[: max(0, 300 - len(short))]
    spec = [f"{k.replace('_', ' ')}:{vs[0]}" for k, vs in list(attrs.items())[:3]]
    if rnd() < 0.5:
        ex = text["spec_extras"]
        spec.append(ex[int(rnd() * len(ex))])
    return short, desc, ";".join(spec)


def _sold(rnd: Any, shop: _Shop) -> int:
    """Heavy-tailed: a discrete Pareto (alpha 0.9: median 1, ~12 % above 10, ~0.2 % above 1000) times the
    shop's popularity (log-normal, sigma 0.7)."""
    base = (1.0 - rnd()) ** (-1 / 0.9) - 1.0
    return min(int(base * shop.pop), 100_000)


def _generate(size: int, seed: int, mc: int) -> Iterator[Product]:
    if size == 0:
        return
    plan = _Plan(size, seed)
    kc, vc = _count(_cores(plan, seed)) if mc > 1 else (None, {})
    rng = random.Random(f"aux:{seed}")
    rnd, gauss, bits = rng.random, rng.gauss, rng.getrandbits
    text = plan.tax.text
    title = short = desc = spec = ""
    price = 0.0
    for i, (shop, relist, (leaf, brand, raw_sku, raw_attrs)) in enumerate(_cores(plan, seed)):
        if not relist or rnd() < 0.35:
            title = _title(rnd, leaf, brand, shop.case, text["adjectives"])
            short, desc, spec = _texts(rnd, text, leaf.nouns[0], raw_attrs)
        if not relist or rnd() < 0.5:
            price = _price(rnd, gauss, leaf, shop)
        sku, attrs = _filtered(raw_sku, raw_attrs, kc, vc, mc)
        pid = plan.product_id(i)
        yield construct_product({
            "product_id": pid, "shop_id": shop.id, "brand": brand, "category": leaf.category, "title": title,
            "short_description": short, "description": desc, "specification": spec, "price": price,
            "sold_count": _sold(rnd, shop), "sku_options": sku, "attributes": attrs,
            "main_image_url": shop.host.format(h=f"{bits(128):032x}"),
            "product_url": f"https://www.lazada.com.ph/products/-i{pid}.html", "service": _services(rnd, shop),
        })
