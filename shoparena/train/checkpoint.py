"""What the TRL-backed stages (KTO, GRPO) share around the trainer: loading the stage's input checkpoint, the PEFT
adapter config, resuming from ``out_dir/checkpoints``, merging the adapter
into ``out_dir/model``, hashing the weights, and writing ``out_dir/stage.json``."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.seal import weights_sha256
from shoparena.train.trainer import trainer_args  # re-exported: its home is shoparena.train.trainer
from shoparena.train.types import StageConfig, StageResult

STAGE_FILE = "stage.json"

__all__ = [
    "checkpoint_sha256",
    "checkpoint_step",
    "import_torch_stack",
    "last_checkpoint",
    "load_model",
    "load_stage",
    "loss_metrics",
    "mark_stage_key",
    "peft_config",
    "save_stage",
    "stage_key",
    "stage_key_matches",
    "stage_model_dir",
    "trainer_args",
    "weights_changed",
    "write_stage",
]


def import_torch_stack() -> tuple[Any, Any]:
    """``(torch, transformers)``, or a :class:`ConfigError` naming the extra to install."""
    try:
        import peft  # noqa: F401
        import torch
        import transformers
        import trl  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"training needs torch, transformers, trl and peft ({exc.name} is not installed)",
                          hint="pip install 'shoparena[train]'") from exc
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    return torch, transformers


def load_model(model_dir: Path, config: StageConfig | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a plain transformers checkpoint in the dtype the stage trains in
    (:func:`shoparena.train.trainer.model_dtype`: fp32 on the CPU, bf16 on a GPU unless ``config`` says fp32)."""
    from shoparena.train.trainer import model_dtype

    _, transformers = import_torch_stack()
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise NotFoundError(f"no transformers checkpoint at {model_dir} (config.json missing)",
                            hint="pass the model/ directory a previous stage wrote, or build one")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if not tokenizer.chat_template:
        raise ConfigError(f"the tokenizer in {model_dir} has no chat template")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True,
                                                              dtype=model_dtype(config))
    return model, tokenizer


