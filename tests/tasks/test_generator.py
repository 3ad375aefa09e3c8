"""The offline generator (docs/shoppingbench.md §3.7), its templates and the voucher recipe (§3.3, §3.4, §7.3)."""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from shoparena.catalog.types import Product
from shoparena.errors import ConfigError, DataError
from shoparena.tasks.catalog_view import CatalogView
from shoparena.tasks.checks import check_solvable, difficulty_of
from shoparena.tasks.constraints import (
    price_axis,
    service_axis,
    sku_attr_axis,
    voucher_discounted,
    within_budget,
)
from shoparena.tasks.generator import GenerationReport, GeneratorConfig, generate_problems, make_voucher
from shoparena.tasks.loader import dump_problems, load_problems
from shoparena.tasks.nouns import category_nouns_for
from shoparena.tasks.stats import budget_rule_holds
from shoparena.tasks.templates import (
    FRAMES,
    SERVICE_PHRASES,
    says_one_shop,
    strip_voucher_block,
    voucher_block,
)
from shoparena.tasks.types import Problem

SERVICE_WORDS = {"freeShipping": "free", "COD": "cash on delivery", "official": r"lazmall|official",
                 "flashsale": "flash"}


@pytest.fixture(scope="module")
def tiny_set(tiny_products: list[Product]) -> list[Problem]:
    return generate_problems(tiny_products, 300, seed=7)


@pytest.fixture(scope="module")
def web_set(web_products: list[Product]) -> list[Problem]:
    return generate_problems(web_products, 600, seed=3)


def _assert_gt_satisfies(problems: Sequence[Problem], products: Sequence[Product]) -> None:
    """Independent of the generator's own check: every axis fully hit, shop and budget rules hold."""
    by_id = {p.product_id: p for p in products}
    for prob in problems:
        gts = [by_id[r.product_id] for r in prob.reward]
        for item, gt in zip(prob.reward, gts, strict=True):
            assert item.title == [gt.title]
            for count in (price_axis(gt, item), service_axis(gt, item), sku_attr_axis(gt, item)):
                assert count.hits == count.total, (prob.query, item)
        if prob.bucket == "shop":
            assert len({g.shop_id for g in gts}) == 1
        if prob.bucket == "voucher":
            assert prob.voucher is not None
            assert within_budget([g.price for g in gts], [g.shop_id for g in gts], prob.voucher)
            assert budget_rule_holds(prob.voucher)


def test_gt_satisfies_constraints_tiny_shoppingbench_3_7(tiny_set: list[Problem], tiny_products) -> None:
    assert len(tiny_set) == 300
    assert {p.bucket for p in tiny_set} == {"product", "shop", "voucher"}
    _assert_gt_satisfies(tiny_set, tiny_products)


def test_gt_satisfies_constraints_web_shoppingbench_3_7(web_set: list[Problem], web_products) -> None:
    assert len(web_set) == 600
    _assert_gt_satisfies(web_set, web_products)
    lookup = {p.product_id: p for p in web_products}
    assert all(check_solvable(p, lookup) == [] for p in web_set)


def test_check_solvable_catches_a_broken_problem(tiny_set: list[Problem], tiny_products) -> None:
    lookup = {p.product_id: p for p in tiny_products}
    prob = next(p for p in tiny_set if p.bucket == "product")
    item = prob.reward[0].model_copy(update={"service": ["official", "COD", "flashsale", "freeShipping"],
                                             "price": [{"less than": [None, 0]}]})
    broken = prob.model_copy(update={"reward": [item]})
    violations = check_solvable(broken, lookup)
    assert any("price 0/1" in v for v in violations)
    assert any("service" in v for v in violations)


def test_same_seed_same_bytes(tmp_path: Path, tiny_products: list[Product], tiny_set: list[Problem]) -> None:
    again = generate_problems(tiny_products, 300, seed=7)
    assert again == tiny_set
    a = dump_problems(tiny_set, tmp_path / "a.jsonl").read_bytes()
    b = dump_problems(again, tmp_path / "b.jsonl").read_bytes()
    assert a == b
    assert load_problems(tmp_path / "a.jsonl") == tiny_set
    assert generate_problems(tiny_products, 300, seed=8) != tiny_set


