"""The generic split verifier (tasks.guard), as the corpus split uses it: train / eval / never-touch."""

from __future__ import annotations

from shoparena.tasks.clusters import ClusterConfig, cluster_problems
from shoparena.tasks.guard import check_disjoint, prove
from shoparena.tasks.types import Problem, RewardItem
from tests.banks import synthetic_bank


def _split(problems: list[Problem], clusters: dict[str, str]) -> dict[str, str]:
    names = ("train", "eval", "never_touch")
    return {p.problem_id: names[int(clusters[p.problem_id][:8], 16) % 3] for p in problems}


def test_a_cluster_hash_split_is_proved() -> None:
    problems = synthetic_bank(50, seed=1)
    clusters = cluster_problems(problems)
    by_id = {p.problem_id: p for p in problems}
    assert prove(by_id, _split(problems, clusters), clusters, recluster=ClusterConfig()) == []


def test_a_shared_gt_product_and_a_split_cluster_are_caught() -> None:
    problems = synthetic_bank(50, seed=2)
    clusters = cluster_problems(problems)
    group_of = _split(problems, clusters)
    train = next(p for p in problems if group_of[p.problem_id] == "train")
    leak = Problem(problem_id="leak", bucket="product", query="unrelated words for the leaked problem",
                   reward=[RewardItem(product_id=train.gt_ids()[0], title=["x"])])
    by_id = {**{p.problem_id: p for p in problems}, "leak": leak}
    stale = {**clusters, "leak": "its-own-cluster"}
    checks = {v.check for v in prove(by_id, {**group_of, "leak": "eval"}, stale)}
    assert checks == {"disjoint_gt_product_id"}
    checks = {v.check for v in prove(by_id, {**group_of, "leak": "eval"}, stale, recluster=ClusterConfig())}
    assert {"cluster_ids", "whole_clusters", "disjoint_cluster_id", "disjoint_gt_product_id"} <= checks
    assert {v.check for v in prove(by_id, group_of, stale)} == {"one_partition"}


def test_check_disjoint_names_the_groups_and_examples() -> None:
    a, b = synthetic_bank(2, seed=3)[:2]
    twin = b.model_copy(update={"problem_id": "twin", "query": b.query.upper() + "!"})
    out = check_disjoint({"train": [a, b], "eval": [twin]}, {a.problem_id: "c1", b.problem_id: "c2", "twin": "c3"})
    details = {v.check: v.detail for v in out}
    assert set(details) == {"disjoint_gt_product_id", "disjoint_canonical_query"}
    assert "eval and train" in details["disjoint_canonical_query"]
