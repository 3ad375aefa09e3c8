"""KTO export (TRL ``KTOTrainer``, unpaired): one labelled row per assistant turn, and the label rule
:func:`kto_label` (see :mod:`shoparena.corpus.export`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

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

__all__ = ["kto_label", "write_kto"]


def kto_label(t: Trajectory, *, min_judge: float = 0.7) -> tuple[bool | None, str]:
    """The KTO label of ``t``'s assistant turns and why (``docs/training.md`` §3, our rule): desirable = a strictly
    successful agentic trace whose judge value (``judge_score``, else ``coefficient``) is ≥ ``min_judge`` or
    unknown; undesirable = a failed trace or a sub-task (axis ``B`` / ``mixed``) trace. ``None`` (no label) for an
    unscored trace or a success judged below ``min_judge``."""
    if t.axis in ("B", "mixed"):
        return False, "sub_task"
    if t.success is None:
        return None, "unscored"
    if not t.success:
        return False, "failed"
    judge = t.judge_score if t.judge_score is not None else t.coefficient
    if judge is None:
        return True, "success_unjudged"
    if judge >= min_judge:
        return True, "success"
    return None, "judge_below_min"


def write_kto(rows: Iterable[Trajectory], out_dir: str | os.PathLike[str], *, name: str = "kto",
              min_judge: float = 0.7, turns: Literal["all", "last"] = "all", manifest: SplitManifest | None = None,
              partition: str = "train") -> ExportResult:
    """Write KTO rows (module docstring): one per assistant turn (``turns="all"``) or per trajectory (``"last"``).
    Unlabelled trajectories are counted (``unscored``, ``judge_below_min``); ``report.notes`` holds the class
    balance (``desirable`` / ``undesirable`` rows) and the label reasons."""
    check_partition(manifest, partition)
    result = ExportResult(kind="kto", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    kept = dedup(rows, result)
    guard(((t.traj_id, t.problem_id) for t in kept), manifest, partition, "KTO rows")
    out: list[dict[str, Any]] = []
    why: dict[str, int] = {}
    empty = 0
    for t in kept:
        label, reason = kto_label(t, min_judge=min_judge)
        if label is None:
            result.reject(reason, f"no KTO label ({reason})", t.traj_id, t.traj_id)
            continue
        try:
            msgs, tools = messages_of(t), tools_of(t)
        except BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
            continue
        turns_at = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
        idx = [i for i in turns_at if msgs[i].get("content") or msgs[i].get("reasoning_content")
               or msgs[i].get("tool_calls")]
        empty += len(turns_at) - len(idx)
        if not idx:
            result.reject("no_judged_turn", "no non-empty assistant turn after a prompt", t.traj_id, t.traj_id)
            continue
        why[reason] = why.get(reason, 0) + 1
        for i in idx if turns == "all" else idx[-1:]:
            out.append({"prompt": msgs[:i], "completion": [msgs[i]], "label": label, "tools": tools,
                        "id": f"{t.traj_id}:{i}", "traj_id": t.traj_id, "problem_id": t.problem_id,
                        "bucket": t.bucket, "turn": i})
    desirable = sum(r["label"] for r in out)
    result.report.notes = {"desirable": desirable, "undesirable": len(out) - desirable,
                           "trajectories_by_label_reason": dict(sorted(why.items())), "empty_turns_skipped": empty,
                           "turns": turns,
                           "min_judge": min_judge}
    return finish(result, out)
