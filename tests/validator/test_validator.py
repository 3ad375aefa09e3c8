"""The validator loop: sandbox → rule score → judge → append-only records (docs/arena.md §6, §7.4, §15)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoparena.agents import agent_path
from shoparena.errors import ConfigError
from shoparena.store import open_store
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate
from shoparena.validator.judge.types import coefficient
from tests.worlds import small_world

BWRAP = shutil.which("bwrap")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    return small_world(tmp_path_factory.mktemp("val"), size=500, catalog_seed=21, n=6,
                       problem_seed=4)


def _spec(name: str = "react") -> AgentSpec:
    return AgentSpec(path=str(agent_path(name)), agent_id=name, miner_hotkey="5Fminer")


def test_evaluation_writes_one_record_per_problem_and_resumes(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, validator_hotkey="5Fval")
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        first = evaluate(_spec(), problems, catalog, store, config)
        assert first.status == "SUCCESS" and first.records_written == len(problems)
        assert first.total_problems == len(problems) and first.judge_inference_failed == 0
        records = list(store.query(eval_run_id=first.eval_run_id))
        assert len(records) == len(problems)
        for r in records:
            assert r.agent_id == "react" and r.miner_hotkey == "5Fminer" and r.validator_hotkey == "5Fval"
            assert r.call_log and r.axis == "A" and r.steps and r.messages
            assert r.pipeline.scorer_mode == "strict" and r.pipeline.judge == "rubric"
            assert r.judge is not None and r.judge["trace_sha256"] and r.coefficient == coefficient(r.judge_score)
        assert store.verify().ok
        # docs/arena.md §7.4: final = success_rate × coeff(q), q = mean judge score over judged problems
        q = sum(r.judge_score for r in records) / len(records)
        assert first.reasoning_quality == pytest.approx(q, abs=1e-4)
        assert first.final_score == pytest.approx(round(first.success_rate * coefficient(q), 4))
        again = evaluate(_spec(), problems, catalog, store, config)  # same agent, problems, pipeline: resume
        assert again.eval_run_id == first.eval_run_id
        assert again.records_written == 0 and again.records_skipped == len(problems)
        assert again.success_rate == first.success_rate and again.final_score == first.final_score
        assert store.count() == len(problems)


def test_pipeline_agent_is_recorded_as_axis_b(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True)
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        evaluate(_spec("pipeline"), problems[:3], catalog, store, config)
        assert {r.axis for r in store.query()} == {"B"}


def test_judge_failure_is_never_a_score(world, tmp_path: Path) -> None:
    """An LLM judge that cannot answer the rubric (an offline shopping policy) fails every verdict: the run is
    FAILED for retry and no problem gets a record with a made-up score (docs/arena.md §7.5)."""
    catalog, problems, _ = world
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, judge="llm:policy:novice")
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        summary = evaluate(_spec(), problems[:3], catalog, store, config)
        assert summary.status == "FAILED" and "judge failed" in (summary.failure_reason or "")
        assert summary.reasoning_quality is None and summary.final_score is None
        assert summary.judge_inference_failed == 3 and store.count() == 0


def test_a_small_run_whose_every_verdict_failed_is_failed_for_retry(world, tmp_path: Path) -> None:
    """Two judged problems, both verdicts failed: below the health rule's three calls, yet no verdict is left to
    weigh the run by, so it is FAILED for retry, never a score (docs/arena.md §7.5), and no record is written."""
    catalog, problems, _ = world
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, judge="llm:policy:novice")
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        summary = evaluate(_spec(), problems[:2], catalog, store, config)
        assert summary.judge_inference_total == summary.judge_inference_failed == 2
        assert summary.status == "FAILED" and "no judge verdict" in (summary.failure_reason or "")
        assert summary.final_score is None and store.count() == 0
        # a rule failure whose verdict failed: 0 whatever q is, but the judge failed, so it is retried all the same
        # (a record would be missing from the corpus otherwise)
        lone = evaluate(_spec(), problems[1:2], catalog, store, config)
        assert lone.success_rate == 0.0 and lone.judge_inference_failed == 1
        assert lone.status == "FAILED" and lone.final_score is None and store.count() == 0


def test_an_agent_that_fails_everything_scores_zero_and_the_arena_takes_it(world, tmp_path: Path) -> None:
    """Nothing reaches the judge when every problem fails (docs/arena.md §7.1 judges SUCCESS envelopes only): q is
    unknown, but success_rate · coeff is 0 for every coefficient, so the run completes with 0.0, and the arena's
    complete accepts it (it refuses a SUCCESS without a score in [0, 1], which crashed an 8-day simulation)."""
    from shoparena.arena.state.types import CompleteRequest
    from shoparena.clock import ManualClock
    from tests.arena_service import GOOD, T0, make_arena
    from tests.arena_service import config as arena_config

    catalog, problems, _ = world
    broken = tmp_path / "broken.py"
    broken.write_text("def agent_main(problem_data):\n    raise RuntimeError('no shopping today')\n")
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True)
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        summary = evaluate(AgentSpec(path=str(broken), agent_id="broken", miner_hotkey="5Fminer"), problems[:5],
                           catalog, store, config)
    assert summary.status == "SUCCESS" and summary.success_rate == 0.0 and summary.judge_inference_total == 0
    assert summary.reasoning_quality is None and summary.final_score == 0.0
    assert all(line.status != "SUCCESS" and line.judge_ok is None for line in summary.problems)
    arena = make_arena("sqlite://", clock=ManualClock(T0), cfg=arena_config(required_successes=1, max_attempts=1))
    arena.tick()
    arena.submit("hk-0", "agent", GOOD)
    work = arena.claim_work("val-a")
    assert work is not None and len(work.problem_ids) == len(summary.problems)
    assert CompleteRequest.from_summary(summary).validator_score == 0.0
    res = arena.complete(work.eval_run_id, "val-a", summary)
    assert res.work_item.is_closed and res.final_score == 0.0
    arena.close()


def test_non_hermetic_sandbox_is_refused_by_default(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store, pytest.raises(ConfigError, match="isolate"):
        evaluate(_spec(), problems, catalog, store, ValidatorConfig(sandbox="process"))


@pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (scripts/sysdeps.sh installs it)")
def test_validate_cli_in_bubblewrap_and_kill_9_mid_run(world, tmp_path: Path) -> None:
    """``shoparena validate`` in a real subprocess, killed with SIGKILL after its first records: nothing committed
    is lost, and the rerun completes the evaluation without duplicating a record."""
    catalog, problems, problems_file = world
    slow = tmp_path / "slow_react.py"
    slow.write_text(agent_path("react").read_text() + "\nimport time as _t\n_main = agent_main\n"
                    "def agent_main(problem_data):\n    _t.sleep(0.6)\n    return _main(problem_data)\n")
    db = tmp_path / "t.db"
    cmd = [sys.executable, "-m", "shoparena", "validate", "--catalog", str(catalog), "--problems",
           str(problems_file), "--agent", str(slow), "--store", f"sqlite:///{db}", "--workers", "1", "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 90
    recorded = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if db.exists():
            with open_store(f"sqlite:///{db}") as store:
                recorded = store.count()
            if recorded >= 2:
                break
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_store(f"sqlite:///{db}") as store:
        survived = store.count()
        assert 2 <= survived < len(problems) and store.verify().ok
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["records_skipped"] == survived
    assert summary["records_written"] == len(problems) - survived
    with open_store(f"sqlite:///{db}") as store:
        assert store.count() == len(problems)
        assert len({r.problem_id for r in store.query()}) == len(problems)
        assert store.verify().ok