def test_ids_queries_unique_and_metadata(web_set: list[Problem]) -> None:
    assert len({p.problem_id for p in web_set}) == len(web_set)
    assert len({p.query for p in web_set}) == len(web_set)
    for p in web_set:
        assert p.problem_id.startswith(f"synthetic:{p.bucket}:")
        assert p.suite == "synthetic"
        assert p.difficulty == difficulty_of(p.bucket, p.reward)
        assert p.variant in {"base", "paraphrase", "reorder", "substitution"}


def _signature(p: Problem) -> Counter:
    """Constraint multiset per item, ignoring order, GT id and title."""
    return Counter(
        (tuple(sorted(str(e) for e in r.price or [])), tuple(sorted(r.service or [])),
         tuple(sorted(r.sku_attr_pairs())))
        for r in p.reward
    )


def test_paraphrase_clusters_shoppingbench_3_7(web_set: list[Problem]) -> None:
    clusters: dict[str, list[Problem]] = defaultdict(list)
    for p in web_set:
        clusters[p.cluster_id].append(p)
    assert len(clusters) == 200
    for cid, members in clusters.items():
        base = members[0]
        assert base.variant == "base" and base.problem_id == cid
        assert len(members) == 3
        assert len({m.bucket for m in members}) == 1
        for m in members[1:]:
            assert m.variant != "base" and m.query != base.query
            assert _signature(m) == _signature(base)
            assert m.voucher == base.voucher
            if m.variant in ("paraphrase", "reorder"):
                assert sorted(m.gt_ids()) == sorted(base.gt_ids())
            if m.variant == "reorder":
                assert m.gt_ids() != base.gt_ids()
    assert all(m.variant == "reorder" for m in web_set if m.bucket == "shop" and m.variant != "base")


def test_cluster_uses_noun_synonyms(tiny_products: list[Product]) -> None:
    problems = generate_problems(tiny_products, 90, seed=1, buckets=("product",))
    by_cluster: dict[str, set[str]] = defaultdict(set)
    for p in problems:
        nouns = category_nouns_for(next(x for x in tiny_products if x.product_id == p.reward[0].product_id))
        used = [n for n in nouns if n in p.query.lower()]
        assert used, p.query
        by_cluster[p.cluster_id].add(used[0])
    assert sum(len(s) > 1 for s in by_cluster.values()) >= len(by_cluster) // 2


def test_query_mentions_every_constraint_never_title_shoppingbench_3_7(
    web_set: list[Problem], web_products: list[Product]
) -> None:
    titles = {p.product_id: p.title for p in web_products}
    for p in web_set:
        text = strip_voucher_block(p.query)
        low = text.lower()
        for item in p.reward:
            for _key, value in item.sku_attr_pairs():
                assert value in text, (value, text)
            for code in item.service or []:
                assert re.search(SERVICE_WORDS[code], low), (code, text)
            for entry in item.price or []:
                for bound in next(iter(entry.values())):
                    if bound is not None:
                        assert re.search(rf"\b{bound}\b", text), (bound, text)
            title = titles[item.product_id].lower()
            if len(title.split()) >= 3:
                assert title not in low
        if p.bucket == "shop":
            assert says_one_shop(text), text


def test_voucher_query_ends_with_upstream_block_shoppingbench_3_3(web_set: list[Problem]) -> None:
    vouchers = [p for p in web_set if p.bucket == "voucher"]
    assert vouchers
    for p in vouchers:
        assert p.voucher is not None
        assert p.query.endswith("\n\n" + voucher_block(p.voucher))
        assert "exceeds `" in p.query and p.query.count("`") == (6 if p.voucher.discount_type == "fixed" else 8)
        if p.voucher.discount_type == "percentage":
            assert f"`{round(p.voucher.discount * 100)}%`" in p.query


