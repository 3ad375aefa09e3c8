"""The BM25 index: parity with a brute-force Lucene BM25 written here, tie-breaks, filters, persistence.

The reference below re-derives Lucene's ``BM25Similarity`` from its definition (docs/shoppingbench.md §1.3) without
importing :mod:`shoparena.catalog.bm25`: every float operation is done in double and rounded to float32, which
gives exactly Java's float result for +, −, ×, ÷.
"""

from __future__ import annotations

import json
import math
import struct
from collections import Counter

import numpy as np
import pytest

from shoparena.catalog.analysis import analyze
from shoparena.catalog.index import DocFilter, SearchIndex
from shoparena.catalog.types import Product, product_contents
from shoparena.errors import IndexFormatError, NotFoundError


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def small_float_norm(length: int) -> int:
    """Lucene SmallFloat.intToByte4 then byte4ToInt, from its definition."""
    if length < 24:
        return length
    v = length - 24
    bits = v.bit_length()
    if bits < 4:
        return 24 + v
    shift = bits - 4
    return 24 + (((v >> shift) & 0x7 | 0x8) << shift)


class ReferenceBM25:
    """Brute-force Lucene BM25 over analyzed documents (k1 = 0.9, b = 0.4 as float32, like Pyserini)."""

    def __init__(self, products: list[Product]) -> None:
        self.products = products
        self.docs = [Counter(analyze(product_contents(p))) for p in products]
        self.n = sum(1 for d in self.docs if d)
        self.avgdl = f32(sum(sum(d.values()) for d in self.docs) / self.n)
        self.df = Counter(t for d in self.docs for t in d)
        k1, b = f32(0.9), f32(0.4)
        self.norm_inv = [
            f32(1.0 / f32(k1 * f32(f32(1.0 - b) + f32(f32(b * f32(float(small_float_norm(sum(d.values())))))
                                                         / self.avgdl))))
            for d in self.docs
        ]

    def search(self, query: str, k: int = 50) -> list[tuple[str, float]]:
        qtf = Counter(analyze(query))
        scored = []
        for p, tf, norm_inv in zip(self.products, self.docs, self.norm_inv, strict=True):
            total = 0.0  # Lucene sums clause scores in double
            matched = False
            for term, boost in qtf.items():
                if tf[term]:
                    matched = True
                    idf = f32(math.log(1 + (self.n - self.df[term] + 0.5) / (self.df[term] + 0.5)))
                    w = f32(boost * idf)
                    total += f32(w - f32(w / f32(1.0 + f32(tf[term] * norm_inv))))
            if matched:
                scored.append((p.product_id, f32(total)))
        scored.sort(key=lambda item: (-item[1], item[0].encode()))
        return scored[:k]


@pytest.fixture(scope="module")
def sample_products(web_products: list[Product], tiny_products: list[Product]) -> list[Product]:
    seen: set[str] = set()
    out = []
    for p in [*web_products, *tiny_products]:
        if p.product_id not in seen:
            seen.add(p.product_id)
            out.append(p)
    return out


