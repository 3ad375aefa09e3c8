"""Train one stage twice from the same inputs and compare the checkpoints' bytes.

The same base checkpoint, the same corpus rows, the same recipe section and the same seed, trained into two fresh
directories one after the other in this process: a deterministic trainer gives the same weight files, so the same
``checkpoint_sha256`` (:func:`shoparena.train.checkpoint.checkpoint_sha256`, the hash every stage records and
``train --resume`` re-checks). Prints both hashes, the steps and seconds of each run, and ``SAME`` or
``DIFFERENT``; exits 1 when they differ, 0 when they are the same, and with the README's exit codes (``error:`` and
``hint:`` lines) on bad input. Writes ``same_bytes.json`` (the figures) beside the two runs.

    OMP_NUM_THREADS=1 python scripts/same_bytes.py --base /path/smollm2-135m --corpus runs/corpus8s \\
        --recipe cpu-mini --stage sft --max-steps 6 --out /tmp/same-bytes

Only ``sft`` is supported: the later stages sample from the policy (llama.cpp, a teacher), which this check is not
about.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

STAGES = ("sft",)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, type=Path, help="the base checkpoint directory (config.json inside)")
    p.add_argument("--corpus", required=True, type=Path, help="a corpus directory (sft_train.jsonl, sft_eval.jsonl)")
    p.add_argument("--recipe", required=True, help="a recipe name (cpu-mini, tiny, …) or a recipe file")
    p.add_argument("--stage", default="sft", choices=STAGES, help="the stage to train (its recipe section)")
    p.add_argument("--max-steps", type=int, default=None, help="override the section's max_steps (> 0)")
    p.add_argument("--out", required=True, type=Path, help="a new or empty directory: the runs go to a/ and b/")
    return p


def _fail(message: str, hint: str | None, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    return code


def compare(base: Path, corpus: Path, recipe: str, stage: str, out: Path, max_steps: int | None) -> dict[str, Any]:
    """Train ``stage`` of ``recipe`` from ``base`` on ``corpus`` into ``out/a`` and ``out/b``; the figures of both
    runs and whether their checkpoints hash the same."""
    from shoparena.corpus.export.common import read_jsonl_rows
    from shoparena.errors import ConfigError, NotFoundError
    from shoparena.train.checkpoint import checkpoint_sha256
    from shoparena.train.recipe import load_recipe
    from shoparena.train.sft import train_sft

    if max_steps is not None and max_steps < 1:
        raise ConfigError(f"--max-steps {max_steps}: must be at least 1")
    if not (base / "config.json").is_file():
        raise NotFoundError(f"--base {base}: no checkpoint there (config.json missing)",
                            hint="pass a model directory, e.g. one `shoparena models prepare` wrote")
    train_file, eval_file = corpus / "sft_train.jsonl", corpus / "sft_eval.jsonl"
    if not train_file.is_file():
        raise NotFoundError(f"--corpus {corpus}: no sft_train.jsonl", hint="build one with `shoparena corpus build`")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} is not a new or empty directory",
                          hint="both runs must start from nothing: choose another --out")
    section = getattr(load_recipe(recipe)[0], stage)
    config = section.model_copy(update={"max_steps": max_steps}) if max_steps is not None else section
    train_rows = read_jsonl_rows(train_file)
    eval_rows = read_jsonl_rows(eval_file) if eval_file.is_file() else []
    runs: dict[str, dict[str, Any]] = {}
    for name in ("a", "b"):
        t0 = time.perf_counter()
        result = train_sft(base, train_rows, eval_rows, config, out / name, stage=stage)
        runs[name] = {"sha256": checkpoint_sha256(result.model_dir), "steps": result.steps,
                      "seconds": round(time.perf_counter() - t0, 1), "train_seconds": result.seconds,
                      "loss_last": result.metrics.get("loss_last")}
    body = {"base": str(base), "corpus": str(corpus), "recipe": recipe, "stage": stage,
            "seed": config.seed, "max_steps": config.max_steps, "bf16": getattr(config, "bf16", None),
            "train_rows": len(train_rows), "eval_rows": len(eval_rows), "runs": runs,
            "same": runs["a"]["sha256"] == runs["b"]["sha256"]}
    (out / "same_bytes.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return body


def main(argv: list[str] | None = None) -> int:
    """Run the comparison (module docstring); the exit code."""
    args = _parser().parse_args(argv)
    from shoparena.errors import ShopArenaError

    try:
        body = compare(args.base, args.corpus, args.recipe, args.stage, args.out, args.max_steps)
    except ShopArenaError as exc:
        return _fail(exc.message, exc.hint, exc.exit_code)
    for name, run in body["runs"].items():
        print(f"{name}: sha256 {run['sha256']}  steps {run['steps']}  {run['seconds']:.1f} s "
              f"(train {run['train_seconds']:.1f} s)")
    print("SAME" if body["same"] else "DIFFERENT")
    return 0 if body["same"] else 1


if __name__ == "__main__":
    run_script(main)
