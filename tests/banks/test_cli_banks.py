"""``shoparena arena banks build / verify / stats`` (the typer app in shoparena.cli.banks)."""

from __future__ import annotations

import json
from pathlib import Path

import typer.testing as typer_testing

import shoparena.cli.banks as banks_cli
from tests.banks import DATA


def _build(out: Path) -> typer_testing.Result:
    args = ["build", "--problems", str(DATA / "shoppingbench" / "*.jsonl"),
            "--static", str(DATA / "oro_suites" / "problem_suite_v1.json"),
            "--static", str(DATA / "oro_suites" / "problem_suite_v[23].json"),
            "--out", str(out), "--seed", "3", "--json"]
    return typer_testing.CliRunner().invoke(banks_cli.app, args)


def test_build_verify_stats_json(tmp_path: Path) -> None:
    result = _build(tmp_path / "b")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["problems"] == 990 and set(stats["static_suites"]) == {f"problem_suite_v{i}" for i in (1, 2, 3)}
    assert stats["clusters"]["problems"] == 990
    runner = typer_testing.CliRunner()
    verified = runner.invoke(banks_cli.app, ["verify", str(tmp_path / "b"), "--json"])
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.stdout)["ok"] is True
    again = runner.invoke(banks_cli.app, ["stats", str(tmp_path / "b"), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["sizes"] == stats["sizes"]
    table = runner.invoke(banks_cli.app, ["stats", str(tmp_path / "b")])
    assert table.exit_code == 0 and "held_out" in table.stdout


def test_verify_reports_tampering_with_exit_code_3(tmp_path: Path) -> None:
    assert _build(tmp_path / "b").exit_code == 0
    f = next((tmp_path / "b").glob("problems-*.jsonl"))
    f.write_bytes(f.read_bytes().replace(b"looking", b"LOOKING", 1))
    result = typer_testing.CliRunner().invoke(banks_cli.app, ["verify", str(tmp_path / "b"), "--json"])
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["violations"][0]["check"] == "integrity"


def test_pattern_matching_nothing_is_a_config_error(tmp_path: Path) -> None:
    result = typer_testing.CliRunner().invoke(
        banks_cli.app, ["build", "--problems", str(tmp_path / "*.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0 and "matches no file" in str(result.exception)
