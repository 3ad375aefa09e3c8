"""SFT export: one row per trajectory, ``{"id", "problem_id", "bucket", "source", "messages", "tools"}`` (see
:mod:`shoparena.corpus.export`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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

__all__ = ["write_sft"]


def write_sft(rows: Iterable[Trajectory], out_dir: str | os.PathLike[str], *, name: str = "sft",
              manifest: SplitManifest | None = None, partition: str = "train") -> ExportResult:
    """Write SFT rows (module docstring) as ``<name>.jsonl``, ``<name>.parquet`` and ``<name>_dataset/``. With a
    split ``manifest``, every row must belong to ``partition`` (else :class:`LeakError`)."""
    check_partition(manifest, partition)
    result = ExportResult(kind="sft", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    kept = dedup(rows, result)
    guard(((t.traj_id, t.problem_id) for t in kept), manifest, partition, "SFT rows")
    out: list[dict[str, Any]] = []
    for t in kept:
        try:
            out.append({"id": t.traj_id, "problem_id": t.problem_id, "bucket": t.bucket, "source": t.source,
                        "messages": messages_of(t), "tools": tools_of(t)})
        except BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
    return finish(result, out)
