"""Stage 2: rejection-sampled re-SFT (docs/training.md §3, paper B.3). ``k`` samples per train problem through the real
harness with the stage-1 model (or any ``sampler`` model URI), keep the strict successes (less those with a turn
that ends a thought without its tool call, with ``callless_turns: drop``; counted ``dropped_callless``), mix them
with the stage-1 rows (``mix_ratio`` = the RS share, 50/50 by default) and retrain with :func:`train_sft`.

A run where nothing succeeds passes its input checkpoint on unchanged (and says so in the metrics)."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from shoparena.env.turns import open_callless_turns
from shoparena.tasks.types import Problem
from shoparena.train.checkpoint import checkpoint_sha256, load_stage, write_stage
from shoparena.train.harness import collect_successes
from shoparena.train.sft import SFTConfig, copy_checkpoint, train_sft
from shoparena.train.trainer import StageProgress
from shoparena.train.types import StageResult
from shoparena.validator import EpisodeTokens

__all__ = ["RSConfig", "mix_rows", "train_rs", "without_callless"]


class RSConfig(SFTConfig):
    """Stage-2 settings: sampling (paper: k 8, temperature 0.9) and the mix; the rest is the SFT trainer's."""

    k: int = Field(8, ge=1)
    temperature: float = Field(0.9, ge=0.0)
    sampler: str | None = None
    """Model URI that samples (default ``hf:{model}``); ``{model}`` stands for the stage's input checkpoint, so
    ``llamacpp:{model}`` samples the same checkpoint through llama.cpp (several times faster on a CPU)."""
    mix_ratio: float = Field(0.5, gt=0.0, le=1.0)
    """Share of RS rows in the retraining mix (the rest: stage-1 rows)."""
    max_problems: int | None = Field(None, ge=1)
    agent: str = "react"
    timeout_s: float = Field(300.0, gt=0)
    concurrency: int | None = Field(None, ge=1)
    episode_tokens: EpisodeTokens | None = None
    """Completion tokens a sampled episode may generate before it is timed out: a clock that does not depend on
    ``concurrency``, so the batched sampler can run many episodes at once without cutting them (``timeout_s``
    then only bounds a hung episode). ``None``: the wall clock ``timeout_s`` alone."""


def mix_rows(new: Sequence[dict[str, Any]], old: Sequence[dict[str, Any]], ratio: float, seed: int
             ) -> list[dict[str, Any]]:
    """``new`` plus enough of ``old`` (a seeded sample) that ``new`` makes up ``ratio`` of the mix, shuffled."""
    want = round(len(new) * (1 - ratio) / ratio)
    rng = random.Random(seed)
    picked = rng.sample(list(old), min(want, len(old)))
    mixed = [*new, *picked]
    rng.shuffle(mixed)
    return mixed


def without_callless(rows: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, int]]
                     ) -> tuple[list[dict[str, Any]], list[tuple[str, int]], int]:
    """The sampled successful episodes (SFT rows with ``messages``, and their ``(problem, sample)`` pairs in the same
    order) less those with an assistant turn that ends a thought without its call
    (:func:`shoparena.env.turns.open_callless_turns`), and how many were left out. A successful episode can hold one
    (the harness asks again after a callless turn, and a later turn recommends); retraining on it teaches the
    think-then-stop turn."""
    if len(rows) != len(pairs):
        raise ValueError(f"{len(rows)} rows for {len(pairs)} (problem, sample) pairs")
    kept = [(r, p) for r, p in zip(rows, pairs, strict=True)
            if not (isinstance(r.get("messages"), list) and open_callless_turns(r["messages"]))]
    return [r for r, _ in kept], [p for _, p in kept], len(rows) - len(kept)


def train_rs(model_dir: str | os.PathLike[str], problems: Sequence[Problem], sft_rows: Sequence[dict[str, Any]],
             eval_rows: Sequence[dict[str, Any]], config: RSConfig, out_dir: str | os.PathLike[str], *,
             catalog_dir: str | os.PathLike[str], resume: bool = False,
             progress: StageProgress | None = None) -> StageResult:
    """Sample, keep successes, mix, retrain; the merged checkpoint goes to ``out_dir/model``."""
    out = Path(out_dir)
    if resume and (done := load_stage(out)) is not None:
        return done
    out.mkdir(parents=True, exist_ok=True)
    chosen = list(problems)[: config.max_problems] if config.max_problems else list(problems)
    sampler = (config.sampler or "hf:{model}").replace("{model}", str(Path(model_dir).resolve()))
    got = collect_successes(catalog_dir, chosen, model=sampler,
                            k=config.k, temperature=config.temperature, seed=config.seed, out_dir=out / "samples",
                            agent=config.agent, timeout_s=config.timeout_s, concurrency=config.concurrency,
                            episode_tokens=config.episode_tokens, resume=resume, progress=None if progress is None
                            else progress.phase("sampling", len(chosen) * config.k))
    if progress is not None:
        progress.close()
    rs_rows, pairs, callless = list(got.rows), list(got.kept), 0
    if config.callless_turns == "drop":
        rs_rows, pairs, callless = without_callless(rs_rows, pairs)
    metrics: dict[str, Any] = {"sampler_asr": got.asr, "samples": dict(got.counts), "kept": len(rs_rows),
                               "kept_pairs": [list(p) for p in pairs], "problems": len(chosen),
                               "dropped_callless": callless}
    if not rs_rows:
        copy_checkpoint(Path(model_dir), out / "model")
        metrics["note"] = ("no successful samples" if not got.rows else
                           "every successful sample has a turn without a tool call") + \
            ": the input checkpoint is passed on unchanged"
        return write_stage(out, StageResult(stage="rs", model_dir=out / "model",
                                            checkpoint_sha256=checkpoint_sha256(out / "model"), metrics=metrics))
    mixed = mix_rows(rs_rows, sft_rows, config.mix_ratio, config.seed)
    metrics["mix"] = {"rs_rows": len(rs_rows), "sft_rows": len(mixed) - len(rs_rows)}
    res = train_sft(model_dir, mixed, eval_rows, config, out, resume=resume, progress=progress, stage="rs")
    return write_stage(out, res.model_copy(update={"metrics": {**res.metrics, **metrics}}))
