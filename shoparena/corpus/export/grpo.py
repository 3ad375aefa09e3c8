"""GRPO export (TRL ``GRPOTrainer`` prompt set): one row per problem with its teacher reference's prompt and
per-step tool calls (see :mod:`shoparena.corpus.export`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from shoparena.corpus.export.common import (
    BadRow,
    ExportResult,
    check_partition,
    dedup,
    finish,
    guard,
    messages_of,
    tools_of,
)
from shoparena.corpus.split import SplitManifest
from shoparena.corpus.types import StageReport, Trajectory
from shoparena.tasks.loader import parse_problem, problem_row
from shoparena.tasks.types import Problem

__all__ = ["write_grpo"]


def _reference_rank(t: Trajectory) -> tuple[Any, ...]:
    judge = t.judge_score if t.judge_score is not None else t.coefficient
    return (-(judge if judge is not None else -1.0), len(t.assistant_messages()), t.traj_id)


def _reference_steps(msgs: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
    return [[{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in m.get("tool_calls", [])]
            for m in msgs if m["role"] == "assistant"]


def _problem_column(p: Problem) -> str | None:
    """The ``problem`` column of ``p``: its JSONL row, or None when that row does not read back (through the reader
    training uses) as ``p`` itself — a row that would stop training or reward against another ground truth."""
    text = orjson.dumps(problem_row(p)).decode()
    try:
        back = parse_problem(orjson.loads(text), suite=p.suite or "train")
    except ValueError:
        return None
    return text if back == p else None


def write_grpo(rows: Iterable[Trajectory], problems: Iterable[Problem] | Mapping[str, Problem],
               out_dir: str | os.PathLike[str], *, name: str = "grpo", require_success: bool = True,
               manifest: SplitManifest | None = None, partition: str = "train",
               ground_truth: bool = True) -> ExportResult:
    """Write one GRPO prompt row per problem of ``problems`` (module docstring), its teacher reference chosen among
    ``rows`` of that problem: strictly successful ones (any, with ``require_success=False``), highest judge value,
    then fewest assistant turns, then trajectory id. Counted reasons: ``unknown_problem`` / ``not_success`` /
    malformed-row codes (rows), ``no_reference`` / ``no_prompt`` / ``unreadable_problem`` (a problem whose row does
    not read back as itself) / ``no_ground_truth`` (problems); ``report.seen`` / ``kept`` count problems,
    ``report.notes["rows_seen"]`` the candidate rows.

    A GRPO row's ``problem`` is the ground truth its rewards (and stage 2's and 3's strict scoring) score against,
    so ``ground_truth=False`` — ``problems`` rebuilt from store records, which hold the query and the GT ids but no
    GT titles, constraints or voucher — exports no row."""
    check_partition(manifest, partition)
    result = ExportResult(kind="grpo", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    by_id = dict(problems) if isinstance(problems, Mapping) else {p.problem_id: p for p in problems}
    guard(((pid, pid) for pid in by_id), manifest, partition, "GRPO problems")
    refs: dict[str, list[tuple[Trajectory, list[dict[str, Any]], str]]] = {}
    for t in dedup(rows, result):
        if t.problem_id not in by_id:
            result.reject("unknown_problem", f"problem {t.problem_id} is not among the GRPO problems", t.traj_id,
                          t.traj_id)
            continue
        if require_success and t.success is not True:
            result.reject("not_success", "a teacher reference must be strictly successful", t.traj_id, t.traj_id)
            continue
        try:
            refs.setdefault(t.problem_id, []).append((t, messages_of(t), tools_of(t)))
        except BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
    out: list[dict[str, Any]] = []
    for pid in sorted(by_id):
        cands = refs.get(pid)
        if not cands:
            result.reject("no_reference", f"problem {pid} has no usable teacher trajectory", pid)
            continue
        t, msgs, tools = min(cands, key=lambda c: _reference_rank(c[0]))
        first_user = next((i for i, m in enumerate(msgs) if m["role"] == "user"), None)
        if first_user is None or any(m["role"] != "system" for m in msgs[:first_user]):
            result.reject("no_prompt", f"reference {t.traj_id} does not open with system/user messages", pid,
                          t.traj_id)
            continue
        p = by_id[pid]
        if not ground_truth:
            result.reject("no_ground_truth", f"problem {pid} was rebuilt from store records (query and GT ids "
                          "only); build with --banks or --problems for its ground truth", pid)
            continue
        column = _problem_column(p)
        if column is None:
            result.reject("unreadable_problem", f"problem {pid} does not read back from its JSONL row", pid)
            continue
        out.append({"prompt": msgs[:first_user + 1], "tools": tools, "problem_id": pid, "bucket": p.bucket,
                    "gt_ids": list(p.gt_ids()), "problem": column,
                    "reference_id": t.traj_id, "reference_steps": _reference_steps(msgs[first_user + 1:])})
    result.report.notes = {"rows_seen": result.report.seen, "problems": len(by_id), "with_reference": len(out),
                           "require_success": require_success}
    result.report.seen = len(by_id)
    return finish(result, out)