def peft_config(config: StageConfig) -> Any:
    """The PEFT ``LoraConfig`` with explicit targets (``docs/training.md`` §4.5), or None for full fine-tuning."""
    if config.lora is None:
        return None
    from peft import LoraConfig

    targets = config.lora.target_modules
    return LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
                      target_modules=targets if isinstance(targets, str) else list(targets), task_type="CAUSAL_LM")


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step N of a ``checkpoint-N`` directory; None for any other name."""
    tail = Path(path).name.removeprefix("checkpoint-")
    return int(tail) if tail.isdigit() and Path(path).name != tail else None


def last_checkpoint(out_dir: Path, before: int | None = None) -> str | None:
    """The newest complete ``checkpoints/checkpoint-N`` under ``out_dir`` (one with its ``trainer_state.json``;
    None when there is none). ``before``: the stage's ``max_steps`` — only a checkpoint short of it is resumed
    from, since a trainer resumed at its last step takes one more (a stage of 6 steps would end at 7, then 8)."""
    root = Path(out_dir) / "checkpoints"
    found = sorted((p for p in root.glob("checkpoint-*")
                    if checkpoint_step(p) is not None and (p / "trainer_state.json").is_file()
                    and (before is None or checkpoint_step(p) < before)),  # type: ignore[operator]
                   key=checkpoint_step) if root.is_dir() else []
    return str(found[-1]) if found else None


def checkpoint_sha256(model_dir: str | os.PathLike[str]) -> str:
    """sha256 over a checkpoint's weight files (names and bytes, sorted by name): the hash every stage records
    and ``--resume`` re-checks."""
    digest = weights_sha256(model_dir)
    if digest is None:
        raise DataError(f"{model_dir} holds no weight files (*.safetensors)")
    return digest


def write_stage(out_dir: Path, result: StageResult) -> StageResult:
    """Atomically write ``out_dir/stage.json``, its ``model_dir`` relative to ``out_dir`` (the stage directory can
    be moved or copied with its run); returns the result with ``model_dir`` absolute, as the next stage loads it."""
    from shoparena.artefact import relative_to

    model_dir = Path(result.model_dir).resolve()
    resumed = result.resumed_from  # the checkpoint it continued from: inside the stage directory too
    on_disk = result.model_copy(update={"model_dir": Path(relative_to(model_dir, out_dir)),
                                        "resumed_from": relative_to(resumed, out_dir) if resumed else None})
    tmp = out_dir / (STAGE_FILE + ".tmp")
    tmp.write_text(on_disk.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out_dir / STAGE_FILE)
    return result.model_copy(update={"model_dir": model_dir,
                                     "resumed_from": str(Path(resumed).resolve()) if resumed else None})


def stage_model_dir(out_dir: str | os.PathLike[str], recorded: str | os.PathLike[str]) -> Path:
    """Where the checkpoint a ``stage.json`` in ``out_dir`` records lies: relative to the stage directory; an absolute
    path (written before stage files recorded relative ones) that names another stage directory's ``model/`` is
    taken to mean this one's, so a copied run is checked against its own weights, never the original's."""
    from shoparena.artefact import resolve_recorded

    root = Path(out_dir).resolve()
    path = resolve_recorded(recorded, root)
    if Path(recorded).is_absolute() and path.parent != root and (root / path.name).exists():
        return root / path.name
    return path


KEY_FILE = "stage-key.txt"
"""Written when a stage starts: the key of what it is being made from (its checkpoints belong to that key)."""


def stage_key(stage: str, config: Any, input_sha256: str, corpus_sha256: str | None) -> str:
    """sha256 of everything a stage's result depends on besides the code: its name, its config (a pydantic model
    or a dict), the hash of its input checkpoint and the corpus manifest hash."""
    import json

    cfg = config.model_dump(mode="json") if hasattr(config, "model_dump") else config
    blob = json.dumps({"stage": stage, "config": cfg, "input": input_sha256, "corpus": corpus_sha256},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def stage_key_matches(out_dir: str | os.PathLike[str], key: str) -> bool:
    """Whether the stage directory's checkpoints were started for ``key`` (no key file: a fresh directory or one
    written before keys existed, which is trusted)."""
    path = Path(out_dir) / KEY_FILE
    try:
        return path.read_text(encoding="utf-8").strip() == key
    except FileNotFoundError:
        return True
    except OSError:
        return False


def mark_stage_key(out_dir: str | os.PathLike[str], key: str) -> None:
    from shoparena._io import atomic_write

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with atomic_write(Path(out_dir) / KEY_FILE, "w") as fh:
        fh.write(key + "\n")


def load_stage(out_dir: str | os.PathLike[str], key: str | None = None) -> StageResult | None:
    """A finished stage's result, or ``None`` when ``stage.json`` is missing, unreadable, its checkpoint's hash
    no longer matches, or (with ``key``) it was made from another config, input or corpus (so ``--resume`` reruns
    it). A result written before keys existed carries none and is trusted."""
    from shoparena.artefact import resolve_recorded

    path = Path(out_dir) / STAGE_FILE
    if not path.is_file():
        return None
    try:
        result = StageResult.model_validate_json(path.read_text(encoding="utf-8"))
        rf = result.resumed_from
        result = result.model_copy(update={
            "model_dir": stage_model_dir(out_dir, result.model_dir),
            "resumed_from": str(resolve_recorded(rf, Path(out_dir).resolve())) if rf else None})
        if key is not None and result.key_sha256 is not None and result.key_sha256 != key:
            return None
        if checkpoint_sha256(result.model_dir) != result.checkpoint_sha256:
            return None
    except (ValueError, OSError, DataError):
        return None
    return result


def weights_changed(out_dir: str | os.PathLike[str]) -> bool:
    """Whether the stage in ``out_dir`` says it finished (``stage.json``) but the weights under it no longer hash to
    what it recorded (edited, truncated, or missing): ``--resume`` trains such a stage again and says so."""
    path = Path(out_dir) / STAGE_FILE
    try:
        result = StageResult.model_validate_json(path.read_text(encoding="utf-8"))
        return checkpoint_sha256(stage_model_dir(out_dir, result.model_dir)) != result.checkpoint_sha256
    except FileNotFoundError:
        return False
    except (ValueError, OSError, DataError):
        return True


def loss_metrics(log_history: list[dict[str, Any]], key: str = "loss") -> dict[str, Any]:
    """``{key}_first`` / ``{key}_last`` / ``{key}_finite`` of a trainer's per-step log."""
    values = [float(e[key]) for e in log_history if key in e]
    if not values:
        return {}
    import math

    return {f"{key}_first": values[0], f"{key}_last": values[-1], f"{key}_finite": all(map(math.isfinite, values))}


def save_stage(stage: str, trainer: Any, tokenizer: Any, out_dir: Path, *, metrics: dict[str, Any],
               started: float, tokens: int, resumed_from: str | None) -> StageResult:
    """Merge the adapter (if any) into the weights, save ``out_dir/model``, write ``out_dir/stage.json``."""
    model = trainer.model
    model = trainer.accelerator.unwrap_model(model) if hasattr(trainer, "accelerator") else model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model_dir = Path(out_dir) / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    seconds = time.perf_counter() - started
    result = StageResult(stage=stage, model_dir=model_dir, checkpoint_sha256=checkpoint_sha256(model_dir),
                         metrics=metrics, steps=int(trainer.state.global_step), tokens_trained=tokens,
                         seconds=seconds, tokens_per_s=tokens / seconds if seconds > 0 and tokens else None,
                         resumed_from=resumed_from)
    return write_stage(Path(out_dir), result)
