"""Aggregation (docs/shoppingbench.md §7.4, §7.5): denominators per mode, buckets, Knowledge apart, samples."""

from __future__ import annotations

from typing import Any

import pytest

from shoparena.errors import ConfigError
from shoparena.scoring.aggregate import aggregate
from shoparena.scoring.types import FIELDS, Mode, ProblemScore


def ps(pid: str, bucket: str, success: bool, *, mode: Mode = "upstream", matched: bool = True,
       **kw: Any) -> ProblemScore:
    base: dict[str, Any] = {"gt": 1.0 if success else 0.0, "rule": 1.0 if success else 0.0,
                            "format": 1.0, "product": 1.0}
    if bucket == "shop":
        base["shop"] = 1.0 if success else 0.0
    if bucket == "voucher":
        base["budget"] = 1.0 if success else 0.0
    if not matched:
        base = {"gt": 0.0, "rule": 0.0, "format": 0.0, "product": 0.0}
    base.update(kw)
    return ProblemScore(problem_id=pid, bucket=bucket, mode=mode, similarity="lexical", matched=matched,
                        success=success and matched, **base)


def run(mode: Mode) -> list[ProblemScore]:
    return [
        ps("p1", "product", True, mode=mode),
        ps("p2", "product", False, mode=mode, rule=0.5, format=0.5),
        ps("s1", "shop", True, mode=mode),
        ps("v1", "voucher", False, mode=mode, matched=False),
        ps("k1", "knowledge", True, mode=mode, kw=1.0),
    ]


def test_upstream_denominator_is_scored_problems_shoppingbench_7_5() -> None:
    r = aggregate(run("upstream"), mode="upstream", n_resamples=0)
    assert (r.total_problems, r.scored_problems) == (3, 3)
    assert r.asr == pytest.approx(2 / 3) and r.success_rate == r.asr
    assert r.rule_mean == pytest.approx(2.5 / 3) and r.field_matching == r.rule_mean
    assert r.format_mean == pytest.approx(2.5 / 3) and r.format_score == r.format_mean
    assert r.gt_rate == pytest.approx(2 / 3) and r.ground_truth_rate == r.gt_rate
    assert r.asr_by_bucket == {"product": 0.5, "shop": 1.0, "voucher": 0.0}
    assert r.by_bucket["voucher"].total_problems == 0


def test_strict_denominator_is_full_suite_shoppingbench_7_5() -> None:
    r = aggregate(run("strict"), mode="strict", n_resamples=0)
    assert (r.total_problems, r.scored_problems, r.successful_problems) == (4, 3, 2)
    assert r.asr == 0.5 and r.rule_mean == pytest.approx(2.5 / 4)
    assert r.asr_by_bucket == {"product": 0.5, "shop": 1.0, "voucher": 0.0}
    sized = aggregate(run("strict"), mode="strict", suite_size=10, n_resamples=0)
    assert sized.total_problems == 10 and sized.asr == 0.2
    per_bucket = aggregate(run("strict"), mode="strict", suite_size={"product": 4, "shop": 1, "voucher": 5},
                           n_resamples=0)
    assert per_bucket.total_problems == 10
    assert per_bucket.asr_by_bucket == {"product": 0.25, "shop": 1.0, "voucher": 0.0}


def test_knowledge_kept_out_of_asr_shoppingbench_7_7() -> None:
    r = aggregate(run("upstream"), mode="upstream", n_resamples=0)
    assert "knowledge" not in r.asr_by_bucket
    assert r.knowledge is not None and r.knowledge.asr == 1.0 and r.knowledge.kw_rate == 1.0
    assert r.knowledge.total_problems == 1
    only_knowledge = aggregate([ps("k1", "knowledge", True)], mode="upstream", n_resamples=0)
    assert only_knowledge.total_problems == 0 and only_knowledge.asr == 0.0


def test_shop_and_budget_rates_per_bucket_shoppingbench_7_5() -> None:
    scores = [ps("s1", "shop", True), ps("s2", "shop", False, shop=1.0), ps("v1", "voucher", False, budget=1.0)]
    r = aggregate(scores, mode="upstream", n_resamples=0)
    assert r.shop_rate == 1.0 and r.budget_rate == 1.0
    assert r.by_bucket["shop"].asr == 0.5


