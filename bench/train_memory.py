"""Peak memory and time of one LoRA training step against the row length, with and without gradient checkpointing.

    python bench/train_memory.py --model DIR [--lengths 1024,2048,4096] [--threads 1] [--json]

What a CPU stage holds at its peak decides how many stages one machine can train side by side. Each configuration
runs in a fresh subprocess (peak RSS is per process): the checkpoint loaded in fp32 as the stages load it on a CPU,
LoRA r 16 / alpha 32 on all linear layers (the recipes' adapter), bf16 autocast (``bf16: true`` on a CPU), then two
optimizer steps (AdamW) on one row of L tokens with every token in the loss; the second step is timed. Prints, per
configuration, the process's peak RSS, the RSS after loading, and the step's wall and CPU seconds; ``--json`` prints
one object whose ``results`` rows hold ``{length, checkpointing, peak_rss_mb, loaded_rss_mb, step_s, step_cpu_s}``.
The row is random token ids from a seeded generator: memory and time do not depend on which tokens they are.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _one(model_dir: str, length: int, checkpointing: bool, threads: int) -> dict[str, object]:
    """One configuration, in this process: load, adapt, two steps; the figures of the second."""
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model

    from shoparena.train.clock import rss_mib  # the stages' own reading of the resident set

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    if checkpointing:  # as the trainer does it for a PEFT model
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    loaded = rss_mib()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))
    step_s = step_cpu = 0.0
    for _ in range(2):
        wall, cpu = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step_s, step_cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"length": length, "checkpointing": checkpointing, "peak_rss_mb": round(peak),
            "loaded_rss_mb": loaded, "step_s": round(step_s, 2), "step_cpu_s": round(step_cpu, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a prepared checkpoint (shoparena models prepare smollm2-135m)")
    ap.add_argument("--lengths", default="1024,2048,4096")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("LENGTH", "CHECKPOINTING"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (Path(args.model) / "config.json").is_file():
        print(f"error: no checkpoint at {args.model}\nhint: shoparena models prepare smollm2-135m --out DIR",
              file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(_one(args.model, int(args.child[0]), args.child[1] == "1", args.threads)))
        return 0
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 2 or args.threads < 1:
        print("error: --lengths are integers ≥ 2, --threads ≥ 1\nhint: see --help", file=sys.stderr)
        return 2
    rows = []
    for length in lengths:
        for checkpointing in (False, True):
            done = subprocess.run([sys.executable, __file__, "--model", args.model, "--threads", str(args.threads),
                                   "--child", str(length), "1" if checkpointing else "0"],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["killed"])[-1]
                rows.append({"length": length, "checkpointing": checkpointing, "error": tail})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            if not args.json:
                print(json.dumps(rows[-1]), flush=True)
    if args.json:
        print(json.dumps({"model": args.model, "threads": args.threads, "results": rows}))
    failed = [r for r in rows if "error" in r]
    if failed:  # a configuration that died (out of memory, a model that does not load) is not a figure
        print(f"error: {len(failed)} of {len(rows)} configurations failed; the first: {failed[0]['error']}\n"
              "hint: each row says why; out of memory: lower --lengths; a model that does not load: check --model",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_script(main)
