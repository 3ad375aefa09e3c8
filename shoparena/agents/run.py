"""``shoparena run``: run an agent over problems through the logging gateway, write and score the trajectories.

The gateway is started in-process on a Unix socket (search from the catalog's index, inference from the model
URI), each (problem, sample) gets its own run token, and the agent's ``agent_main`` runs in a pool of worker
processes that reach nothing but the gateway's address. Every agent call's steps go to ``rollouts.jsonl``
(upstream step lists, scorable by ``shoparena score``), the gateway's call log to ``calls.jsonl`` (each search
call attributed to axis A or B), one status line per run to ``runs.jsonl``; the summary (ASR, per bucket, pass@k)
is scored strict by default and saved as ``summary.json`` with the config that produced it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shoparena._io import write_jsonl
from shoparena.agents.loading import agent_path
from shoparena.agents.workers import AgentCall, WorkerPool
from shoparena.tasks.types import Problem

__all__ = ["RunConfig", "RunSummary", "run_agents"]


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
    """Worker processes; default: the number of CPU cores."""
    timeout_s: float = 300.0
    """Per agent call (ORO's per-problem limit)."""
    search_mode: Literal["upstream", "strict"] = "upstream"
    score_mode: Literal["upstream", "strict"] = "strict"
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


def _seed(base: int, problem_id: str, sample: int) -> int:
    digest = hashlib.blake2b(f"{base}:{problem_id}:{sample}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def _failure_steps(problem: Problem, sample: int, status: str, error: dict[str, str] | None) -> list[dict[str, Any]]:
    """The record of an agent call that produced no steps: one empty step, so the run still joins its problem
    and counts as a failed sample."""
    return [{"completion": {"reasoning_content": "", "content": "", "message": {}},
             "extra_info": {"step": 1, "query": problem.query, "timestamp": int(time.time() * 1000),
                            "problem_id": problem.problem_id, "status": status, "error": error}}]


def run_agents(catalog: str | os.PathLike[str], problems: Sequence[Problem], config: RunConfig,
               out: str | os.PathLike[str], progress: Callable[[int], None] | None = None) -> RunSummary:
    """Run ``config.agent`` on every problem ``config.n_samples`` times; write and score everything in ``out``."""
    from shoparena._http import BackgroundServer
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.llm.gateway import Gateway, Limits, create_app
    from shoparena.scoring.run import ScoreConfig, score_run

    t0 = time.perf_counter()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    agent_file = str(agent_path(config.agent))
    temperature = config.temperature if config.temperature is not None else (0.0 if config.n_samples == 1 else 0.7)
    index = SearchIndex.open(index_path(catalog))
    # Offline runs are not throttled (a rate limit would only add 429s to the logs); counts stay bounded.
    limits = Limits.unlimited().model_copy(update={"max_search_calls": 2000, "max_inference_calls": 400})
    gateway = Gateway(SearchService(index, mode=config.search_mode), allowed_models={config.model}, limits=limits)
    sock_dir = Path(tempfile.mkdtemp(prefix="shoparena-gw-"))  # short path: Unix sockets allow ~100 bytes
    sock = sock_dir / "gateway.sock"
    env = {"SHOPARENA_GATEWAY": f"unix:{sock}", "SHOPARENA_MODEL": config.model,
           "SHOPARENA_TEMPERATURE": repr(temperature), "OMP_NUM_THREADS": "1"}
    if config.protocol:
        env["SHOPARENA_PROTOCOL"] = config.protocol
    calls = []
    for sample in range(config.n_samples):
        for problem in problems:
            handle = gateway.open_run(f"{problem.problem_id}#{sample}", problem_id=problem.problem_id,
                                      models={config.model})
            calls.append(AgentCall(key=(problem.problem_id, sample, handle.token), agent_file=agent_file,
                                   problem=problem.public_view(), env={
                                       "SHOPARENA_RUN_TOKEN": handle.token,
                                       "SHOPARENA_SEED": str(_seed(config.seed, problem.problem_id, sample))}))
    by_id = {p.problem_id: p for p in problems}
    order = {p.problem_id: i for i, p in enumerate(problems)}
    results: list[tuple[tuple[int, int], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]] = []
    try:
        with BackgroundServer(create_app(gateway), uds=sock), \
                WorkerPool(config.concurrency or os.cpu_count() or 1, timeout_s=config.timeout_s,
                           base_env=env) as pool:
            for res in pool.run(calls):
                pid, sample, token = res.key
                log = [r.model_dump(mode="json") | {"problem_id": pid, "sample": sample}
                       for r in gateway.close_run(token)]
                steps = res.steps if res.steps else _failure_steps(by_id[pid], sample, res.status, res.error)
                for step in steps:
                    step.setdefault("extra_info", {}).setdefault("problem_id", pid)
                status = {"problem_id": pid, "sample": sample, "status": res.status, "error": res.error,
                          "seconds": round(res.seconds, 3), "steps": len(res.steps or []), "calls": len(log)}
                results.append(((order[pid], sample), steps, log, status))
                if progress is not None:
                    progress(1)
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
    results.sort(key=lambda r: r[0])
    write_jsonl(out_dir / "rollouts.jsonl", (steps for _, steps, _, _ in results))
    write_jsonl(out_dir / "calls.jsonl", (rec for _, _, log, _ in results for rec in log))
    write_jsonl(out_dir / "runs.jsonl", (status for _, _, _, status in results))
    ks = sorted({k for k in (1, 2, 4, 8, 16) if k <= config.n_samples} | {config.n_samples})
    scored = score_run(index, list(problems), out_dir / "rollouts.jsonl",
                       ScoreConfig(mode=config.score_mode, ks=ks, seed=config.seed))
    agg = scored.aggregate
    call_counts: Counter[str] = Counter()
    for _, _, log, _ in results:
        for rec in log:
            call_counts[rec["kind"]] += 1
            if rec["kind"] == "search" and rec.get("axis"):
                call_counts[f"search_axis_{rec['axis']}"] += 1
    summary = RunSummary(
        asr=agg.asr, asr_by_bucket=agg.asr_by_bucket, pass_at_k=agg.pass_at_k, n_problems=len(problems),
        n_samples=config.n_samples, gt_rate=agg.gt_rate, axis_rates=agg.axis_rates,
        statuses=dict(Counter(s["status"] for _, _, _, s in results)), calls=dict(call_counts),
        seconds=round(time.perf_counter() - t0, 2), out=str(out_dir),
    )
    (out_dir / "summary.json").write_text(json.dumps({"summary": summary.model_dump(), "config": config.model_dump(),
                                                      "score": agg.model_dump(mode="json")}, indent=2) + "\n",
                                          encoding="utf-8")
    return summary
