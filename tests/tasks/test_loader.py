"""Problem loaders on the real upstream files and ORO suites (docs/shoppingbench.md §0, §3.1–3.6) and on bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.tasks.loader import (
    ProblemLoadReport,
    derive_problem_id,
    dump_problems,
    dump_suite,
    index_problems,
    load_problems,
)
from shoparena.tasks.stats import budget_rule_holds
from shoparena.tasks.types import Problem

UPSTREAM = {"product": 250, "shop": 250, "voucher": 250, "web_simpleqa": 150}
DIFFICULTY = {  # per category, docs/shoppingbench.md §0
    1: {"easy": 3, "medium": 3, "hard": 4},
    2: {"medium": 4, "hard": 6},
    3: {"easy": 7, "medium": 3},
}


def _upstream(data_dir: Path, name: str) -> Path:
    return data_dir / "shoppingbench" / f"synthesize_{name}_test.jsonl"


def _suite(data_dir: Path, v: int) -> Path:
    return data_dir / "oro_suites" / f"problem_suite_v{v}.json"


@pytest.fixture(scope="module")
def upstream(data_dir: Path) -> dict[str, list[Problem]]:
    return {name: load_problems(_upstream(data_dir, name)) for name in UPSTREAM}


@pytest.fixture(scope="module")
def suites(data_dir: Path) -> dict[int, list[Problem]]:
    return {v: load_problems(_suite(data_dir, v)) for v in (1, 2, 3)}


def test_upstream_counts_and_buckets_shoppingbench_0(upstream: dict[str, list[Problem]]) -> None:
    for name, count in UPSTREAM.items():
        problems = upstream[name]
        assert len(problems) == count
        bucket = "knowledge" if name == "web_simpleqa" else name
        assert {p.bucket for p in problems} == {bucket}
        assert {p.suite for p in problems} == {f"synthesize_{name}_test"}


def test_hand_verified_fields_shoppingbench_3_2(upstream: dict[str, list[Problem]]) -> None:
    first = upstream["product"][0]
    assert first.gt_ids() == ["591486855"]
    assert first.reward[0].title == ["Arborea Hybrid ghost crash cymbals cymbal B20 cast bronze"]
    chili = upstream["product"][2].reward[0]
    assert chili.attributes == [{"packaging_type": ["bag"]}, {"pack_type": ["single"]}]
    assert chili.price == [{"greater than": [375, None]}]
    shop = upstream["shop"][0]
    assert [r.product_id for r in shop.reward][:2] == ["4098726003", "3971631378"]
    assert shop.reward[1].price == [{"between": [75, 95]}]
    assert shop.reward[2].service == ["freeShipping", "COD"]
    v = upstream["voucher"][0].voucher
    assert v is not None
    assert (v.voucher_type, v.threshold, v.discount_type, v.face_value, v.budget) == ("platform", 170, "fixed", 34, 425)
    assert v.price_after_voucher == 419.0 and v.discount is None and v.cap is None


def test_knowledge_attribute_coerced_spaces_kept_shoppingbench_3_5(upstream: dict[str, list[Problem]]) -> None:
    web = upstream["web_simpleqa"]
    assert web[0].knowledge_attribute == "Violin"
    assert web[0].knowledge_product is not None and web[0].gt_ids() == ["3706669986"]
    assert web[6].knowledge_attribute == "1989"  # a JSON integer upstream
    assert web[25].knowledge_attribute == "1977 "
    assert web[28].knowledge_attribute == " Kashmiri"
    assert all(isinstance(p.knowledge_attribute, str) for p in web)
    assert sum(p.knowledge_attribute.isdigit() for p in web if p.knowledge_attribute) >= 11


def test_problem_ids_derived_stable_unique(data_dir: Path, upstream: dict[str, list[Problem]]) -> None:
    again = load_problems(_upstream(data_dir, "shop"))
    assert [p.problem_id for p in again] == [p.problem_id for p in upstream["shop"]]
    p = again[0]
    assert p.problem_id == derive_problem_id("synthesize_shop_test", "shop", p.query)
    assert p.problem_id.startswith("synthesize_shop_test:shop:") and len(p.problem_id.split(":")[-1]) == 12
    for problems in upstream.values():
        assert len({x.problem_id for x in problems}) == len(problems)


def test_oro_suites_composition_shoppingbench_0(suites: dict[int, list[Problem]]) -> None:
    for v, problems in suites.items():
        assert len(problems) == 30
        for bucket in ("product", "shop", "voucher"):
            mine = [p for p in problems if p.bucket == bucket]
            assert len(mine) == 10
            counts = {d: sum(p.difficulty == d for p in mine) for d in ("easy", "medium", "hard")}
            assert {d: c for d, c in counts.items() if c} == DIFFICULTY[v]
            assert sorted(p.title for p in mine) == sorted(f"{bucket.capitalize()} {i}" for i in range(1, 11))
        assert all(p.suite == f"problem_suite_v{v}" for p in problems)
    ids = [p.problem_id for ps in suites.values() for p in ps]
    assert len(set(ids)) == 90
    queries = [{p.query for p in ps} for ps in suites.values()]
    assert not (queries[0] & queries[1] or queries[0] & queries[2] or queries[1] & queries[2])


def test_suite_problems_are_upstream_verbatim_shoppingbench_0(
    suites: dict[int, list[Problem]], upstream: dict[str, list[Problem]]
) -> None:
    by_query = {p.query: p for name in ("product", "shop", "voucher") for p in upstream[name]}
    for problems in suites.values():
        for p in problems:
            u = by_query[p.query]
            assert (p.bucket, p.reward, p.voucher) == (u.bucket, u.reward, u.voucher)
            assert p.to_upstream() == u.to_upstream()


def test_reward_title_embeddings_shoppingbench_3_6(suites: dict[int, list[Problem]]) -> None:
    assert all(p.reward_title_embeddings is None for p in suites[1])
    expected_titles = {2: 77, 3: 53}
    for v in (2, 3):
        titles: set[str] = set()
        for p in suites[v]:
            emb = p.reward_title_embeddings
            assert emb is not None
            assert set(emb) == {r.title[0] for r in p.reward}
            assert all(len(vec) == 1024 and all(isinstance(x, float) for x in vec) for vec in emb.values())
            titles.update(emb)
        assert len(titles) == expected_titles[v]


def test_public_view_strips_ground_truth_shoppingbench_9_17(suites: dict[int, list[Problem]]) -> None:
    for p in suites[2]:
        view = p.public_view()
        assert set(view) == {"problem_id", "bucket", "query"}
        text = json.dumps(view)
        # upstream queries sometimes quote a short GT title themselves; nothing beyond the query leaks
        assert all(title not in text or title in p.query for title in p.reward_title_embeddings or {})
        assert p.voucher is None or f'"budget": {p.voucher.budget}' not in text


def test_voucher_budget_rule_shoppingbench_3_4(upstream: dict[str, list[Problem]]) -> None:
    vouchers = [p.voucher for p in upstream["voucher"]]
    assert len(vouchers) == 250
    for v in vouchers:
        assert v is not None and budget_rule_holds(v)
        assert math.ceil(v.price_after_voucher) <= v.budget <= 1.109 * math.ceil(v.price_after_voucher)


def test_round_trip_our_jsonl(tmp_path: Path, upstream: dict[str, list[Problem]],
                              suites: dict[int, list[Problem]]) -> None:
    everything = [p for ps in upstream.values() for p in ps] + suites[2]
    out = dump_problems(everything, tmp_path / "all.jsonl")
    assert load_problems(out) == everything
    again = dump_problems(load_problems(out), tmp_path / "again.jsonl")
    assert again.read_bytes() == out.read_bytes()
    gz = dump_problems(everything[:50], tmp_path / "some.jsonl.gz")
    assert load_problems(gz) == everything[:50]


def test_round_trip_keeps_extra_keys(tmp_path: Path) -> None:
    p = Problem(problem_id="x:1", bucket="product", query="Show me cables.", suite="mine",
                reward=[{"product_id": "1", "title": ["Cable"]}], cluster_id="c1", difficulty="easy",
                variant="base")
    row = json.loads(dump_problems([p], tmp_path / "p.jsonl").read_text())
    assert list(row)[:2] == ["problem_id", "bucket"]
    assert row["reward"] == {"product_id": "1", "title": ["Cable"]}
    assert load_problems(tmp_path / "p.jsonl") == [p]


def test_dump_suite_round_trip_shoppingbench_3_6(tmp_path: Path, suites: dict[int, list[Problem]],
                                                  data_dir: Path) -> None:
    path = dump_suite(suites[2], tmp_path / "problem_suite_v2.json")
    assert load_problems(path) == suites[2]  # same stem ⇒ same derived ids
    rows = json.loads(path.read_text())
    original = json.loads(_suite(data_dir, 2).read_text())
    assert [r["category"] for r in rows] == [r["category"] for r in original]
    assert rows == original
    with pytest.raises(ConfigError):
        dump_suite([Problem(problem_id="k", bucket="knowledge", query="q")], tmp_path / "k.json")


def test_index_problems(upstream: dict[str, list[Problem]], suites: dict[int, list[Problem]]) -> None:
    merged = upstream["product"] + suites[1]
    by_id, by_query = index_problems(merged)
    assert len(by_id) == 280
    suite_p = next(p for p in suites[1] if p.bucket == "product")
    assert by_query[suite_p.query].suite == "synthesize_product_test"  # first one wins
    with pytest.raises(DataError):
        index_problems([merged[0], merged[0]])


def test_bad_lines_counted_not_fatal(tmp_path: Path, data_dir: Path) -> None:
    good = _upstream(data_dir, "product").read_text().splitlines()[:3]
    bad_mode = json.loads(good[0])
    bad_mode["reward"]["price"] = [{"about": [1, 2]}]
    lines = [
        good[0],
        "{not json",
        json.dumps({"reward": {"product_id": "1", "title": ["t"]}}),
        json.dumps(bad_mode),
        json.dumps([1, 2]),
        good[1],
        json.dumps({"query": "q", "reward": {"product_id": "1"}}),
        good[0],
        json.dumps({"query": "q2", "reward": {"product_id": "1", "title": ["t"]}, "colour": "x"}),
        "",
        good[2],
    ]
    path = tmp_path / "synthesize_product_test.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = ProblemLoadReport()
    problems = load_problems(path, report)
    assert len(problems) == 3 and report.loaded == 3
    assert report.bad_count == 7
    assert report.reasons == {"invalid JSON": 1, "missing query": 1, "unknown price mode": 1, "not an object": 1,
                              "schema": 1, "duplicate id": 1, "unknown key": 1}
    assert report.examples[0].startswith("line 2: invalid JSON")
    assert any(e.startswith("line 4: unknown price mode: reward.price: 'about'") for e in report.examples)
    assert any(e.startswith("line 7: schema: reward.title") for e in report.examples)
    assert any(e.startswith("line 8: duplicate id") and "line 1" in e for e in report.examples)
    assert "skipped 7 bad records" in report.summary()


def test_bucket_from_shape_and_mismatch(tmp_path: Path) -> None:
    rows = [
        {"query": "a", "reward": {"product_id": "1", "title": ["t"]}},
        {"query": "b", "reward": [{"product_id": "1", "title": ["t"]}, {"product_id": "2", "title": ["u"]}]},
        {"query": "c", "Knowledge_Attribute": 7, "reward": {"product_id": "1", "shop_id": "2", "title": "t",
                                                          "price": 1.0}},
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert [p.bucket for p in load_problems(path)] == ["product", "shop", "knowledge"]
    wrong = tmp_path / "synthesize_shop_test.jsonl"
    wrong.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "\n")
    report = ProblemLoadReport()
    assert [p.bucket for p in load_problems(wrong, report)] == ["shop"]
    assert report.reasons == {"bucket mismatch": 1}


def test_suite_item_errors_use_array_index(tmp_path: Path, data_dir: Path) -> None:
    items = json.loads(_suite(data_dir, 1).read_text())[:3]
    items[1]["category"] = "Gadget"
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(items))
    report = ProblemLoadReport()
    assert len(load_problems(path, report)) == 2
    assert report.examples == ["item 1: unknown bucket: category 'Gadget'; expected Product, Shop or Voucher"]


def test_unusable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        load_problems(tmp_path / "nope.jsonl")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\nworld\n")
    with pytest.raises(DataError) as exc:
        load_problems(junk)
    assert exc.value.hint and "line 1: invalid JSON" in exc.value.message
    broken = tmp_path / "broken.json"
    broken.write_text('[{"query": ')
    with pytest.raises(DataError):
        load_problems(broken)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert load_problems(empty) == []
