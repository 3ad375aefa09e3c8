"""``shoparena submit --check PATH.py [--banks DIR] --json``: the interface the project's checks rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shoparena.cli.submit import submit
from tests.gate import BANK_DIRS, BUILTIN_AGENTS, DATA, SAMPLES

runner = CliRunner()


def _app() -> typer.Typer:
    """The real CLI when ``submit`` is wired into it, else a one-command app around the same function."""
    from shoparena.cli import app

    if any(c.name == "submit" for c in app.registered_commands):
        return app
    local = typer.Typer()
    local.command("submit")(submit)
    local.command("noop", hidden=True)(lambda: None)  # keep typer in multi-command mode
    return local


def invoke(*args: object, code: int = 0) -> str:
    result = runner.invoke(_app(), [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.stdout


def test_json_shape_for_an_accepted_file() -> None:
    out = json.loads(invoke("submit", "--check", BUILTIN_AGENTS / "pipeline.py", "--banks", BANK_DIRS[0],
                            "--banks", BANK_DIRS[1], "--json"))
    assert out == {"accepted": True, "violations": [], "cooldown": "none", "similarity": None, "similar_to": None}


def test_json_shape_for_a_rejected_file() -> None:
    out = json.loads(invoke("submit", "--check", SAMPLES / "leak_phrase.py", "--banks", DATA / "shoppingbench",
                            "--json"))
    assert out["accepted"] is False and out["cooldown"] == "full"
    assert [set(v) for v in out["violations"]] == [{"rule", "severity", "message", "line"}]
    assert out["violations"][0]["rule"] == "verbatim_phrase" and out["violations"][0]["line"] == 7


def test_without_banks_only_structural_checks_run() -> None:
    out = json.loads(invoke("submit", "--check", SAMPLES / "leak_phrase.py", "--json"))
    assert out["accepted"] is True


def test_banks_accept_files_and_skip_non_problem_files_in_directories(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "manifest.json").write_text('{"not": "a suite"}')
    (bank / "suite.json").write_bytes((DATA / "oro_suites" / "problem_suite_v1.json").read_bytes())
    agent = tmp_path / "agent.py"
    agent.write_text("PICK = '3350592664'\n\ndef agent_main(p):\n    return [PICK]\n")
    out = json.loads(invoke("submit", "--check", agent, "--banks", bank, "--json"))
    assert [v["rule"] for v in out["violations"]] == ["product_id"]
    out = json.loads(invoke("submit", "--check", agent, "--banks", bank / "suite.json", "--json"))
    assert out["cooldown"] == "full"


def test_released_agents_feed_the_similarity_check() -> None:
    out = json.loads(invoke("submit", "--check", BUILTIN_AGENTS / "oro7.py", "--released",
                            BUILTIN_AGENTS / "react.py", "--json"))
    assert out["similarity"] == 1.0 and out["similar_to"].endswith("react.py")
    assert [v["rule"] for v in out["violations"]] == ["copied_agent"]


def test_human_output_and_exit_code() -> None:
    out = invoke("submit", "--check", SAMPLES / "escape_agent.py")
    assert "rejected" in out and "banned_call" in out
    invoke("submit", "--check", SAMPLES / "escape_agent.py", "--exit-code", code=1)
    assert "accepted" in invoke("submit", "--check", BUILTIN_AGENTS / "react.py", "--exit-code")


@pytest.mark.parametrize("args", [("--no-check",), ()])
def test_errors(args: tuple[str, ...], tmp_path: Path) -> None:
    target = BUILTIN_AGENTS / "react.py" if args else tmp_path / "missing.py"
    result = runner.invoke(_app(), ["submit", *args, str(target)])
    assert result.exit_code != 0
