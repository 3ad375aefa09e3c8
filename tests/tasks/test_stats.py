"""``problem_stats`` reproduces the statistics table of docs/shoppingbench.md §3.4 on the real test files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.tasks.loader import load_problems
from shoparena.tasks.stats import problem_stats
from shoparena.tasks.types import Problem


@pytest.fixture(scope="module")
def upstream(data_dir: Path) -> list[Problem]:
    out: list[Problem] = []
    for name in ("product", "shop", "voucher", "web_simpleqa"):
        out += load_problems(data_dir / "shoppingbench" / f"synthesize_{name}_test.jsonl")
    return out


@pytest.fixture(scope="module")
def stats(upstream: list[Problem]) -> dict:
    return problem_stats(upstream)


def test_counts_and_items_shoppingbench_3_4(stats: dict) -> None:
    assert stats["total"] == 900
    assert stats["counts"] == {"product": 250, "shop": 250, "voucher": 250, "knowledge": 150}
    assert stats["items"] == {"product": 250, "shop": 736, "voucher": 714, "knowledge": 150}
    assert stats["items_per_problem"] == {
        "product": {"1": 250},
        "shop": {"2": 89, "3": 86, "4": 75},
        "voucher": {"1": 22, "2": 70, "3": 80, "4": 78},
    }


def test_constraint_counts_shoppingbench_3_4(stats: dict) -> None:
    assert stats["constraints"]["product"] == {"price": 183, "attributes": 180, "sku_options": 119, "service": 92}
    assert stats["constraints"]["shop"] == {"price": 542, "attributes": 518, "sku_options": 364, "service": 254}
    assert stats["constraints"]["voucher"] == {"price": 0, "attributes": 501, "sku_options": 330, "service": 251}
    assert stats["price_modes"]["product"] == {"less than": 0, "greater than": 118, "between": 65}
    assert stats["price_modes"]["shop"] == {"less than": 0, "greater than": 353, "between": 189}
    assert sum(stats["price_modes"]["voucher"].values()) == 0


def test_voucher_breakdown_shoppingbench_3_4(stats: dict) -> None:
    v = stats["vouchers"]
    assert v["voucher_type"] == {"platform": 129, "shop": 121}
    assert v["discount_type"] == {"fixed": 113, "percentage": 137}
    assert v["items_by_type"]["platform"] == {"1": 22, "2": 40, "3": 41, "4": 26}
    assert set(v["items_by_type"]["shop"]) == {"2", "3", "4"}  # shop vouchers: 2–4 items from one shop
    assert v["budget_rule"] == {"holds": 250, "violated": 0}


def test_stats_json_serialisable_and_clusters(stats: dict) -> None:
    assert json.loads(json.dumps(stats)) == stats
    assert stats["clusters"] == 0 and stats["unclustered"] == 900
    assert stats["difficulty"] == {}
    assert stats["atomic"]["product"]["price"] == 183


def test_suite_difficulty_counts_shoppingbench_0(data_dir: Path) -> None:
    s = problem_stats(load_problems(data_dir / "oro_suites" / "problem_suite_v1.json"))
    assert s["counts"] == {"product": 10, "shop": 10, "voucher": 10}
    assert s["difficulty"]["shop"] == {"easy": 3, "hard": 4, "medium": 3}
    assert s["suites"] == {"problem_suite_v1": 30}
