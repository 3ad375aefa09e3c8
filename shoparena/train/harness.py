"""Trajectories for stages 2–3 through the real harness: :func:`shoparena.validator.run.run_agents` (the evaluation
core: gateway, sandboxed agent, strict scorer) runs an agent with any model URI ``k`` times per problem; the
successful samples become SFT rows through the corpus normaliser (:func:`shoparena.corpus.normalize.iter_rollouts`)
and exporter (:func:`shoparena.corpus.export.common.messages_of` / ``tools_of``), exactly as the corpus is built.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoparena.errors import DataError
from shoparena.tasks.types import Problem

__all__ = ["Collected", "collect_successes", "problems_of_rows", "upsample"]


@dataclass
class Collected:
    """SFT rows of the successful samples, which (problem, sample) pairs they are, and the run's counts."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    kept: list[tuple[str, int]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    asr: float | None = None


def problems_of_rows(rows: Iterable[dict[str, Any]]) -> list[Problem]:
    """The distinct problems (first-seen order) of corpus rows that carry a ``problem`` column (the GRPO export:
    the leak-guarded train partition's problems). A row whose problem does not parse is a :class:`DataError`
    naming the row and the problem."""
    from shoparena.tasks.loader import parse_problem

    out: dict[str, Problem] = {}
    for n, row in enumerate(rows, 1):
        raw = row.get("problem") if isinstance(row, dict) else None
        if raw is None:
            continue
        where = f"GRPO row {n} (problem {row.get('problem_id', '?')})"
        try:
            rec = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(rec, dict):
                raise ValueError(f"expected a JSON object, got {type(rec).__name__}")
            problem = parse_problem(rec, suite=str(rec.get("suite") or "train"))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise DataError(f"{where}: unreadable problem ({exc})",
                            hint="rebuild the corpus with `shoparena corpus build --banks DIR` (or --problems "
                                 "FILE): its GRPO rows then carry each problem's whole ground truth") from None
        out.setdefault(problem.problem_id, problem)
    return list(out.values())


def collect_successes(catalog_dir: str | os.PathLike[str], problems: Sequence[Problem], *, model: str, k: int,
                      temperature: float | None, seed: int, out_dir: str | os.PathLike[str], agent: str = "react",
                      timeout_s: float = 300.0, concurrency: int | None = None, resume: bool = False,
                      progress: Any = None, episode_tokens: int | None = None) -> Collected:
    """Run ``agent`` with ``model`` ``k`` times on each problem (``out_dir``: the run's ``rollouts.jsonl``,
    ``runs.jsonl``, ``summary.json``; reused on ``resume`` when complete) and keep the samples whose strict score
    is a success. ``episode_tokens``: each episode's completion-token budget, the clock that does not depend on
    ``concurrency`` (:attr:`shoparena.validator.run.RunConfig.episode_tokens`)."""
    from shoparena.corpus.export.common import BadRow, messages_of, tools_of
    from shoparena.corpus.normalize import iter_rollouts
    from shoparena.corpus.types import Trajectory
    from shoparena.validator.run import RunConfig, run_agents, run_records

    if not problems:
        raise DataError("no train problems to sample",
                        hint="the corpus's grpo_train.jsonl carries them; a corpus built without --banks or "
                             "--problems has none (the store's records hold no ground truth)")
    out = Path(out_dir)
    done = out / "summary.json"
    if not (resume and done.is_file() and (out / "runs.jsonl").is_file()):
        run_agents(catalog_dir, problems, RunConfig(agent=agent, model=model, n_samples=k, seed=seed,
                                                    temperature=temperature, timeout_s=timeout_s,
                                                    concurrency=concurrency, episode_tokens=episode_tokens),
                   out, progress=progress,
                   resume=resume)
    runs_file = out / "runs.jsonl"
    runs = run_records(runs_file.read_bytes(), runs_file)
    by_id = {p.problem_id: p for p in problems}
    trajs = list(iter_rollouts(out / "rollouts.jsonl", by_id))
    if len(trajs) != len(runs):
        raise DataError(f"{out}: {len(runs)} runs but {len(trajs)} rollouts")
    result = Collected()
    for run, traj in zip(runs, trajs, strict=True):
        result.counts["samples"] += 1
        if not run.get("success"):
            result.counts["failed"] += 1
            continue
        if not isinstance(traj, Trajectory):
            result.counts["unreadable"] += 1
            continue
        try:
            row = {"messages": messages_of(traj), "tools": tools_of(traj)}
        except BadRow:
            result.counts["unreadable"] += 1
            continue
        row.update(problem_id=run["problem_id"], sample=run["sample"], bucket=by_id[run["problem_id"]].bucket)
        result.rows.append(row)
        result.kept.append((run["problem_id"], run["sample"]))
        result.counts["kept"] += 1
    summary = json.loads(done.read_text(encoding="utf-8"))
    result.asr = summary.get("summary", {}).get("asr")
    return result


def upsample(rows: Sequence[dict[str, Any]], bucket: str, factor: int) -> list[dict[str, Any]]:
    """``rows`` with every row of ``bucket`` repeated ``factor`` times (in place, order kept)."""
    if factor < 1:
        raise DataError(f"upsampling factor must be ≥ 1, got {factor}")
    out: list[dict[str, Any]] = []
    for row in rows:
        out.extend([row] * (factor if row.get("bucket") == bucket else 1))
    return out
