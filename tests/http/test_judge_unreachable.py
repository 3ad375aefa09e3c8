"""An LLM judge whose endpoint is down fails fast and honestly, rather than stalling on every problem or reporting
success without writing a record: seconds in all, the run FAILED with ``judge_unavailable``, no record, and
``shoparena validate`` exiting non-zero with one error line."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoparena.agents import agent_path
from shoparena.errors import BackendError
from shoparena.store import open_store
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate
from shoparena.validator.judge import LLMJudge, LLMJudgeConfig
from shoparena.validator.judge.llm import UNAVAILABLE
from tests.http import TRACEBACK_MARKERS
from tests.validator.judge import QUERY, THINKS, StandIn, call_log, quoting, trajectory
from tests.worlds import small_world


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    return small_world(tmp_path_factory.mktemp("judge-down"), size=300, catalog_seed=3, n=3,
                       problem_seed=2)


def test_an_unreachable_judge_fails_the_evaluation_in_seconds(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    judge = f"llm:openai:http://127.0.0.1:{closed_port()}/v1/judge-model"
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, judge=judge, workers=1)
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        t0 = time.monotonic()
        summary = evaluate(AgentSpec(path=str(agent_path("react")), agent_id="react"), problems, catalog, store,
                           config)
        assert time.monotonic() - t0 < 20
        assert summary.status == "FAILED"
        assert (summary.failure_reason or "").startswith(f"{UNAVAILABLE}: judge failed on 3 of 3 problems")
        assert "cannot connect" in (summary.failure_reason or "")
        assert summary.judge_inference_failed == summary.judge_inference_total == 3
        assert summary.records_written == 0 and store.count() == 0  # never a made-up score
        assert summary.final_score is None and all(line.judge_ok is False for line in summary.problems)


def test_validate_cli_exits_5_with_one_error_line(world, tmp_path: Path) -> None:
    catalog, _, problems_file = world
    cmd = [sys.executable, "-m", "shoparena", "validate", "--catalog", str(catalog), "--problems",
           str(problems_file), "--agent", "react", "--sandbox", "process", "--allow-non-hermetic", "--workers", "1",
           "--store", f"sqlite:///{tmp_path / 't.db'}", "--judge", f"llm:openai:http://127.0.0.1:{closed_port()}/m",
           "--json"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - t0 < 30  # imports and three sandboxed episodes included
    assert done.returncode == BackendError.exit_code == 5, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "FAILED" and summary["records_written"] == 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "evaluation FAILED: judge_unavailable" in errors[0]
    assert not any(m in done.stderr for m in TRACEBACK_MARKERS), done.stderr


def _verdict(judge: LLMJudge):  # -> Verdict
    steps = trajectory(THINKS[0.7])
    return asyncio.run(judge.judge(QUERY, steps, call_log(steps)))


def test_the_judge_opens_after_consecutive_connection_failures() -> None:
    dead = f"openai:http://127.0.0.1:{closed_port()}/v1/m"
    judge = LLMJudge([dead], LLMJudgeConfig(connect_backoff_s=0.01))
    first = _verdict(judge)
    assert not first.ok and first.score is None and first.attempts == 3
    assert (first.error or "").startswith(f"{UNAVAILABLE}: 3 connection failures in a row")
    t0 = time.monotonic()
    later = _verdict(judge)  # fails at once: no further connection attempts
    assert time.monotonic() - t0 < 1 and later.attempts == 0 and later.error == first.error


def test_a_dead_model_beside_a_live_one_does_not_make_the_judge_unavailable() -> None:
    dead = f"openai:http://127.0.0.1:{closed_port()}/v1/m"
    judge = LLMJudge([dead, StandIn("live", quoting(0.7))], LLMJudgeConfig(connect_backoff_s=0.01))
    for _ in range(3):  # every verdict: the dead model is tried, fails to connect, and the live one answers
        v = _verdict(judge)
        assert v.ok and v.score == 0.7
    assert judge.unavailable is None and judge.connect_failures == 0
