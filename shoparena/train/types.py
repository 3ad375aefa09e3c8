"""The shared vocabulary of the training stages: what every stage's config has in common and what every stage
returns. Stage-specific configs subclass :class:`StageConfig` in their own module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = ["LearningRate", "LoraConfig", "Scheduler", "StageConfig", "StageResult", "ToolProfile"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

LearningRate = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A learning rate as every stage config takes it (a recipe's value is input): finite and > 0."""


def _known_tools(v: tuple[str, ...] | None) -> tuple[str, ...] | None:
    from shoparena.env.output import known_tools

    if v is None:
        return v
    unknown = sorted(set(v) - known_tools())
    if not v or unknown or len(set(v)) != len(v):
        raise ValueError("tools must be distinct registered tool names"
                         + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return v


ToolProfile = Annotated[tuple[str, ...] | None, AfterValidator(_known_tools)]
"""A stage's tool profile (rows offering exactly these tools; ``None``: every row): distinct registered names."""


class LoraConfig(BaseModel):
    """LoRA adapter settings (docs/training.md §4.5: always explicit targets; PEFT's default trains q/v only)."""

    model_config = _FROZEN

    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: tuple[str, ...] | str = "all-linear"


Scheduler = Literal["linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                    "inverse_sqrt"]
"""The learning-rate schedules a stage may name (transformers' ``SchedulerType`` values that need no extra
arguments)."""


class StageConfig(BaseModel):
    """Settings every stage has. ``lora=None`` means full fine-tuning. ``max_steps`` bounds a stage (CPU recipes);
    ``None`` runs ``epochs`` over the data. How these become the trainer's arguments (precision, gradient
    checkpointing, seeds, checkpoints, logs) is decided in one place, :func:`shoparena.train.trainer.trainer_args`."""

    model_config = _FROZEN

    seed: int = 0
    learning_rate: LearningRate = 1e-4
    epochs: float = Field(1.0, gt=0)
    max_steps: int | None = Field(None, ge=1)
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    max_length: int = Field(2048, ge=16)
    lora: LoraConfig | None = Field(default_factory=LoraConfig)
    logging_steps: int = Field(1, ge=1)
    save_steps: int = Field(10, ge=1)
    """Checkpoint every N optimiser steps (``--resume`` continues from the last one)."""
    warmup_ratio: float = Field(0.0, ge=0.0, lt=1.0)
    lr_scheduler: Scheduler = "linear"
    bf16: bool | None = None
    """bf16 mixed precision. ``None``: bf16 weights on a GPU, fp32 on the CPU. ``True``: bf16 weights on a GPU; on the
    CPU fp32 weights under bf16 autocast (opt-in: about 1.7x fp32's tokens/s on a CPU with AVX512-BF16,
    ``bench/train.py --stage precision``; slower on CPUs without it). ``False``: fp32 everywhere."""
    gradient_checkpointing: bool | None = None
    """``None``: on a GPU only."""
    full_determinism: bool = False
    """``enable_full_determinism`` (GPU bit-exactness at a cost; CPU runs are deterministic without it)."""


class StageResult(BaseModel):
    """What a stage wrote and measured; saved as ``<out_dir>/stage.json``."""

    model_config = _FROZEN

    stage: str
    model_dir: Path
    """The merged checkpoint the next stage (or evaluation) loads: ``hf:<model_dir>``."""
    checkpoint_sha256: str
    """Hash over the checkpoint's weight files (same seed + data → same hash on CPU)."""
    metrics: dict[str, Any] = Field(default_factory=dict)
    """Losses, rewards, counts: ``train_loss``, ``eval_loss``, ``loss_first`` / ``loss_last``, …"""
    steps: int = 0
    tokens_trained: int = 0
    seconds: float = 0.0
    tokens_per_s: float | None = None
    resumed_from: str | None = None
    key_sha256: str | None = None
    """What the stage was made from: hash of its config, its input checkpoint and the corpus
    (:func:`shoparena.train.checkpoint.stage_key`); ``--resume`` reuses the stage only when it still matches."""
