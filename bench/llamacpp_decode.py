"""Raw llama.cpp decode rate against the number of sequences decoded together, no Python serving around it.

    python bench/llamacpp_decode.py --model DIR [--threads 1] [--seqs 1,2,4,8,16] [--context 1300] [--dtype Q8_0]

Exports the checkpoint to a GGUF (``shoparena.llm.gguf_export``), prefills one sequence of ``--context`` tokens in
512-token chunks (prefill tokens/s), copies it to ``max(--seqs)`` sequences of their own KV streams (the batched
engine's layout), then times ``llama_decode`` for one new token in each of N sequences at once: the median of 8
steps per N, as step milliseconds and aggregate tokens/s. Tells how much batching can buy on this CPU before any
sampling, tokenisation or scheduling: ``docs/results.md`` §8 reads it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a prepared checkpoint (shoparena models prepare smollm2-135m)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seqs", default="1,2,4,8,16")
    ap.add_argument("--context", type=int, default=1300)
    ap.add_argument("--dtype", default="Q8_0")
    args = ap.parse_args()
    if not (Path(args.model) / "config.json").is_file():
        print(f"error: no prepared checkpoint at {args.model}\nhint: shoparena models prepare smollm2-135m --out DIR",
              file=sys.stderr)
        return 2
    levels = [int(n) for n in args.seqs.split(",")]
    if args.threads < 1 or args.context < 2 or not levels or min(levels) < 1 or max(levels) > 64:
        print("error: --threads ≥ 1, --context ≥ 2, --seqs between 1 and 64\nhint: see --help", file=sys.stderr)
        return 2

    import llama_cpp
    from llama_cpp import _internals
    from llama_cpp._logger import set_verbose

    from shoparena.llm.gguf_export import export_gguf

    set_verbose(False)
    gguf = export_gguf(args.model, dtype=args.dtype)
    ll = llama_cpp
    ll.llama_backend_init()
    model = _internals.LlamaModel(path_model=str(gguf), params=ll.llama_model_default_params(), verbose=False)
    n_seq = max(levels)
    params = ll.llama_context_default_params()
    params.n_ctx, params.n_seq_max, params.kv_unified = 2048 * n_seq, n_seq, False
    params.n_batch = params.n_ubatch = 512 + n_seq
    params.n_threads = params.n_threads_batch = args.threads
    ctx = _internals.LlamaContext(model=model, params=params, verbose=False)
    mem = ll.llama_get_memory(ctx.ctx)
    batch = ll.llama_batch_init(512 + n_seq, 0, 1)

    def decode(items: list[tuple[int, int, int, bool]]) -> float:
        for i, (seq, pos, token, logits) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, pos, 1, logits
            batch.seq_id[i][0] = seq
        batch.n_tokens = len(items)
        started = time.perf_counter()
        if ll.llama_decode(ctx.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        return time.perf_counter() - started

    n = args.context
    prefill = sum(decode([(0, p, 100 + p % 500, p == n - 1) for p in range(start, min(n, start + 512))])
                  for start in range(0, n, 512))
    for seq in range(1, n_seq):
        ll.llama_memory_seq_cp(mem, 0, seq, -1, -1)
    print(f"{gguf.name}, {args.threads} thread(s): prefill {n / prefill:.1f} tokens/s over {n} positions")
    print(f"{'seqs':>4} {'step ms':>8} {'tokens/s':>9}")
    for level in levels:
        steps = sorted(decode([(s, n + k, 200 + s, True) for s in range(level)]) for k in range(8))
        for s in range(level):
            ll.llama_memory_seq_rm(mem, s, n, -1)
        step = steps[len(steps) // 2]
        print(f"{level:>4} {1000 * step:>8.1f} {level / step:>9.1f}")
    ll.llama_batch_free(batch)
    ctx.close()
    model.close()
    return 0


if __name__ == "__main__":
    run_script(main)
