"""Stage 3: teacher SFT. Trajectories of a teacher (any model URI; offline default ``policy:expert``) through the
real harness on the train problems, the successful ones as SFT rows, the voucher bucket up-sampled (paper §4:
"a step-wise corpus with the voucher bucket up-sampled 3×"), then continued SFT of the stage's input checkpoint."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from shoparena.errors import DataError
from shoparena.tasks.types import Problem
from shoparena.train.checkpoint import load_stage, write_stage
from shoparena.train.harness import collect_successes, upsample
from shoparena.train.sft import SFTConfig, train_sft
from shoparena.train.trainer import StageProgress
from shoparena.train.types import StageResult

__all__ = ["TeacherConfig", "train_teacher"]


class TeacherConfig(SFTConfig):
    teacher: str = "policy:expert"
    n_samples: int = Field(1, ge=1)
    temperature: float | None = None
    """Default: the harness's (0 for one sample)."""
    upsample_bucket: str = "voucher"
    upsample_factor: int = Field(3, ge=1)
    max_problems: int | None = Field(None, ge=1)
    agent: str = "react"
    timeout_s: float = Field(300.0, gt=0)
    concurrency: int | None = Field(None, ge=1)


def train_teacher(model_dir: str | os.PathLike[str], problems: Sequence[Problem], eval_rows: Sequence[dict[str, Any]],
                  config: TeacherConfig, out_dir: str | os.PathLike[str], *, catalog_dir: str | os.PathLike[str],
                  resume: bool = False, progress: StageProgress | None = None) -> StageResult:
    """Collect the teacher's successful trajectories, up-sample, continue SFT into ``out_dir/model``."""
    out = Path(out_dir)
    if resume and (done := load_stage(out)) is not None:
        return done
    out.mkdir(parents=True, exist_ok=True)
    chosen = list(problems)[: config.max_problems] if config.max_problems else list(problems)
    got = collect_successes(catalog_dir, chosen, model=config.teacher, k=config.n_samples,
                            temperature=config.temperature, seed=config.seed, out_dir=out / "samples",
                            agent=config.agent, timeout_s=config.timeout_s, concurrency=config.concurrency,
                            resume=resume,
                            progress=progress.phase("teacher sampling", len(chosen) * config.n_samples)
                            if progress is not None else None)
    if progress is not None:
        progress.close()
    if not got.rows:
        raise DataError(f"the teacher {config.teacher} solved none of {len(chosen)} train problems",
                        hint="use a stronger teacher or more problems")
    rows = upsample(got.rows, config.upsample_bucket, config.upsample_factor)
    metrics = {"teacher": config.teacher, "teacher_asr": got.asr, "samples": dict(got.counts),
               "kept": len(got.rows), "rows_by_bucket": dict(Counter(r.get("bucket") for r in got.rows)),
               "rows_by_bucket_upsampled": dict(Counter(r.get("bucket") for r in rows)), "problems": len(chosen)}
    res = train_sft(model_dir, rows, eval_rows, config, out, resume=resume, progress=progress, stage="teacher")
    return write_stage(out, res.model_copy(update={"metrics": {**res.metrics, **metrics}}))