def test_voucher_block_byte_exact_on_upstream_shoppingbench_3_3(data_dir: Path) -> None:
    problems = load_problems(data_dir / "shoppingbench" / "synthesize_voucher_test.jsonl")
    for p in problems:
        assert p.voucher is not None
        assert p.query == strip_voucher_block(p.query) + "\n\n" + voucher_block(p.voucher)
    assert strip_voucher_block("no block here") == "no block here"


def test_frames_at_least_20_per_bucket() -> None:
    for bucket in ("product", "shop", "voucher"):
        frames = FRAMES[bucket]
        assert len(frames) >= 20 and len(set(frames)) == len(frames)
        assert all(f.count("{items}") == 1 for f in frames)
    assert all(re.search(r"\b(shop|store|seller)\b", f) for f in FRAMES["shop"])
    assert set(SERVICE_PHRASES) == {"official", "freeShipping", "COD", "flashsale"}


def test_voucher_recipe_shoppingbench_3_7_step4() -> None:
    rng = random.Random(0)
    cfg = GeneratorConfig()
    kinds = Counter()
    for _ in range(2000):
        prices = [round(rng.uniform(1, 3000), rng.choice((0, 2))) for _ in range(rng.randint(1, 4))]
        vtype = rng.choice(("platform", "shop"))
        v = make_voucher(prices, vtype, rng, cfg)
        total = float(sum(prices))
        kinds[v.discount_type] += 1
        assert v.voucher_type == vtype and isinstance(v.threshold, int) and isinstance(v.budget, int)
        assert max(1, int(0.10 * total)) <= v.threshold <= 0.90 * total
        if v.discount_type == "fixed":
            assert isinstance(v.face_value, int) and v.discount is None and v.cap is None
            assert 0.10 * v.threshold - 1 <= v.face_value <= 0.50 * v.threshold + 1
        else:
            assert v.face_value is None and 0.10 <= v.discount <= 0.50 and round(v.discount, 2) == v.discount
            assert math.ceil(v.threshold * v.discount) <= v.cap <= v.threshold
        assert v.price_after_voucher == voucher_discounted(total, v)
        assert budget_rule_holds(v)
        assert within_budget(prices, ["1"] * len(prices), v)
    assert kinds["fixed"] > 500 and kinds["percentage"] > 500


def test_voucher_not_applicable_when_total_below_threshold() -> None:
    v = make_voucher([0.5], "platform", random.Random(1), GeneratorConfig())
    assert v.threshold == 1 and v.price_after_voucher == 0.5 and v.budget == 1


def test_voucher_shares_and_item_counts(web_products: list[Product]) -> None:
    problems = generate_problems(web_products, 600, seed=11, buckets=("voucher",), paraphrases=0)
    types = Counter(p.voucher.voucher_type for p in problems)
    assert types["platform"] > 200 and types["shop"] > 150
    for p in problems:
        n = len(p.reward)
        if p.voucher.voucher_type == "shop":
            assert 2 <= n <= 4
        else:
            assert 1 <= n <= 4
    assert all(not r.price for p in problems for r in p.reward)


def test_constraint_rates_roughly_half(web_set: list[Problem]) -> None:
    items = [r for p in web_set if p.bucket == "product" and p.variant == "base" for r in p.reward]
    priced = sum(bool(r.price) for r in items) / len(items)
    assert 0.55 < priced < 0.9
    modes = Counter(next(iter(e)) for r in items for e in r.price or [])
    assert modes["greater than"] > modes["between"] > modes["less than"]


def test_skips_shop_bucket_without_multi_product_shop(tiny_products: list[Product], caplog) -> None:
    singles = [p.model_copy(update={"shop_id": str(9000 + i)}) for i, p in enumerate(tiny_products)]
    report = GenerationReport()
    problems = generate_problems(singles, 60, seed=0, report=report)
    assert len(problems) == 60
    assert "shop" in report.skipped_buckets and "shop" not in {p.bucket for p in problems}
    assert all(p.voucher.voucher_type == "platform" for p in problems if p.voucher)
    assert "no shop has 2 or more products" in caplog.text


