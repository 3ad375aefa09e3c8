"""``shoparena run``: the evaluation core without the judge and the store, on the non-hermetic ``process`` sandbox.

:func:`run_agents` turns a :class:`RunConfig` into the core's :class:`~shoparena.validator.types.ValidatorConfig`
(sandbox ``process``, no judge) and runs :func:`~shoparena.validator.core.evaluate_problems`: the same gateway,
sanitised problem view, search flavour, per-(problem, sample) seeds and scorer as ``shoparena validate``, so the
same agent, model and seed give the same trajectories and the same ASR through both. Every agent call's steps go
to ``rollouts.jsonl`` (upstream step lists, scorable by ``shoparena score``), the gateway's call log to
``calls.jsonl`` (each search call attributed to axis A or B), one status line per run to ``runs.jsonl``, each
sample's score (:class:`~shoparena.scoring.types.ProblemScore` without its items) to ``scores.jsonl``; the
summary (ASR, per bucket, pass@k) is saved as ``summary.json`` with the config that produced it. Each problem
runs in its own process group, killed with everything it forked when the problem ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from shoparena.tasks.types import Problem
from shoparena.types import Mode
from shoparena.validator.core import AgentSpec, ProblemResult, ValidatorConfig

__all__ = ["RunConfig", "RunSummary", "run_agents", "validator_config"]


class RunConfig(BaseModel):
    """Everything that decides a run; saved beside its output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    """A built-in agent name (react, oro7, pipeline) or the path of an agent file."""
    model: str = "policy:expert"
    n_samples: int = 1
    seed: int = 0
    temperature: float | None = None
    """Default: 0 for one sample, 0.7 when sampling several (so pass@k means something)."""
    concurrency: int | None = None
    """Problems at once; default: the number of CPU cores."""
    timeout_s: float = 300.0
    """Per agent call (ORO's per-problem limit)."""
    search_mode: Mode = "upstream"
    score_mode: Mode = "strict"
    protocol: Literal["native", "tags"] | None = None
    """Protocol for the built-in ReAct agents (default native)."""


class RunSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    asr: float
    asr_by_bucket: dict[str, float]
    pass_at_k: dict[str, float]
    n_problems: int
    n_samples: int
    gt_rate: float
    axis_rates: dict[str, float | None]
    statuses: dict[str, int]
    """SUCCESS / FAILED / TIMED_OUT counts over agent calls."""
    calls: dict[str, int]
    """Gateway calls by kind, and search calls by axis (``search_axis_A`` / ``search_axis_B``)."""
    seconds: float
    out: str


def validator_config(config: RunConfig) -> ValidatorConfig:
    """The evaluation core's config of a run: ``process`` sandbox, no judge, the run's sampling."""
    from shoparena.validator.sandbox.types import SandboxLimits

    temperature = config.temperature if config.temperature is not None else (0.0 if config.n_samples == 1 else 0.7)
    return ValidatorConfig(model=config.model, judge="none", sandbox="process", allow_non_hermetic=True,
                           workers=config.concurrency, limits=SandboxLimits(timeout_s=config.timeout_s),
                           scorer_mode=config.score_mode, temperature=temperature, seed=config.seed,
                           search_mode=config.search_mode, protocol=config.protocol)


def _failure_steps(problem: Problem, res: ProblemResult) -> list[dict[str, Any]]:
    """The record of an agent call that produced no steps: one empty step in the step format (so ``shoparena
    score`` accepts it), so the run still joins its problem and counts as a failed sample; why it failed is in
    ``runs.jsonl``."""
    started = res.outcome.started_at
    return [{"completion": {"reasoning_content": "", "content": "", "message": {}},
             "extra_info": {"step": 1, "query": problem.query,
                            "timestamp": int((started if started is not None else time.time()) * 1000),
                            "problem_id": problem.problem_id}}]