@pytest.fixture(scope="module")
def sample_index(sample_products: list[Product], tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.build(sample_products, tmp_path_factory.mktemp("idx") / "index")


def upstream_queries(data_dir) -> list[str]:
    out = []
    for name in ("product", "shop", "voucher", "web_simpleqa"):
        with open(data_dir / "shoppingbench" / f"synthesize_{name}_test.jsonl", encoding="utf-8") as fh:
            out.extend(json.loads(line)["query"] for line in fh)
    return out


def test_top50_ids_and_scores_equal_the_brute_force_lucene_reference(sample_index, sample_products, data_dir):
    queries = [*upstream_queries(data_dir), "violin bow", "men's shoes", "3.5mm", "cotton cotton cotton"]
    reference = ReferenceBM25(sample_products)
    compared = 0
    for query in queries:
        hits = sample_index.search(analyze(query), k=50)
        got = [(sample_index.product_id(int(d)), float(s)) for d, s in zip(hits.docs, hits.scores, strict=True)]
        want = reference.search(query)
        assert got == want, query
        compared += len(want)
    assert compared > 15000  # the comparison really covered many ranked hits


def test_score_ties_are_broken_by_product_id_string(tmp_path) -> None:
    # Anserini's BREAK_SCORE_TIES_BY_DOCID: equal scores are ordered by the id's bytes ("10" < "9").
    ids = ["9", "100", "10", "55"]
    products = [Product(product_id=i, shop_id="1", title="red mug", price=1.0) for i in ids]
    index = SearchIndex.build(products, tmp_path / "ix")
    hits = index.search(analyze("mug"))
    assert len(set(hits.scores.tolist())) == 1
    assert [index.product_id(int(d)) for d in hits.docs] == ["10", "100", "55", "9"]


def test_query_term_repetition_boosts_like_bag_of_words(sample_index) -> None:
    once = sample_index.search(analyze("violin"))
    twice = sample_index.search(analyze("violin violin"))
    assert twice.docs.tolist() == once.docs.tolist()
    assert np.allclose(twice.scores, 2 * once.scores, rtol=1e-6)


def test_filters_are_applied_inside_the_index(sample_index) -> None:
    terms = analyze("women jeans dress shoes")
    everything = sample_index.search(terms, k=10_000)
    cheap = sample_index.search(terms, k=10_000, flt=DocFilter(price_hi=300.0))
    assert 0 < len(cheap) < len(everything)
    assert all(sample_index.prices[d] <= 300.0 for d in cheap.docs)
    # the filtered ranking is the unfiltered ranking restricted to passing documents, order kept
    passing = [int(d) for d in everything.docs if sample_index.prices[d] <= 300.0]
    assert cheap.docs.tolist() == passing
    cod = 1 << 2  # SERVICE_CODES order: official, freeShipping, COD, flashsale
    with_cod = sample_index.search(terms, k=10_000, flt=DocFilter(services=cod))
    assert all(sample_index.services[d] & cod for d in with_cod.docs)
    shop = sample_index.shop_code("3242082")
    in_shop = sample_index.search(terms, k=10_000, flt=DocFilter(shop=shop))
    assert {sample_index.shop_id(int(sample_index.shop_codes[d])) for d in in_shop.docs} == {"3242082"}
    assert len(sample_index.search(terms, flt=DocFilter(shop=-1))) == 0


def test_capacity_reproduces_search_then_filter(sample_index) -> None:
    """Upstream filters only the first CAPACITY hits: a passing document ranked below them is never returned."""
    terms = analyze("set size black")
    ranked = sample_index.search(terms, k=10_000)
    assert len(ranked) > 20
    flt = DocFilter(price_lo=500.0)
    capped = sample_index.search(terms, k=50, flt=flt, capacity=10)
    expected = [int(d) for d in ranked.docs[:10] if sample_index.prices[d] >= 500.0]
    assert capped.docs.tolist() == expected
    uncapped = sample_index.search(terms, k=50, flt=flt)
    assert len(uncapped) > len(capped)


def test_reopen_is_memory_mapped_and_identical(sample_index, sample_products) -> None:
    reopened = SearchIndex.open(sample_index.path)
    assert not reopened.post_docs.flags.owndata and not reopened.post_docs.flags.writeable  # a mapping
    terms = analyze("bluetooth earbuds black")
    a, b = sample_index.search(terms), reopened.search(terms)
    assert a.docs.tolist() == b.docs.tolist() and a.scores.tolist() == b.scores.tolist()
    assert len(reopened) == len(sample_products)
    assert reopened.get("591486855").title.startswith("Arborea")
    assert reopened.get("missing") is None
    assert reopened[0] == sample_products[0]


def test_collection_statistics_count_only_documents_with_tokens(tmp_path) -> None:
    products = [
        Product(product_id="1", shop_id="1", title="the and of", price=1.0),  # stop words only: no tokens
        Product(product_id="2", shop_id="1", title="red mug", price=1.0),
        Product(product_id="3", shop_id="1", title="blue mug large", price=1.0),
    ]
    index = SearchIndex.build(products, tmp_path / "ix")
    assert index.meta["doc_count"] == 2
    assert index.meta["sum_total_term_freq"] == 5
    assert index.meta["avgdl"] == pytest.approx(2.5)


def test_rebuild_replaces_atomically_and_corruption_is_reported(tmp_path, tiny_products) -> None:
    path = tmp_path / "ix"
    SearchIndex.build(tiny_products[:5], path)
    index = SearchIndex.build(tiny_products, path)
    assert len(index) == len(tiny_products)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left behind
    (path / "post.x.npy").unlink()
    with pytest.raises(IndexFormatError, match="incomplete or corrupt"):
        SearchIndex.open(path)
    meta = json.loads((path / "meta.json").read_text())
    meta["format"] = "something-else/9"
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="rebuild"):
        SearchIndex.open(path)
    with pytest.raises(NotFoundError):
        SearchIndex.open(tmp_path / "nowhere")


def test_empty_and_unknown_queries(sample_index) -> None:
    assert len(sample_index.search([])) == 0
    assert len(sample_index.search(analyze("zzzqqq xyzzy"))) == 0
    assert len(sample_index.search(analyze("the of and"))) == 0


def test_maxscore_pruning_returns_exactly_the_exhaustive_ranking(tmp_path, monkeypatch) -> None:
    """MaxScore skips documents that cannot reach the top k, and shop filters score the shop's documents
    directly; on a synthetic catalog with very frequent and very rare terms, with and without filters and caps,
    both must agree with exhaustive evaluation exactly."""
    import random

    from shoparena.catalog import query as query_module
    from shoparena.catalog.synthetic import generate_catalog

    shop_path = []
    members = query_module._search_members
    monkeypatch.setattr(query_module, "_search_members", lambda *a, **k: shop_path.append(1) or members(*a, **k))

    products = list(generate_catalog(3000, seed=5))
    index = SearchIndex.build(products, tmp_path / "ix")
    rng = random.Random(0)
    filters = [None, DocFilter(price_hi=500.0), DocFilter(price_lo=100.0, price_hi=2000.0),
               DocFilter(services=1 << 2), DocFilter(shop=int(index.shop_codes[7]))]
    checked = 0
    for _ in range(150):
        words = rng.choice(products).title.split()
        query = " ".join(rng.sample(words, min(len(words), rng.randint(1, 5))))
        query += rng.choice(["", " black", " set", " white 2"])  # frequent terms next to rare ones
        for flt in filters:
            for capacity in (None, 10, 200):
                for k in (5, 50):
                    fast = index.search(analyze(query), k=k, flt=flt, capacity=capacity)
                    slow = index.search(analyze(query), k=k, flt=flt, capacity=capacity, prune=False)
                    assert fast.docs.tolist() == slow.docs.tolist(), (query, flt, capacity, k)
                    assert fast.scores.tolist() == slow.scores.tolist()
                    checked += len(slow)
    assert checked > 50_000
    assert len(shop_path) > 100  # the direct shop path really ran