def test_bad_arguments(tiny_products: list[Product]) -> None:
    with pytest.raises(DataError):
        generate_problems([], 10)
    with pytest.raises(ConfigError) as exc:
        generate_problems(tiny_products, 10, buckets=("prodcut",))
    assert "product" in (exc.value.hint or "")
    assert generate_problems(tiny_products, 0) == []
    only_shop = generate_problems(tiny_products, 12, buckets={"shop": 1.0}, paraphrases=3)
    assert len(only_shop) == 12 and {p.bucket for p in only_shop} == {"shop"}


def test_retailer_substitution(tiny_products: list[Product]) -> None:
    clones = [p.model_copy(update={"product_id": p.product_id + "7", "shop_id": "777", "title": p.title + " New"})
              for p in tiny_products]
    report = GenerationReport()
    cfg = GeneratorConfig(substitution_prob=1.0)
    problems = generate_problems(tiny_products + clones, 90, seed=2, buckets=("product",), config=cfg,
                                 report=report)
    subs = [p for p in problems if p.variant == "substitution"]
    assert subs and report.substitutions == len(subs)
    by_id = {p.problem_id: p for p in problems}
    everything = {p.product_id: p for p in tiny_products + clones}
    for s in subs:
        base = by_id[s.cluster_id]
        assert s.gt_ids() != base.gt_ids()
        assert everything[s.gt_ids()[0]].shop_id != everything[base.gt_ids()[0]].shop_id
        assert _signature(s) == _signature(base)
    _assert_gt_satisfies(problems, tiny_products + clones)


class LazyCatalog(Sequence[Product]):
    """A big catalog that builds a Product only when indexed, counting accesses."""

    def __init__(self, templates: list[Product], size: int) -> None:
        self.templates, self.size, self.reads = templates, size, 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        if not 0 <= i < self.size:
            raise IndexError(i)
        self.reads += 1
        t = self.templates[i % len(self.templates)]
        return t.model_copy(update={"product_id": str(10**9 + i), "shop_id": str(i // 7)})


def test_lazy_big_sequence_read_once(tiny_products: list[Product]) -> None:
    cat = LazyCatalog(tiny_products, 50_000)
    view = CatalogView.build(cat)
    assert cat.reads == 50_000 and len(view.multi_shops) > 7000
    cat.reads = 0
    problems = generate_problems(view, 120, seed=5)
    assert len(problems) == 120
    assert cat.reads < 120 * 60  # sampling touches a few products per cluster, never the whole catalog
    assert len({gid for p in problems if p.variant == "base" for gid in p.gt_ids()}) >= 40


def test_synthetic_catalog_if_available() -> None:
    synthetic = pytest.importorskip("shoparena.catalog.synthetic")
    products = list(synthetic.generate_catalog(400, 0))
    products = [getattr(p, "product", p) for p in products]
    problems = generate_problems(products, 150, seed=0)
    assert len(problems) == 150
    _assert_gt_satisfies(problems, products)


def test_bytes_independent_of_hash_seed(tmp_path: Path) -> None:
    """Same seed ⇒ same bytes in fresh processes with different PYTHONHASHSEED (no set-order dependence)."""
    import os
    import subprocess
    import sys

    script = (
        "import sys; sys.path.insert(0, 'tests');"
        "from conftest import TINY_CATALOG; from shoparena.catalog.types import Product;"
        "from shoparena.tasks.generator import generate_problems; from shoparena.tasks.loader import dump_problems;"
        "ps = generate_problems([Product.model_validate(p) for p in TINY_CATALOG], 60, seed=3);"
        "dump_problems(ps, sys.argv[1])"
    )
    root = Path(__file__).resolve().parents[2]
    outs = []
    for hash_seed in ("1", "4242"):
        out = tmp_path / f"{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", script, str(out)], cwd=root, env=env, check=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
