"""The synthetic catalog: determinism, schema, shops, the long-tail filter and realistic distributions."""

from __future__ import annotations

import inspect
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from shoparena.catalog.loader import iter_products, write_documents
from shoparena.catalog.synthetic import (
    CATEGORY_NOUNS,
    category_nouns,
    default_min_count,
    generate_catalog,
)
from shoparena.catalog.taxonomy import load_taxonomy
from shoparena.catalog.types import SERVICE_CODES, Product, product_contents
from shoparena.errors import ConfigError

N = 4000


@pytest.fixture(scope="module")
def catalog() -> list[Product]:
    return list(generate_catalog(N, seed=3))


def test_is_a_lazy_generator() -> None:
    gen = generate_catalog(1_000_000, seed=0)
    assert inspect.isgenerator(gen)
    gen.close()  # nothing was generated


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz", tmp_path / "c.jsonl.gz"
    assert write_documents(generate_catalog(1500, seed=7), a) == 1500
    write_documents(generate_catalog(1500, seed=7), b)
    write_documents(generate_catalog(1500, seed=8), c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert list(iter_products(a)) == list(generate_catalog(1500, seed=7))


def test_every_product_validates(catalog: list[Product]) -> None:
    for p in catalog:
        again = Product.model_validate(p.model_dump())
        assert again == p and again.model_dump() == p.model_dump()


def test_sizes_and_bad_arguments() -> None:
    assert list(generate_catalog(0)) == []
    assert len(list(generate_catalog(1))) == 1
    assert len(list(generate_catalog(37, seed=5))) == 37
    with pytest.raises(ConfigError):
        generate_catalog(-1)
    with pytest.raises(ConfigError):
        generate_catalog(10, min_count=-2)


def test_product_ids(catalog: list[Product]) -> None:
    ids = [p.product_id for p in catalog]
    assert len(set(ids)) == len(ids)
    assert all(i.isdigit() and 9 <= len(i) <= 10 and i[0] != "0" for i in ids)
    assert {len(i) for i in ids} == {9, 10}
    assert ids != sorted(ids) and ids != sorted(ids, key=int)
    assert all(p.product_url == f"https://www.lazada.com.ph/products/-i{p.product_id}.html" for p in catalog)


@pytest.mark.parametrize("size", [200, 1000, N])
def test_shops_are_multi_product_and_focused(size: int, catalog: list[Product]) -> None:
    products = catalog if size == N else list(generate_catalog(size, seed=11))
    per_shop = Counter(p.shop_id for p in products)
    assert all(s.isdigit() for s in per_shop)
    in_big = sum(n for n in per_shop.values() if n >= 4)
    assert in_big / size >= 0.6
    assert max(per_shop.values()) >= (10 if size >= 1000 else 5)
    tops: dict[str, set[str]] = defaultdict(set)
    for p in products:
        tops[p.shop_id].add(p.category.split(" > ")[0])
    assert max(len(t) for t in tops.values()) <= 3


def test_services(catalog: list[Product]) -> None:
    codes = Counter(s for p in catalog for s in p.service)
    assert set(codes) == set(SERVICE_CODES)
    assert codes.most_common(1)[0][0] == "COD"
    none = sum(not p.service for p in catalog) / N
    assert 0.2 <= none <= 0.4
    order = {c: i for i, c in enumerate(SERVICE_CODES)}
    assert all(p.service == sorted(p.service, key=order.__getitem__) for p in catalog)


def _upstream_counts(products: list[Product]) -> tuple[Counter[str], Counter[str]]:
    keys: Counter[str] = Counter()
    values: Counter[str] = Counter()
    for p in products:
        for opts in p.sku_options.values():
            keys.update(opts.keys())
            values.update(opts.values())
        for k, vals in p.attributes.items():
            keys[k] += 1
            values.update(vals)
    return keys, values


def _upstream_filter(p: Product, keys: Counter[str], values: Counter[str], t: int) -> tuple[dict, dict]:
    """A straight transcription of upstream filter_longtail_attrs()."""
    sku, index = {}, 1
    for kv in p.sku_options.values():
        new = {k: v for k, v in kv.items() if keys[k] >= t and values[v] >= t}
        if new:
            sku[str(index)] = new
            index += 1
    attrs = {}
    for k, vs in p.attributes.items():
        if keys[k] < t:
            continue
        kept = [v for v in vs if values[v] >= t]
        if kept:
            attrs[k] = kept
    return sku, attrs


def test_long_tail_filter_is_upstreams() -> None:
    raw = list(generate_catalog(3000, seed=2, min_count=1))
    keys, values = _upstream_counts(raw)
    assert min(values.values()) == 1  # the raw catalog has a long tail to cut
    t = 8
    filtered = list(generate_catalog(3000, seed=2, min_count=t))
    dropped = 0
    for r, f in zip(raw, filtered, strict=True):
        assert f.model_dump(exclude={"sku_options", "attributes"}) == r.model_dump(exclude={"sku_options", "attributes"})
        assert (f.sku_options, f.attributes) == _upstream_filter(r, keys, values, t)
        assert list(f.sku_options) == [str(i) for i in range(1, len(f.sku_options) + 1)]
        assert len(f.sku_options) <= 9 and all(f.sku_options.values()) and all(f.attributes.values())
        for opts in f.sku_options.values():
            assert all(keys[k] >= t and values[v] >= t for k, v in opts.items())
        for k, vals in f.attributes.items():
            assert keys[k] >= t and all(values[v] >= t for v in vals)
        dropped += (r.sku_options, r.attributes) != (f.sku_options, f.attributes)
    assert 0.05 < dropped / len(raw) < 0.8


def test_default_min_count() -> None:
    assert [default_min_count(n) for n in (10, 1000, 5000, 10_000, 2_500_000)] == [2, 2, 10, 20, 20]


def test_taxonomy_shape() -> None:
    tax = load_taxonomy()
    assert len(tax.tops) >= 15 and len(tax.leaves) >= 60
    for leaf in tax.leaves:
        assert 2 <= len(leaf.category.split(" > ")) <= 5
        assert leaf.nouns and leaf.price_median > 0
        assert category_nouns(leaf.category) == leaf.nouns
    assert category_nouns("Nope > Nothing") == ()
    assert CATEGORY_NOUNS["Men's Shoes > Sneakers"][:3] == ("sneakers", "running shoes", "trainers")


def test_titles_and_texts(catalog: list[Product]) -> None:
    words = [len(p.title.split()) for p in catalog]
    assert min(words) >= 4 and max(words) <= 20 and 6 <= statistics.mean(words) <= 14
    titles = Counter(p.title for p in catalog)
    assert len(titles) >= 0.7 * N  # mostly distinct ...
    assert titles.most_common(1)[0][1] >= 2  # ... with near-duplicate relists
    contents = Counter(product_contents(p) for p in catalog)
    assert sum(n for n in contents.values() if n > 1) >= 0.02 * N  # identical indexed text: exact BM25 ties
    assert any(p.title.isupper() for p in catalog) and any(p.title[1:].islower() for p in catalog)
    for p in catalog:
        low = p.title.lower()
        assert any(n in low for n in category_nouns(p.category)), p.title
        assert len(p.short_description) + len(p.description) <= 300
        assert p.specification == "" or re.fullmatch(r"[^;:]+:[^;]+(;[^;:]+:[^;]+)*", p.specification)
        assert p.main_image_url.startswith("https://") and "lazada" in p.product_url


def test_realistic_distributions(catalog: list[Product]) -> None:
    assert len({p.category for p in catalog}) >= 60
    assert len({p.category.split(" > ")[0] for p in catalog}) >= 15
    assert 0.35 <= sum(p.brand == "" for p in catalog) / N <= 0.65
    sold = sorted(p.sold_count for p in catalog)
    assert sold[N // 2] <= 10 and sold[-1] >= 1000 and sold[0] >= 0
    prices = sorted(p.price for p in catalog)
    assert prices[0] >= 1 and 100 <= prices[N // 2] <= 1000 and prices[-1] >= 2000
    assert sum(p.price == int(p.price) for p in catalog) / N > 0.6  # mostly whole pesos, some centavos
    n_variants = Counter(len(p.sku_options) for p in catalog)
    assert set(n_variants) == set(range(10))
    assert 0.15 <= n_variants[0] / N <= 0.45
    assert sum(1 for p in catalog if p.attributes) / N >= 0.6


def test_messy_upstream_vocabulary(catalog: list[Product]) -> None:
    keys = Counter(k for p in catalog for o in p.sku_options.values() for k in o)
    keys.update(k for p in catalog for k in p.attributes)
    assert {"color_family", "color family", "size", "shoe size", "clothing_material"} <= set(keys)
    values = {v for p in catalog for o in p.sku_options.values() for v in o.values()}
    assert any(v.startswith("eu:") for v in values) and any(v.startswith("int:") for v in values)
    assert all(len(vals) in (1, 2) for p in catalog for vals in p.attributes.values())
