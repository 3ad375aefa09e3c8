"""Stage 1 (and the trainer of stages 2–3): supervised fine-tuning over TRL ``SFTTrainer`` on pre-tokenised samples
(:mod:`shoparena.train.format`: ``input_ids`` + ``assistant_masks``, every mask validated), LoRA with explicit
targets (PEFT) or full fine-tuning, checkpoints every ``save_steps`` and ``resume`` from the last one, a learning
rate chosen by held-out loss (``lr_sweep``), the adapter merged into a plain checkpoint at ``out_dir/model``.

The helpers every stage shares (checkpoint hash, ``stage.json``, LoRA config, last checkpoint) live in
:mod:`shoparena.train.checkpoint`; this module owns the per-step log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from shoparena.errors import ConfigError, DataError
from shoparena.llm.compact import FORMAT_FILE, CompactConfig
from shoparena.train.checkpoint import (
    checkpoint_sha256,
    checkpoint_step,
    import_torch_stack,
    last_checkpoint,
    load_stage,
    peft_config,
    write_stage,
)
from shoparena.train.format import FormatConfig, encode_rows, tool_names
from shoparena.train.trainer import (
    LOGGER,
    StageProgress,
    model_dtype,
    quiet,
    quiet_datasets,
    trainer_args,
    trainer_callbacks,
)
from shoparena.train.types import LearningRate, StageConfig, StageResult, ToolProfile

__all__ = [
    "SFTConfig", "copy_checkpoint", "in_profile", "train_sft",
]

class SFTConfig(StageConfig):
    """Stage-1 settings (docs/training.md §3: LR sweep {1e-5, 3e-5, 1e-4} by held-out ``eval_loss``, one epoch)."""

    lr_sweep: tuple[LearningRate, ...] | None = None
    """One run per learning rate (each finite and > 0, as ``learning_rate``); the lowest held-out ``eval_loss``
    wins (``learning_rate`` is ignored then)."""
    truncation: Literal["drop", "keep_start"] = "drop"
    max_eval_rows: int | None = Field(None, ge=1)
    """Held-out rows used for ``eval_loss`` (the first N; ``None`` = all)."""
    compact: CompactConfig | None = None
    """Compact observation rendering (short CPU contexts); saved with the checkpoint so evaluation uses it too."""
    system: Literal["row", "harness"] = "row"
    """``harness``: rows without a system turn are trained under the harness's native system prompt, the one every
    native-protocol episode (``react``) is prompted with (:attr:`shoparena.train.format.FormatConfig.system`)."""
    bf16: bool = False
    """As :attr:`StageConfig.bf16`, but off unless asked for: SFT stays fp32 on a GPU too unless the recipe says so."""
    gradient_checkpointing: bool = False
    tools: ToolProfile = None
    """Train (and measure ``eval_loss``) only on rows that offer exactly these tools: the tool profile the model will
    be evaluated with (e.g. ShoppingBench's four for ``react``). ``None``: every row. Rows left out are counted as
    ``off_profile``."""

    turn_tokens: int | None = Field(None, ge=16)
    """Shorten the reasoning of assistant turns longer than this many tokens (the serving cap per turn, the
    checkpoint's ``max_new_tokens``) until they fit; rows that cannot are dropped
    (:attr:`shoparena.train.format.FormatConfig.turn_tokens`)."""

    callless_turns: Literal["drop", "keep"] = "drop"
    """Rows with a trained assistant turn that makes no tool call while the episode is open (it ends a thought without
    its call: the think-then-stop turn evaluation counts, docs/results.md §3). ``drop``: left out before training
    (held-out rows too); ``keep``: trained as they are. Counted either way in the stage's ``callless_turns``,
    ``train_counts`` and ``eval_counts`` metrics, and logged
    (:attr:`shoparena.train.format.FormatConfig.callless_turns`).
    A closing turn after a ``terminate`` call is not one: the episode is over there, no call is due."""

    def format(self) -> FormatConfig:
        return FormatConfig(max_length=self.max_length, truncation=self.truncation, compact=self.compact,
                            system=self.system, turn_tokens=self.turn_tokens, callless_turns=self.callless_turns)


# ── shared stage helpers ─────────────────────────────────────────────────────────────────────────────────────


def copy_checkpoint(src: Path, dest: Path) -> None:
    """A plain copy of a checkpoint directory (stages that change nothing pass their input on)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)


def read_step_log(path: Path) -> tuple[list[dict[str, Any]], tuple[float, float]]:
    """The step log, one record a step (a resumed run rewrites the steps after its checkpoint, and the later line
    wins), and the CPU and wall seconds the stage's earlier processes spent up to the last step each logged: the
    largest cumulative figures of any line, the steps a killed process made after its last checkpoint included (that
    work was done, then redone)."""
    by_step: dict[int, dict[str, Any]] = {}
    cpu = wall = 0.0
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                by_step[rec["step"]] = rec
                cpu, wall = max(cpu, rec.get("cpu_s") or 0.0), max(wall, rec.get("wall_s") or 0.0)
    return [by_step[k] for k in sorted(by_step)], (cpu, wall)


def _mean_loss(log: Sequence[dict[str, Any]], steps: int) -> float | None:
    """The mean per-step training loss over ``steps`` from the step log (each line's loss weighted by the steps it
    covers), the figure an uninterrupted trainer reports; None unless the log covers steps 1 to ``steps``. A resumed
    trainer's own figure adds only the steps since its checkpoint and divides by all of them."""
    if not log or log[-1]["step"] != steps or steps <= 0:
        return None
    total, prev = 0.0, 0
    for rec in log:
        if rec.get("loss") is None:
            return None
        total += rec["loss"] * (rec["step"] - prev)
        prev = rec["step"]
    return total / steps


# ── the trainer ──────────────────────────────────────────────────────────────────────────────────────────────


def _make_callbacks(transformers: Any, log_path: Path, tokens_before: float = 0,
                    spent: tuple[float, float] = (0.0, 0.0)) -> Any:
    """The step logger. ``tokens_before`` is the run's input-token count at the checkpoint a resumed process starts
    from: TRL (1.16) counts ``num_tokens`` from zero in every process, so the log adds it to stay cumulative, the
    same numbers as an uninterrupted run. ``spent``: the CPU and wall seconds of the stage's earlier processes
    (:func:`read_step_log`), to which each line's cumulative ``cpu_s`` and ``wall_s`` add this process's."""

    class _StepLog(transformers.TrainerCallback):
        """One JSON line per logged step: loss, learning rate, tokens/s (input tokens since the last line)."""

        def __init__(self) -> None:
            self.t = self.t0 = time.perf_counter()
            self.c0 = time.process_time()
            self.tokens = None

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if not logs or "loss" not in logs:
                return
            now = time.perf_counter()
            tokens = logs.get("num_tokens")
            if tokens is not None:
                tokens += tokens_before
            rate = None
            if tokens is not None and self.tokens is not None and now > self.t:
                rate = round((tokens - self.tokens) / (now - self.t), 1)
            self.t, self.tokens = now, tokens
            rec = {"step": state.global_step, "loss": logs["loss"], "learning_rate": logs.get("learning_rate"),
                   "grad_norm": logs.get("grad_norm"), "num_tokens": tokens, "tokens_per_s": rate,
                   "cpu_s": round(spent[0] + time.process_time() - self.c0, 3),
                   "wall_s": round(spent[1] + now - self.t0, 3)}
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")

    return _StepLog()


def _train_once(model_dir: Path, train: list[dict[str, list[int]]], evals: list[dict[str, list[int]]],
                config: SFTConfig, lr: float, run_dir: Path, *, resume: bool, progress: StageProgress | None,
                callbacks: Sequence[Any], stage: str) -> dict[str, Any]:
    _, transformers = import_torch_stack()
    import trl
    from datasets import Dataset

    quiet_datasets()
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir = run_dir / "checkpoints"
    log_path = run_dir / "log.jsonl"
    last = last_checkpoint(run_dir, before=config.max_steps) if resume else None
    if last is None:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        log_path.unlink(missing_ok=True)
    at = checkpoint_step(last) if last is not None else None  # the run's tokens up to there (TRL restarts at 0)
    before, spent = read_step_log(log_path)
    tokens_before = next((r["num_tokens"] or 0 for r in before if r["step"] == at), 0)
    transformers.set_seed(config.seed)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True,
                                                              dtype=model_dtype(config))
    args = trl.SFTConfig(**trainer_args(config, run_dir, learning_rate=lr), max_length=config.max_length,
                         per_device_eval_batch_size=config.batch_size, eval_strategy="no")
    what = f"train lr {lr:g}" if config.lr_sweep else "train"
    trainer = quiet(trl.SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(train),
        eval_dataset=Dataset.from_list(evals) if evals else None, processing_class=tokenizer,
        peft_config=peft_config(config),
        callbacks=trainer_callbacks(stage, progress, [_make_callbacks(transformers, log_path, tokens_before, spent),
                                                      *callbacks], what=what),
    ))
    t0, c0 = time.perf_counter(), time.process_time()
    out = trainer.train(resume_from_checkpoint=last)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    eval_loss = trainer.evaluate()["eval_loss"] if evals else None
    model = trainer.model
    if config.lora is not None:
        model = model.merge_and_unload()
    dest = run_dir / "model"
    shutil.rmtree(dest, ignore_errors=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    if config.compact is not None:
        (dest / FORMAT_FILE).write_text(json.dumps({"compact": config.compact.model_dump(mode="json")}) + "\n",
                                        encoding="utf-8")
    log, _ = read_step_log(log_path)
    tokens = log[-1]["num_tokens"] if log else None  # the whole run's, across resumes
    process_tokens = tokens - tokens_before if tokens is not None else None  # throughput of this process
    train_loss = _mean_loss(log, out.global_step)
    return {"lr": lr, "eval_loss": eval_loss, "train_loss": out.training_loss if train_loss is None else train_loss,
            "steps": out.global_step, "loss_first": log[0]["loss"] if log else None,
            "loss_last": log[-1]["loss"] if log else None, "losses": [r["loss"] for r in log], "seconds": seconds,
            "cpu_seconds": cpu_seconds, "cpu_before": spent[0], "wall_before": spent[1],
            "num_tokens": tokens, "process_tokens": process_tokens, "resumed_from": last, "model": dest}


def in_profile(rows: Sequence[dict[str, Any]], tools: Sequence[str] | None) -> tuple[list[dict[str, Any]], int]:
    """The rows whose tools are exactly ``tools`` (all rows when ``None``), and how many were left out. A row whose
    tools do not parse is left out too (rendering would drop it anyway)."""
    if tools is None:
        return list(rows), 0
    want = tuple(sorted(tools))
    kept = []
    for row in rows:
        try:
            names = tool_names(row.get("tools"))
        except DataError:
            continue
        if names == want:
            kept.append(row)
    return kept, len(rows) - len(kept)


def require_profile(rows: Sequence[dict[str, Any]], tools: Sequence[str] | None,
                    stage: str) -> tuple[list[dict[str, Any]], int]:
    """:func:`in_profile`, and one :class:`DataError` naming ``stage`` when a profile leaves none of the rows."""
    kept, off = in_profile(rows, tools)
    if off and not kept:
        raise DataError(f"no {stage} row offers exactly the tools {list(tools or ())}",
                        hint=f"the recipe's {stage.lower()}.tools must be a tool profile of the corpus's rows")
    return kept, off


def train_sft(model_dir: str | os.PathLike[str], train_rows: Sequence[dict[str, Any]],
              eval_rows: Sequence[dict[str, Any]], config: SFTConfig, out_dir: str | os.PathLike[str], *,
              resume: bool = False, progress: StageProgress | None = None, callbacks: Sequence[Any] = (),
              stage: str = "sft") -> StageResult:
    """Fine-tune ``model_dir`` on ``train_rows`` (``{"messages", "tools"}``); write the merged checkpoint to
    ``out_dir/model`` and ``out_dir/stage.json``. ``resume``: a finished stage is returned as is, an interrupted
    one continues from its last checkpoint. ``progress``: a bar per training run; ``callbacks``: extra
    ``transformers`` trainer callbacks."""
    out = Path(out_dir)
    if resume and (done := load_stage(out)) is not None:
        return done
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"no model checkpoint at {model_dir} (config.json missing)")
    _, transformers = import_torch_stack()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    fmt = config.format()
    train_rows, off_train = in_profile(train_rows, config.tools)
    eval_rows, off_eval = in_profile(eval_rows, config.tools)
    train = encode_rows(tokenizer, train_rows, fmt)
    evals = encode_rows(tokenizer, list(eval_rows)[: config.max_eval_rows], fmt)
    train.counts["off_profile"], evals.counts["off_profile"] = off_train, off_eval
    for what, enc in (("train", train), ("eval", evals)):
        if enc.counts["rows_callless"]:
            logging.getLogger(LOGGER).info(
                "%s: %d %s rows have a trained assistant turn without a tool call (%d turns): %s", stage,
                enc.counts["rows_callless"], what, enc.counts["callless_turns_trained"],
                "dropped" if config.callless_turns == "drop" else "kept (callless_turns: keep)")
    if not train.samples:
        hint = "raise max_length, use truncation: keep_start, or compact observations"
        if train.counts["dropped_callless_turn"]:
            hint += "; rows whose assistant turns make no tool call are dropped unless callless_turns: keep"
        raise DataError(f"no trainable SFT rows ({dict(train.counts)})", hint=hint)
    out.mkdir(parents=True, exist_ok=True)
    lrs = config.lr_sweep or (config.learning_rate,)
    runs = []
    for lr in lrs:
        run_dir = out if len(lrs) == 1 else out / "sweep" / f"lr-{lr:g}"
        runs.append(_train_once(model_dir, train.samples, evals.samples, config, lr, run_dir, resume=resume,
                                progress=progress, callbacks=callbacks, stage=stage))
    best = min(runs, key=lambda r: (r["eval_loss"] is None, r["eval_loss"] or 0.0)) if len(runs) > 1 else runs[0]
    if best["model"] != out / "model":
        copy_checkpoint(best["model"], out / "model")
    seconds = sum(r["seconds"] for r in runs)
    trained = train.counts["trained_tokens"]
    steps_per_epoch = max(1, -(-len(train.samples) // (config.batch_size * config.grad_accum)))
    epochs_seen = best["steps"] / steps_per_epoch
    tokens_trained = round(trained * epochs_seen)
    metrics = {k: best[k] for k in ("lr", "eval_loss", "train_loss", "loss_first", "loss_last", "losses")}
    # CPU time of the train loop (all threads): of every process the stage took, interrupted ones included, and of
    # this one; wall time likewise
    metrics["train_cpu_s"] = round(best["cpu_before"] + best["cpu_seconds"], 3)
    metrics["train_cpu_s_process"] = round(best["cpu_seconds"], 3)
    metrics["train_wall_s"] = round(best["wall_before"] + best["seconds"], 3)
    metrics["train_tokens_seen"] = best["num_tokens"]
    metrics["callless_turns"] = {"rule": config.callless_turns, "train_rows": train.counts["rows_callless"],
                                 "eval_rows": evals.counts["rows_callless"]}
    metrics.update(train_counts=dict(train.counts), eval_counts=dict(evals.counts),
                   sweep=[{"lr": r["lr"], "eval_loss": r["eval_loss"], "train_loss": r["train_loss"]} for r in runs])
    rate = best["process_tokens"] / best["seconds"] if best["process_tokens"] and best["seconds"] else None
    result = StageResult(
        stage=stage, model_dir=out / "model", checkpoint_sha256=checkpoint_sha256(out / "model"), metrics=metrics,
        steps=best["steps"], tokens_trained=tokens_trained, seconds=round(seconds, 3),
        tokens_per_s=round(rate, 1) if rate else None, resumed_from=best["resumed_from"],
    )
    return write_stage(out, result)
