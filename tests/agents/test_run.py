"""Running single-file agents through the logging gateway (``shoparena run``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoparena.agents import agent_path, load_agent
from shoparena.errors import ConfigError, NotFoundError
from shoparena.validator.run import RunConfig, run_agents
from tests.worlds import small_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    return small_world(tmp_path_factory.mktemp("world"), size=600, catalog_seed=11, n=6,
                       problem_seed=3)


def _read(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_react_is_agentic_and_pipeline_is_subtask(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    react = run_agents(catalog, problems, RunConfig(agent="react", model="policy:expert", concurrency=2),
                       tmp_path / "react")
    pipeline = run_agents(catalog, problems, RunConfig(agent="pipeline", model="policy:expert", concurrency=2),
                          tmp_path / "pipe")
    for summary, out in ((react, tmp_path / "react"), (pipeline, tmp_path / "pipe")):
        assert summary.statuses == {"SUCCESS": len(problems)}
        rollouts = _read(out / "rollouts.jsonl")
        assert len(rollouts) == len(problems)
        assert all(steps[-1]["completion"]["message"]["tool_call"][-1]["name"] == "terminate" for steps in rollouts)
        assert {s["extra_info"]["problem_id"] for steps in rollouts for s in steps} == {p.problem_id for p in problems}
    react_calls = [c for c in _read(tmp_path / "react" / "calls.jsonl") if c["kind"] == "search"]
    pipe_calls = [c for c in _read(tmp_path / "pipe" / "calls.jsonl") if c["kind"] == "search"]
    assert react_calls and {c["axis"] for c in react_calls} == {"A"}  # the LLM emitted every tool call
    assert pipe_calls and {c["axis"] for c in pipe_calls} == {"B"}  # Python issued every tool call
    assert react.calls["search_axis_A"] == len(react_calls) and pipeline.calls.get("search_axis_A", 0) == 0
    assert all(c["status"] == 200 for c in react_calls + pipe_calls)
    assert 0.0 <= react.asr <= 1.0 and set(react.asr_by_bucket) <= {"product", "shop", "voucher"}


def test_samples_give_pass_at_k_and_failures_are_recorded(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    bad = tmp_path / "bad_agent.py"
    bad.write_text("def agent_main(problem_data):\n    raise RuntimeError('boom ' + problem_data['query'][:5])\n")
    summary = run_agents(catalog, problems[:3], RunConfig(agent=str(bad), n_samples=2, concurrency=2),
                         tmp_path / "bad")
    assert summary.statuses == {"FAILED": 6} and summary.asr == 0.0
    runs = _read(tmp_path / "bad" / "runs.jsonl")
    assert all(r["error"]["type"] == "RuntimeError" and "boom" in r["error"]["message"] for r in runs)
    assert set(summary.pass_at_k) == {"pass@1", "pass@2"}
    slow = tmp_path / "slow_agent.py"
    slow.write_text("import time\ndef agent_main(problem_data):\n    time.sleep(60)\n    return []\n")
    timed = run_agents(catalog, problems[:2], RunConfig(agent=str(slow), timeout_s=1.0, concurrency=2),
                       tmp_path / "slow")
    assert timed.statuses == {"TIMED_OUT": 2}


def test_agent_resolution_and_loading_errors(tmp_path: Path) -> None:
    assert agent_path("react").name == "react.py"
    with pytest.raises(NotFoundError, match="did you mean react"):
        agent_path("reactt")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="agent_main"):
        load_agent(empty)
    assert callable(load_agent(agent_path("pipeline")).agent_main)


def test_cli_run_json(world, tmp_path: Path) -> None:
    from shoparena.cli import app

    catalog, _, problems_file = world
    result = CliRunner().invoke(app, ["run", "--catalog", str(catalog), "--problems", str(problems_file),
                                      "--agent", "oro7", "--model", "policy:careful", "-n", "2", "--seed", "1",
                                      "--limit", "3", "--out", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert {"asr", "asr_by_bucket", "pass_at_k", "n_problems", "n_samples"} <= set(summary)
    assert summary["n_problems"] == 3 and summary["n_samples"] == 2
    assert (tmp_path / "o" / "rollouts.jsonl").exists() and (tmp_path / "o" / "calls.jsonl").exists()
    scored = CliRunner().invoke(app, ["score", "--catalog", str(catalog), "--problems", str(problems_file),
                                      "--rollouts", str(tmp_path / "o" / "rollouts.jsonl"), "--mode", "strict",
                                      "--json"])
    assert scored.exit_code == 0, scored.output