def test_field_scores_and_micro_axis_rates_shoppingbench_7_5() -> None:
    a = ps("a", "product", True, fields={f: 1.0 for f in FIELDS},
           axis_hits={"title": 1, "price": 1, "service": 0, "sku & attrs": 2},
           axis_totals={"title": 1, "price": 1, "service": 0, "sku & attrs": 2})
    b = ps("b", "product", False, fields={"title": 0.0, "price": 1.0, "service": 0.5, "sku & attrs": 1.0},
           axis_hits={"title": 0, "price": 0, "service": 1, "sku & attrs": 3},
           axis_totals={"title": 1, "price": 0, "service": 2, "sku & attrs": 3})
    r = aggregate([a, b], mode="upstream", n_resamples=0)
    assert r.field_scores == {"title": 0.5, "price": 1.0, "service": 0.75, "sku & attrs": 1.0}
    assert r.axis_rates == {"title": 0.5, "price": 1.0, "service": 0.5, "sku & attrs": 1.0}


def test_strict_axis_rates_count_unmatched_totals_shoppingbench_7_5() -> None:
    a = ps("a", "product", True, mode="strict", axis_hits={"title": 1}, axis_totals={"title": 1})
    u = ps("u", "product", False, mode="strict", matched=False, axis_totals={"title": 3})
    assert aggregate([a, u], mode="strict", n_resamples=0).axis_rates["title"] == 0.25
    a_up = ps("a", "product", True, axis_hits={"title": 1}, axis_totals={"title": 1})
    u_up = ps("u", "product", False, matched=False, axis_totals={"title": 3})
    assert aggregate([a_up, u_up], mode="upstream", n_resamples=0).axis_rates["title"] == 1.0


def test_mixed_modes_rejected() -> None:
    with pytest.raises(ConfigError):
        aggregate([ps("a", "product", True, mode="strict")], mode="upstream")


def samples(pid: str, outcomes: list[bool], mode: Mode = "upstream") -> list[ProblemScore]:
    return [ps(pid, "product", ok, mode=mode, sample=i) for i, ok in enumerate(outcomes)]


def test_samples_give_pass_at_k_and_pass_hat_k() -> None:
    scores = samples("a", [True, False, True, False]) + samples("b", [False] * 4)
    r = aggregate(scores, mode="upstream", n_resamples=0)
    assert r.samples_per_problem == (4, 4)
    assert r.asr == 0.25 and r.pass_at_k["pass@1"] == 0.25
    assert r.pass_at_k["pass@2"] == pytest.approx((1 - 1 / 6) / 2)  # a: 1 − C(2,2)/C(4,2)
    assert r.pass_at_k["pass@4"] == 0.5
    assert r.pass_hat_k["pass^2"] == pytest.approx((1 / 6) / 2)  # a: C(2,2)/C(4,2)
    assert r.successful_problems == 0.5


def test_pass_at_k_fewer_samples_excluded_upstream_failures_strict() -> None:
    up = samples("a", [True, True]) + samples("c", [True])
    r = aggregate(up, mode="upstream", ks=[2], n_resamples=0)
    assert r.pass_at_k == {"pass@2": 1.0} and r.pass_hat_k == {"pass^2": 1.0}  # c has n < 2: left out
    st = samples("a", [True, True], "strict") + samples("c", [True], "strict")
    rs = aggregate(st, mode="strict", ks=[2], suite_size=4, n_resamples=0)
    # c padded with a failed sample: pass@2 = 1, pass^2 = 0; two unscored problems count 0
    assert rs.pass_at_k == {"pass@2": 0.5} and rs.pass_hat_k == {"pass^2": 0.25}


def test_bootstrap_intervals_seeded_shoppingbench_7_5() -> None:
    scores = [ps(f"p{i}", "product", i % 3 == 0) for i in range(12)]
    r1 = aggregate(scores, mode="upstream", seed=1)
    r2 = aggregate(scores, mode="upstream", seed=1)
    assert r1.ci == r2.ci and set(r1.ci) == {"asr", "pass@1"}
    lo, hi = r1.ci["asr"]
    assert lo <= r1.asr <= hi
