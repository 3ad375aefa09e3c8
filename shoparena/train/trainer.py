"""How every stage's TRL trainer runs, decided in one place: precision (bf16 weights on a GPU, opt-in bf16 autocast
on the CPU), gradient checkpointing, seeds, steps, checkpoints, the learning-rate schedule, and what the trainer
says while it runs. SFT (and stages 2-3, which train through it), KTO and GRPO all build their TRL config from
:func:`trainer_args` and their callbacks from :func:`trainer_callbacks`.

Trainers do not print: their per-step log dicts go to the ``shoparena.train`` logger (a command routes it to the
run's log file), and their progress, when a :class:`StageProgress` is given, to one bar per phase of a stage."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from shoparena.train.clock import rss_mib
from shoparena.train.types import StageConfig

__all__ = ["LOGGER", "BarFactory", "StageProgress", "model_dtype", "precision", "quiet", "quiet_datasets",
           "release_memory", "trainer_args", "trainer_callbacks"]

LOGGER = "shoparena.train"
"""The logger that carries every trainer's per-step log (JSON), one record per logged step."""

BarFactory = Callable[[str, int | None], contextlib.AbstractContextManager[Callable[[int], None]]]
"""``bar(description, total)``: a context manager yielding ``advance(n)`` (``shoparena.cli._common.progress_bar``
has this shape)."""


def release_memory() -> tuple[int, int] | None:
    """Hand the memory a finished stage freed back to the system: collect garbage, empty the CUDA cache, and on
    glibc trim every malloc arena (``malloc_trim(0)``). Without the trim a process running several stages keeps
    each stage's freed tensors in its heap: glibc serves tensors below its (dynamic, up to 32 MiB) mmap threshold
    from the heap and returns their pages only at its top, so one SmolLM2 SFT stage leaves about 5.6 GB resident
    that the trim brings to 0.7 GB, and five stages in one process ran out of a 23 GB machine's memory.
    Returns the resident set in MiB ``(before, after)``, or ``None`` where it cannot be read (not Linux)."""
    import ctypes
    import ctypes.util
    import gc

    before = rss_mib()
    gc.collect()
    torch = sys.modules.get("torch")  # a process that never loaded torch has no cache to empty
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    name = ctypes.util.find_library("c")
    if name is not None:
        with contextlib.suppress(OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
            ctypes.CDLL(name).malloc_trim(0)
    after = rss_mib()
    return None if before is None or after is None else (before, after)


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def precision(config: StageConfig, *, cuda: bool | None = None) -> tuple[bool, bool]:
    """``(bf16, gradient_checkpointing)`` of a stage: a recipe's explicit value, else on a GPU only
    (:attr:`StageConfig.bf16`). ``bf16`` on the CPU means bf16 autocast over fp32 weights."""
    gpu = _cuda() if cuda is None else cuda
    bf16 = gpu if config.bf16 is None else config.bf16
    checkpointing = gpu if config.gradient_checkpointing is None else config.gradient_checkpointing
    return bf16, checkpointing


def model_dtype(config: StageConfig | None) -> Any:
    """The dtype a stage loads its input checkpoint in: bf16 on a GPU when the stage trains in bf16, else fp32 (the
    CPU's autocast keeps fp32 weights). ``None``: a stage without a config (bf16 on a GPU)."""
    import torch

    gpu = _cuda()
    bf16 = gpu if config is None else precision(config, cuda=gpu)[0]
    return torch.bfloat16 if (bf16 and gpu) else torch.float32


def trainer_args(config: StageConfig, out_dir: Path, *, learning_rate: float | None = None) -> dict[str, Any]:
    """The keyword arguments every TRL config of ours gets (``SFTConfig``, ``KTOConfig``, ``GRPOConfig``): CPU or
    GPU and precision, gradient checkpointing, seeds (the model's and the data order's), steps, the schedule,
    checkpoints every ``save_steps`` under ``out_dir/checkpoints``, logging every ``logging_steps`` to no tracker and
    without the trainer's own progress bar. ``learning_rate`` overrides the config's (one run of an LR sweep)."""
    gpu = _cuda()
    bf16, checkpointing = precision(config, cuda=gpu)
    return {
        "output_dir": str(Path(out_dir) / "checkpoints"), "seed": config.seed, "data_seed": config.seed,
        "full_determinism": config.full_determinism,
        "learning_rate": config.learning_rate if learning_rate is None else learning_rate,
        "lr_scheduler_type": config.lr_scheduler, "warmup_steps": config.warmup_ratio,  # < 1: a share of the steps
        "num_train_epochs": config.epochs, "max_steps": config.max_steps if config.max_steps is not None else -1,
        "per_device_train_batch_size": config.batch_size, "gradient_accumulation_steps": config.grad_accum,
        "logging_steps": config.logging_steps, "save_strategy": "steps", "save_steps": config.save_steps,
        "report_to": "none", "use_cpu": not gpu, "bf16": bf16, "gradient_checkpointing": checkpointing,
        "dataloader_num_workers": 0, "disable_tqdm": True,
    }


class StageProgress:
    """The progress of one stage: one bar per phase (its sampling through the harness, each of its training runs),
    made by ``bar`` (one open at a time; ``None``: no bars, the calls are no-ops)."""

    def __init__(self, stage: str, bar: BarFactory | None) -> None:
        self.stage = stage
        self._bar = bar
        self._stack = contextlib.ExitStack()

    def phase(self, what: str, total: int | None) -> Callable[[int], None] | None:
        """Open the bar of a phase (closing the previous one); ``advance(n)``, or None without bars."""
        self.close()
        if self._bar is None:
            return None
        return self._stack.enter_context(self._bar(f"{self.stage}: {what}", total))

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> StageProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def trainer_callbacks(stage: str, progress: StageProgress | None, extra: Sequence[Any] = (),
                      what: str = "train") -> list[Any]:
    """The callbacks every trainer of ours runs with: its per-step log to the :data:`LOGGER` logger, a progress bar
    over its optimiser steps (with ``progress``), then ``extra``."""
    from transformers import TrainerCallback

    class _Log(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kw: Any) -> None:
            if logs:
                logging.getLogger(LOGGER).info("%s step %d %s", stage, state.global_step,
                                               json.dumps(logs, default=str))

    class _Bar(TrainerCallback):
        def __init__(self) -> None:
            self.advance: Callable[[int], None] | None = None
            self.seen = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            assert progress is not None
            self.advance, self.seen = progress.phase(what, state.max_steps or None), 0

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.advance is not None and state.global_step > self.seen:
                self.advance(state.global_step - self.seen)
            self.seen = state.global_step

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            assert progress is not None
            progress.close()
            self.advance = None

    return [_Log(), *([_Bar()] if progress is not None else []), *extra]


def quiet(trainer: Any) -> Any:
    """``trainer`` without the callbacks that print its log dicts or draw its own bar (they go to the log and to
    :class:`StageProgress` instead)."""
    import transformers

    for cls in (transformers.PrinterCallback, transformers.ProgressCallback):
        trainer.remove_callback(cls)
    return trainer


def quiet_datasets() -> None:
    """No ``datasets`` progress bars (the trainers' tokenising ``map`` passes): they would draw on the console."""
    import datasets

    datasets.disable_progress_bars()
