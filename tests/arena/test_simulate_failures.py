"""An arena whose agents could not run is a failure, not a quiet empty day.

The real case: an arena whose working directory lies inside the package directory the sandbox binds, so
bubblewrap refuses every sandbox (it would expose the catalog to the agents) and no agent ever starts. The
simulation must stop after that day with one ``error:`` line naming the error and its count, a hint and exit 2,
and ``reproduce``'s guards must refuse to go on from such an arena or from an empty corpus. An arena whose agents
merely fail tasks, or crash on some, must still finish; so must one run from a copy of the package put on
``PYTHONPATH`` (the sandbox imports the copy the validator runs, tests/validator/test_sandbox_package_path.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shoparena
from shoparena.arena.simulate import (
    DayOutcomes,
    SimulationConfig,
    SimulationFailed,
    check_day,
    failure_kind,
    simulate,
    store_outcomes,
)
from shoparena.errors import DataError
from shoparena.evaluate.reproduce.pipeline import check_arena, check_corpus
from shoparena.store import open_store
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox

PACKAGE = Path(shoparena.__file__).resolve().parent
TINY = ["--miners", "2", "--validators", "1", "--catalog-size", "200", "--problems", "10",
        "--qualifying-problems", "2", "--race-problems", "2", "--seed", "0"]
IMPORT_ERROR = "ModuleNotFoundError: ModuleNotFoundError: No module named 'shoparena'"


_BWRAP = BubblewrapSandbox().unavailable()
needs_bwrap = pytest.mark.skipif(_BWRAP is not None, reason=f"bubblewrap unusable here: {_BWRAP}")


# ── the decision on recorded outcomes ─────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("status", "error", "kind", "infra"), [
    ("FAILED", IMPORT_ERROR, "ModuleNotFoundError", True),
    ("FAILED", "ImportError: cannot import name 'GatewayPolicy' from 'shoparena.sdk'", "ImportError", True),
    ("FAILED", "ModuleNotFoundError: No module named 'numpy'", "ModuleNotFoundError", False),  # the agent's own
    ("FAILED", "SandboxError: the sandbox did not start (it exited 1): bwrap: execvp python", "SandboxError", True),
    ("FAILED", "AgentError: the agent file defines no callable agent_main", "AgentError", False),
    ("FAILED", "BackendError: 3 of 3 inference calls failed in the model backend", "BackendError", False),
    ("TIMED_OUT", None, "Timeout", False),
    ("FAILED", None, "unknown", False),
])
def test_failure_kinds(status: str, error: str | None, kind: str, infra: bool) -> None:
    assert failure_kind(status, error) == (kind, infra)


def _day(day: int | None, *outcomes: tuple[str, str | None]) -> DayOutcomes:
    o = DayOutcomes(day=day)
    for status, error in outcomes:
        o.add(status, error)
    return o


def test_a_day_of_infrastructure_failures_stops_with_the_error_and_its_count() -> None:
    day = _day(1, *[("FAILED", IMPORT_ERROR)] * 5, ("FAILED", "SandboxError: the sandbox died"))
    with pytest.raises(SimulationFailed) as exc:
        check_day(day)
    err = exc.value
    assert err.exit_code == 2 and err.day == 1 and err.failures == {"ModuleNotFoundError": 5, "SandboxError": 1}
    assert err.message.startswith("day 1: all 6 episodes failed before their agents ran: 5 ModuleNotFoundError "
                                  "(No module named 'shoparena')")
    assert "also SandboxError 1" in err.message and "\n" not in err.message
    assert err.hint is not None and "pip install -e ." in err.hint
    # sandboxes that never reached the agent (no record) count as the infrastructure's too
    unstarted = DayOutcomes(day=2)
    unstarted.add_unstarted(3, "sandbox_unavailable: the sandbox failed on 3 of 3 problems")
    with pytest.raises(SimulationFailed) as exc:
        check_day(unstarted)
    assert exc.value.exit_code == 2 and "3 SandboxError" in exc.value.message and "bwrap" in str(exc.value.hint)


def test_agents_that_fail_some_episodes_or_tasks_do_not_stop_the_arena() -> None:
    # day 0: agents crashed or timed out on some problems, the infrastructure failed one; one trajectory is usable
    check_day(_day(0, ("SUCCESS", None), ("FAILED", "AgentError: boom"), ("TIMED_OUT", None),
                   ("FAILED", IMPORT_ERROR)))
    # a later day where every agent crashed on its own is the agents' business, not the arena's
    check_day(_day(3, *[("FAILED", "ValueError: bad plan")] * 4))
    # a later day with nothing to evaluate is quiet, not broken
    check_day(DayOutcomes(day=2))


def test_a_first_day_without_a_usable_trajectory_stops_whatever_the_reason() -> None:
    with pytest.raises(SimulationFailed) as exc:
        check_day(_day(0, *[("FAILED", "ValueError: bad plan")] * 3, ("TIMED_OUT", None)))
    assert exc.value.exit_code == 1
    assert exc.value.message == ("day 0: all 4 episodes failed and none left a usable trajectory: 3 ValueError "
                                 "(bad plan); also Timeout 1")
    with pytest.raises(SimulationFailed) as exc:
        check_day(_day(0, *[("FAILED", "BackendError: 2 of 2 inference calls failed")] * 2))
    assert exc.value.exit_code == 5 and "model backend" in str(exc.value.hint)
    with pytest.raises(SimulationFailed) as exc:
        check_day(DayOutcomes(day=0))
    assert "ran no episode" in exc.value.message


# ── the real sandbox ──────────────────────────────────────────────────────────────────────────────────────────


def _copy_run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``shoparena ARGS`` from a copy of the package (at ``root/pkg/shoparena``) put on PYTHONPATH."""
    copy = root / "pkg"
    if not copy.exists():
        shutil.copytree(PACKAGE, copy / "shoparena", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("SHOPARENA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "shoparena", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """An arena whose working directory (its catalog) lies inside the package directory bubblewrap binds."""
    root = tmp_path_factory.mktemp("refused")
    run_dir = root / "pkg" / "shoparena" / "run"
    done = _copy_run(root, "arena", "simulate", *TINY, "--days", "2", "--sandbox", "bubblewrap",
                     "--out", str(run_dir / "arena"))
    return done, run_dir


@needs_bwrap
def test_an_arena_whose_sandboxes_cannot_start_stops_after_its_first_day(refused) -> None:
    done, run_dir = refused
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert errors[0].startswith("error: day 0: all ") and "episodes failed before their agents ran" in errors[0]
    assert "SandboxError (" in errors[0] and "ConfigError: the sandbox would expose" in errors[0]
    assert "hint:" in done.stderr and "bwrap" in done.stderr and "Traceback" not in done.stderr
    assert "failed episodes: SandboxError" in done.stderr  # the day's counts, printed as it ends
    assert "day 1" not in done.stderr  # it stopped: no second day was simulated
    counted = re.search(r"all (\d+) episodes failed before their agents ran: (\d+) SandboxError", errors[0])
    assert counted and int(counted[1]) == int(counted[2]) > 0, errors[0]
    with open_store(f"sqlite:///{run_dir / 'arena' / 'subnet.db'}") as store:
        outcomes = store_outcomes(store)
    assert outcomes.episodes == 0  # no sandbox reached an agent: nothing scored, nothing recorded


@needs_bwrap
def test_reproduce_refuses_an_arena_or_a_corpus_without_episodes(refused) -> None:
    # episodes whose sandbox never started leave no record (never scored), so the guards see an arena that ran none
    _done, run_dir = refused
    with pytest.raises(SimulationFailed) as exc:
        check_arena(run_dir)
    assert exc.value.message.startswith("the arena ran no episode") and "nothing to train on" in exc.value.message
    assert "arena.json" in str(exc.value.hint)
    (run_dir / "corpus").mkdir(exist_ok=True)
    (run_dir / "corpus" / "manifest.json").write_text(json.dumps({"exports": {"sft_train": {"rows": 0}}}))
    with pytest.raises(DataError) as dexc:
        check_corpus(run_dir)
    assert dexc.value.message.startswith("the corpus step exported no SFT train row: ")
    assert "none of the arena's 0 usable trajectories" in dexc.value.message


@needs_bwrap
def test_an_arena_run_from_a_copy_of_the_package_on_pythonpath_works(tmp_path: Path) -> None:
    done = _copy_run(tmp_path, "arena", "simulate", *TINY, "--days", "1", "--sandbox", "bubblewrap",
                     "--out", str(tmp_path / "run" / "arena"))
    assert done.returncode == 0, done.stderr[-2000:]
    with open_store(f"sqlite:///{tmp_path / 'run' / 'arena' / 'subnet.db'}") as store:
        outcomes = store_outcomes(store)
    assert outcomes.episodes > 0 and outcomes.usable > 0 and not outcomes.infra, outcomes


# ── an arena that works ───────────────────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def working(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    run_dir = tmp_path_factory.mktemp("working")
    result = simulate(SimulationConfig(miners=2, validators=1, days=1, seed=0, catalog_size=200, problems=10,
                                       qualifying_problems=2, race_problems=2, sandbox="process",
                                       out=str(run_dir / "arena")))
    return result, run_dir


def test_an_arena_whose_agents_fail_tasks_finishes(working) -> None:
    result, run_dir = working
    day = result.days[0]
    assert day.episodes == day.trajectories > 0 and day.failures == {} and day.infra_failures == 0
    with open_store(result.store) as store:
        rows = list(store.rows())
    assert rows and any(not r.success for r in rows)  # agents failed tasks: the arena is working
    check_arena(run_dir)  # usable trajectories: reproduce goes on
    (run_dir / "corpus").mkdir(exist_ok=True)
    manifest = run_dir / "corpus" / "manifest.json"
    manifest.write_text(json.dumps({"exports": {"sft_train": {"rows": 3}}}))
    check_corpus(run_dir)
    manifest.write_text(json.dumps({"exports": {"sft_train": {"rows": 0}}}))
    with pytest.raises(DataError) as exc:  # nothing failed, the filter kept nothing
        check_corpus(run_dir)
    assert f"kept none of the arena's {day.episodes} usable trajectories" in exc.value.message


def test_the_summary_prints_failure_counts_per_day(working, capsys) -> None:
    from shoparena.cli.arena import render

    result, _ = working
    render(result)
    assert "episodes failed" not in capsys.readouterr().out  # none failed: nothing to say
    failing = result.days[0].model_copy(update={"failures": {"AgentError": 2, "ModuleNotFoundError": 1},
                                                "infra_failures": 1})
    render(result.model_copy(update={"days": [failing]}))
    out = " ".join(capsys.readouterr().out.split())
    assert (f"day 0: 3 of {failing.episodes} episodes failed: AgentError 2, ModuleNotFoundError 1; 1 the "
            "validator's infrastructure") in out