def _joinable(steps: list[dict[str, Any]], problem_id: str) -> list[dict[str, Any]]:
    """``steps`` with ``extra_info.problem_id`` filled where the agent left it out (copies; the agent's own
    steps are written unchanged otherwise)."""
    out = []
    for step in steps:
        extra = step.get("extra_info")
        if extra is None or (isinstance(extra, dict) and "problem_id" not in extra):
            step = {**step, "extra_info": {**(extra or {}), "problem_id": problem_id}}
        out.append(step)
    return out


def _line(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS) + b"\n"


def run_agents(catalog: str | os.PathLike[str], problems: Sequence[Problem], config: RunConfig,
               out: str | os.PathLike[str], progress: Callable[[int], None] | None = None) -> RunSummary:
    """Run ``config.agent`` on every problem ``config.n_samples`` times; write and score everything in ``out``."""
    from shoparena.agents.loading import agent_path
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.validator.core import (
        aggregate_scores,
        eval_run_id,
        evaluate_problems,
        open_sandbox,
        pipeline_version,
    )

    t0 = time.perf_counter()
    out_dir = Path(out)
    agent_file = agent_path(config.agent)
    vconfig = validator_config(config)
    sandbox = open_sandbox(vconfig, catalog)
    index = SearchIndex.open(index_path(catalog))
    code_sha = hashlib.sha256(agent_file.read_bytes()).hexdigest()
    run_id = eval_run_id(AgentSpec(path=str(agent_file), agent_id=agent_file.stem), code_sha, problems,
                         pipeline_version(index, vconfig), None)
    order = {p.problem_id: i for i, p in enumerate(problems)}
    results: list[ProblemResult] = []
    for res in evaluate_problems(agent_file, problems, index, sandbox, vconfig, run_id=run_id,
                                 n_samples=config.n_samples):
        results.append(res)
        if progress is not None:
            progress(1)
    results.sort(key=lambda r: (order[r.problem.problem_id], r.sample))
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "rollouts.jsonl", "wb") as rollouts, open(out_dir / "calls.jsonl", "wb") as calls, \
            open(out_dir / "runs.jsonl", "wb") as runs, open(out_dir / "scores.jsonl", "wb") as scores:
        for res in results:
            pid = res.problem.problem_id
            steps = _joinable(res.steps, pid) if res.steps else _failure_steps(res.problem, res)
            rollouts.write(_line(steps))
            calls.writelines(_line({**c, "problem_id": pid, "sample": res.sample}) for c in res.calls)
            runs.write(_line({"problem_id": pid, "sample": res.sample, "status": res.envelope.status,
                              "error": res.envelope.error, "seconds": res.outcome.wall_s, "steps": len(res.steps),
                              "calls": len(res.calls), "success": res.score.success}))
            scores.write(_line(res.score.model_dump(mode="json", exclude={"items"})))
    ks = sorted({k for k in (1, 2, 4, 8, 16) if k <= config.n_samples} | {config.n_samples})
    agg = aggregate_scores([r.score for r in results], problems, config.score_mode, ks=ks, seed=config.seed)
    call_counts: Counter[str] = Counter()
    for res in results:
        for rec in res.calls:
            call_counts[rec["kind"]] += 1
            if rec["kind"] == "search" and rec.get("axis"):
                call_counts[f"search_axis_{rec['axis']}"] += 1
    summary = RunSummary(
        asr=agg.asr, asr_by_bucket=agg.asr_by_bucket, pass_at_k=agg.pass_at_k, n_problems=len(problems),
        n_samples=config.n_samples, gt_rate=agg.gt_rate, axis_rates=agg.axis_rates,
        statuses=dict(Counter(r.envelope.status for r in results)), calls=dict(call_counts),
        seconds=round(time.perf_counter() - t0, 2), out=str(out_dir),
    )
    (out_dir / "summary.json").write_text(json.dumps({"summary": summary.model_dump(), "config": config.model_dump(),
                                                      "score": agg.model_dump(mode="json")}, indent=2) + "\n",
                                          encoding="utf-8")
    return summary
