"""One GRPO rollout batch, sampled through each stage-5 sampler side by side.

    python bench/grpo_rollouts.py --model DIR [--samplers hf,llamacpp:F16,llamacpp:F32,llamacpp:Q8_0] [--work DIR]

K = 4 episodes of one problem with the ``cpu-mini`` recipe's ``grpo:`` settings (10 turns, 256 tokens a turn, 3,072
tokens an episode, temperature 1.0, the harness's system turn, the four ``react`` tools, tool results compacted to
2 products × 800 characters) from ``--model`` with a fresh LoRA (r 16, all linear layers). ``hf`` samples with the
model itself in lockstep (``shoparena.train.rollout.run_token_episodes``); ``llamacpp:DTYPE`` exports the merged
policy to a GGUF and samples through the batched llama.cpp engine (``shoparena.train.rollout_llamacpp``). The problem
comes from a small seeded world (``shoparena.corpus.testing.seed_world``) built under ``--work`` on first use.
Each path draws its own samples, so compare sampled tokens per second, not wall time. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOOLS = ["find_product", "view_product_information", "recommend_product", "terminate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a prepared checkpoint (shoparena models prepare smollm2-135m)")
    ap.add_argument("--samplers", default="hf,llamacpp:F16")
    ap.add_argument("--work", default=None, help="where the seeded world is built (default: a temporary directory)")
    ap.add_argument("--problem", type=int, default=0)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    samplers = args.samplers.split(",")
    known = {"hf", "llamacpp:F32", "llamacpp:F16", "llamacpp:Q8_0"}
    if not (Path(args.model) / "config.json").is_file() or not set(samplers) <= known:
        print(f"error: --model needs a prepared checkpoint and --samplers names from {', '.join(sorted(known))}\n"
              "hint: shoparena models prepare smollm2-135m --out DIR", file=sys.stderr)
        return 2
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.corpus.build import build_corpus
    from shoparena.corpus.testing import seed_world
    from shoparena.llm.compact import CompactConfig
    from shoparena.train.rollout import RolloutEnv, run_token_episodes
    from shoparena.train.rollout_llamacpp import LlamaCppSampler
    from shoparena.train.sft import require_profile

    model_dir = Path(args.model)
    root = Path(args.work or tempfile.mkdtemp(prefix="grpo-bench-"))
    if not (root / "corpus" / "grpo_train.jsonl").is_file():
        world = seed_world(root)
        build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog, problems=world.problems_file)
    rows = [json.loads(x) for x in (root / "corpus" / "grpo_train.jsonl").read_text().splitlines() if x]
    rows, _ = require_profile(rows, TOOLS, "GRPO")
    env = RolloutEnv(rows, root / "cat", max_turns=10, system="harness",
                     compact=CompactConfig(max_items=2, max_chars=800))
    row = rows[args.problem]
    tok = AutoTokenizer.from_pretrained(model_dir)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear")).eval()
    settings = {"max_completion_length": 3072, "turn_max_tokens": 256, "temperature": 1.0, "top_p": 1.0, "w": 0.5}
    print(f"{'sampler':14} {'wall s':>7} {'sampled':>7} {'tok/s':>6} {'export s':>8}")
    for name in samplers:
        sampler = None
        if name.startswith("llamacpp"):
            sampler = LlamaCppSampler(model_dir, root / "work", dtype=name.split(":")[1], seed=args.seed,
                                      threads=torch.get_num_threads())
        torch.manual_seed(args.seed)
        started = time.perf_counter()
        episodes = run_token_episodes(model, tok, env, [row] * 4, sampler=sampler, **settings)
        wall = time.perf_counter() - started
        sampled = sum(sum(e.env_mask) for e in episodes)
        export = "-"
        if sampler is not None:
            export = f"{sampler.stats[-1]['export_s']:.1f}"
            sampler.close()
        print(f"{name:14} {wall:>7.1f} {sampled:>7} {sampled / wall:>6.1f} {export:>8}", flush=True)
    return 0


if __name__ == "__main__":
    run_script(main)
