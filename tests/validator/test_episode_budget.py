"""The episode clock in generated tokens: a run whose episode asks for more completion tokens than its budget is
timed out (steps dropped, as an agent killed at the wall clock), one within it is untouched, and runs stored
before the setting existed keep their identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.env.types import Envelope
from shoparena.llm.gateway import BUDGET_SPENT
from shoparena.validator.core import budget_timeout
from shoparena.validator.run import RunConfig, run_agents, same_config
from tests.worlds import small_world

_STEPS = [{"completion": {"content": "", "reasoning_content": "", "message": {}}, "extra_info": {"step": 1}}]


def _env(status: str = "SUCCESS") -> Envelope:
    return Envelope(problem_id="p1", status=status, execution_time=1.0, dialogue=_STEPS)  # type: ignore[arg-type]


def _call(status: int, error: str | None) -> dict:
    return {"kind": "inference", "status": status, "error": error}


def test_a_budget_refusal_times_the_episode_out() -> None:
    calls = [_call(200, None), _call(429, f"{BUDGET_SPENT} (64 per run)")]
    env = budget_timeout(_env(), calls)
    assert env.status == "TIMED_OUT"
    assert env.dialogue is None  # scored as nothing, like an agent killed at its wall clock
    assert env.error is not None and env.error["type"] == "Timeout"
    assert "64 per run" in env.error["message"]


@pytest.mark.parametrize("calls", [
    [_call(200, None)],  # finished within its budget
    [_call(429, "rate limit: at most 30 requests/s (burst 50) per run")],  # another 429 is no clock
    [{"kind": "search", "status": 429, "error": f"{BUDGET_SPENT} (64 per run)"}],  # only inference counts
])
def test_other_runs_keep_their_outcome(calls: list[dict]) -> None:
    assert budget_timeout(_env(), calls) == _env()


def test_a_wall_clock_timeout_keeps_its_own_message() -> None:
    env = _env("TIMED_OUT").model_copy(update={"error": {"type": "Timeout", "message": "wall"}})
    assert budget_timeout(env, [_call(429, f"{BUDGET_SPENT} (1 per run)")]) == env


def test_identity_leaves_an_unset_budget_out() -> None:
    plain, budget = RunConfig(agent="react"), RunConfig(agent="react", episode_tokens=2048)
    assert "episode_tokens" not in plain.identity()
    assert budget.identity()["episode_tokens"] == 2048
    stored_before = {k: v for k, v in plain.model_dump(mode="json").items() if k != "episode_tokens"}
    assert same_config(stored_before, plain)  # a run stored before the field existed is one without a budget
    assert not same_config(stored_before, budget)
    assert not same_config(budget.model_dump(mode="json"), plain)
    assert RunConfig.stored_identity(stored_before) == plain.identity()


def test_runs_with_a_budget(tmp_path: Path) -> None:
    catalog, problems, _ = small_world(tmp_path, size=400, catalog_seed=8, n=3, problem_seed=2)

    def run(name: str, budget: int | None) -> list[dict]:
        out = tmp_path / name
        run_agents(catalog, problems, RunConfig(agent="react", model="policy:expert", seed=3, timeout_s=60,
                                                concurrency=2, episode_tokens=budget), out)
        return sorted((json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()),
                      key=lambda r: r["problem_id"])

    free, roomy, tight = run("free", None), run("roomy", 100_000), run("tight", 5)
    assert [r["status"] for r in free] == ["SUCCESS"] * 3
    assert any(r["success"] for r in free)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in free]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in roomy] == strip
    assert [r["status"] for r in tight] == ["TIMED_OUT"] * 3
    assert not any(r["success"] for r in tight)
    assert all(BUDGET_SPENT in r["error"]["message"] for r in tight)


def test_rejection_sampling_takes_the_budget(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from shoparena.train.harness import collect_successes
    from shoparena.train.rs import RSConfig

    assert RSConfig(episode_tokens=2048).episode_tokens == 2048
    with pytest.raises(ValidationError):
        RSConfig(episode_tokens=0)
    catalog, problems, _ = small_world(tmp_path, size=400, catalog_seed=8, n=2, problem_seed=2)
    common = {"model": "policy:expert", "k": 1, "temperature": 0.0, "seed": 1, "concurrency": 2}
    roomy = collect_successes(catalog, problems, out_dir=tmp_path / "roomy", episode_tokens=100_000, **common)
    tight = collect_successes(catalog, problems, out_dir=tmp_path / "tight", episode_tokens=5, **common)
    assert roomy.rows and not tight.rows
    statuses = [json.loads(x)["status"] for x in (tmp_path / "tight" / "runs.jsonl").read_text().splitlines()]
    assert statuses == ["TIMED_OUT"] * 2


def test_the_budget_is_bounded_everywhere_it_is_set(tmp_path: Path) -> None:
    import subprocess
    import sys

    from pydantic import ValidationError

    from shoparena.evaluate import EvalConfig, parse_models
    from shoparena.train.rs import RSConfig
    from shoparena.validator import EPISODE_TOKENS_MAX, ValidatorConfig

    for make in (lambda v: RunConfig(agent="react", episode_tokens=v), lambda v: RSConfig(episode_tokens=v),
                 lambda v: ValidatorConfig(episode_tokens=v),
                 lambda v: EvalConfig(models=parse_models("policy:expert"), episode_tokens=v)):
        assert make(EPISODE_TOKENS_MAX).episode_tokens == EPISODE_TOKENS_MAX
        for bad in (0, EPISODE_TOKENS_MAX + 1, 10**30):
            with pytest.raises(ValidationError):
                make(bad)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "shoparena", "run", "--agent", "react", "--catalog",
                           str(tmp_path / "none"), "--problems", str(tmp_path / "none.jsonl"), "--out", str(out),
                           "--episode-tokens", str(10**30)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error:") and "--episode-tokens" in proc.stderr and "hint:" in proc.stderr
    assert not out.exists()
