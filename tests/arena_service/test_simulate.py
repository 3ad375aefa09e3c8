"""``shoparena arena simulate`` end to end on a small subnet: the simulation and the main job."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoparena.arena.gate import check_submission
from shoparena.arena.population import agent_source, default_population
from shoparena.arena.simulate import SimulationConfig, simulate
from shoparena.store import open_store


def test_population_files_are_real_distinct_agents() -> None:
    pop = default_population(12, seed=0)
    assert {p.strategy for p in pop} == {"react", "oro7", "pipeline", "keyword", "answer_table"}
    honest = {p.name: agent_source(p, 1) for p in pop if p.strategy in ("react", "oro7", "pipeline")}
    for src in honest.values():
        ast.parse(src)
    for name, src in honest.items():  # teams write their own code: no honest file looks copied from another
        report = check_submission(src, released=[s for n, s in honest.items() if n != name])
        assert report.accepted, (name, report.violations)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("sim")
    return simulate(SimulationConfig(miners=6, validators=2, days=1, seed=0, catalog_size=800, problems=90,
                                     qualifying_problems=4, race_problems=4, sandbox="process", out=str(out)))


def test_a_simulated_day(result) -> None:
    # the gate keeps the answer-table cheat out; everyone else gets a version
    verdicts = {s["miner"]: s for s in result.submissions}
    cheat = next(p.name for p in default_population(6, 0) if p.strategy == "answer_table")
    assert verdicts[cheat]["status"] == "REJECTED" and "product_id" in verdicts[cheat]["violations"]
    assert sum(s["status"] == "ACCEPTED" for s in result.submissions) == 5
    # a race ran on the held-out bank and promoted a winner
    complete = [r for r in result.races if r["status"] == "RACE_COMPLETE"]
    assert complete and complete[0]["promoted"] and result.winners[0]["winner"]
    # weights: the burn on uid 0, the winner on top; emissions flowed to miners, validators and the owner
    vector = result.weights["vector"]
    assert vector["owner (uid 0, burn)"] == 65535 and vector[result.winners[0]["winner"]] > 0
    assert all(v["ok"] for v in result.weights["validators"].values())
    assert result.emissions["owner"] > 0 and result.emissions["by_participant"][result.winners[0]["winner"]] > 0
    # the firehose: every evaluation recorded, agentic and sub-task trajectories both present
    day = result.days[0]
    assert day.trajectories > 0 and day.by_axis.get("A", 0) > 0 and day.by_axis.get("B", 0) > 0
    assert result.trajectories["total"] == day.trajectories
    # the flaky validator's abandoned lease lapsed and its item went back to the queue
    assert any("abandoned" in e for e in result.events) and any("reaped" in e for e in result.events)


def test_records_are_intact_and_hidden_problems_stay_hidden(result) -> None:
    with open_store(result.store) as store:
        assert store.verify().ok
        validators = {r.validator_hotkey for r in store.rows() for r in [store.get(r.record_id)]}
        assert len(validators) == 2  # X = 2 distinct validators evaluated every item


def test_cli_simulate_json(tmp_path: Path) -> None:
    from shoparena.cli import app

    out = CliRunner().invoke(app, ["arena", "simulate", "--miners", "3", "--validators", "2", "--days", "1",
                                   "--qualifying-problems", "3", "--race-problems", "3", "--catalog-size", "800",
                                   "--problems", "90",
                                   "--sandbox", "process", "--out", str(tmp_path / "s"), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert {"races", "winners", "weights", "emissions", "trajectories", "days"} <= set(summary)
    assert summary["trajectories"]["per_day"][0] > 0
