"""Scoring fixtures: a dict-backed product lookup over the 20-product catalog, problems built from the real
upstream/ORO files, and a trajectory builder (helpers live in ``_scoring_helpers.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shoparena.catalog.types import Product
from shoparena.tasks.types import Problem
from tests.scoring._scoring_helpers import DictLookup, recommend, step, terminate, upstream_problem

FILES = {"product": "synthesize_product_test.jsonl", "shop": "synthesize_shop_test.jsonl",
         "voucher": "synthesize_voucher_test.jsonl", "knowledge": "synthesize_web_simpleqa_test.jsonl"}


@pytest.fixture(scope="session")
def upstream_problems(data_dir: Path) -> dict[str, list[Problem]]:
    """Every upstream test problem per bucket, ids ``<bucket>-<row>``."""
    out: dict[str, list[Problem]] = {}
    for bucket, name in FILES.items():
        with open(data_dir / "shoppingbench" / name, encoding="utf-8") as fh:
            out[bucket] = [upstream_problem(json.loads(line), bucket, f"{bucket}-{i}")
                           for i, line in enumerate(fh)]
    return out


@pytest.fixture(scope="session")
def suite_v2(data_dir: Path) -> list[Problem]:
    """ORO suite v2 (with ``reward_title_embeddings``), ids ``v2-<n>``."""
    rows = json.loads((data_dir / "oro_suites" / "problem_suite_v2.json").read_text(encoding="utf-8"))
    return [upstream_problem(r, r["category"].lower(), f"v2-{i}") for i, r in enumerate(rows)]


@pytest.fixture()
def lookup(tiny_products: list[Product]) -> DictLookup:
    return DictLookup(tiny_products)


@pytest.fixture(scope="session")
def by_id(tiny_products: list[Product]) -> dict[str, Product]:
    return {p.product_id: p for p in tiny_products}


@pytest.fixture(scope="session")
def make_steps() -> Callable[..., list[dict[str, Any]]]:
    """``make_steps("a,b")``: a search step, a recommendation, a terminate."""

    def build(ids: Any, **kw: Any) -> list[dict[str, Any]]:
        search = step([{"name": "find_product", "parameters": {"q": "x", "page": 1}}], **kw)
        return [search, recommend(ids, **kw), terminate(**kw)]

    return build
