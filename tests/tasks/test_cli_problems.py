"""``shoparena problems stats`` / ``generate`` (thin faces over tasks.stats and tasks.generator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer.testing as typer_testing

import shoparena.cli.problems as problems_cli
from shoparena.tasks.loader import load_problems


def test_stats_json_shoppingbench_3_4(data_dir: Path) -> None:
    runner = typer_testing.CliRunner()
    path = data_dir / "shoppingbench" / "synthesize_shop_test.jsonl"
    result = runner.invoke(problems_cli.app, ["stats", str(path), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["counts"] == {"shop": 250}
    assert stats["items_per_problem"]["shop"] == {"2": 89, "3": 86, "4": 75}


def test_stats_table(data_dir: Path) -> None:
    runner = typer_testing.CliRunner()
    result = runner.invoke(problems_cli.app, ["stats", str(data_dir / "oro_suites" / "problem_suite_v3.json")])
    assert result.exit_code == 0, result.output
    assert "voucher" in result.stdout and "clusters" in result.stdout


def test_generate_from_catalog_dir(tmp_path: Path, tiny_products) -> None:
    loader = pytest.importorskip("shoparena.catalog.loader")
    catalog = tmp_path / "cat"
    catalog.mkdir()
    loader.write_documents(tiny_products, catalog / "documents.jsonl.gz")
    out = tmp_path / "problems.jsonl"
    runner = typer_testing.CliRunner()
    args = ["generate", "--catalog", str(catalog), "--n", "30", "--seed", "4", "--out", str(out)]
    result = runner.invoke(problems_cli.app, args)
    assert result.exit_code == 0, result.output
    problems = load_problems(out)
    assert len(problems) == 30 and len({p.cluster_id for p in problems}) == 10
    first = out.read_bytes()
    assert runner.invoke(problems_cli.app, args).exit_code == 0
    assert out.read_bytes() == first
