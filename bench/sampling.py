"""Sampling throughput of the serving backends on replayed shopping episodes, side by side.

    python bench/sampling.py --model DIR [--backends llamacpp,hf] [--concurrency 1,4,8,16] [--json]

What is replayed: problems generated on a synthetic catalog (the eval partition's kind), each played once by the
offline ``policy:expert`` through the real environment, which records every turn's conversation: the system and
tools block, the query, the assistant's calls and the tool results. Each recorded episode is then replayed against
the model under test turn by turn: turn *t* sends the recorded conversation up to the policy's *t*-th answer and
samples one answer (temperature 0.7, a fixed seed per episode and turn, ``--max-tokens`` per turn), so every mode
does the same requests whatever the model writes. ``--concurrency`` episodes are in flight at once, each its own
thread, as a validator's workers are.

Modes, each on a freshly loaded backend per concurrency (warmed by one request, so the system block is cached in
every mode, as it is after an evaluation's first episode):

- ``llamacpp/slots``: today's path, ``slots`` contexts of one thread each (2 on 2 cores), a request takes the slot
  sharing its longest prefix;
- ``llamacpp/batched``: continuous batching in two engines of one thread each (the default), the shared prefix
  copied, each episode continuing its own sequence (``shoparena/llm/llamacpp_batch.py``); ``llamacpp/batched1``:
  the same in one engine running both threads;
- ``hf/serial`` and ``hf/batched``: transformers one request at a time, and through its continuous batching.

Per row: episodes/s, generated tokens/s, prefill tokens/s (prompt tokens actually evaluated — a cached prefix is
not — per second of wall time), median time to first token (``llamacpp`` only: the wait for a slot or sequence
included), the share of wall time the engine spent inside ``llama_decode`` (batched only; the rest is sampling,
tokenisation and rendering in Python), and the fraction of the CPU's measured fp32 matrix-multiply throughput the
decoder reaches (2 × parameters FLOPs per evaluated token, attention left out). Ratios compare each batched mode
with the same backend's serial mode at the same concurrency, and with its best serial row. Run it on a quiet
machine: other processes on the cores change every figure.

``--json`` prints one JSON object: ``{"machine", "model", "settings", "matmul_gflops", "results": [{backend, mode,
concurrency, episodes, episodes_per_s, gen_tokens_per_s, prefill_tokens_per_s, ttft_ms, ...}], "ratios"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODES = {"llamacpp": ("slots", "batched", "batched1"), "hf": ("serial", "batched")}


def record_episodes(n: int, seed: int, work: Path, max_turns: int) -> list[dict[str, Any]]:
    """``n`` episodes of ``policy:expert`` on generated problems: their per-turn request conversations."""
    from shoparena.catalog.directory import create_catalog
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.env import run_episode
    from shoparena.llm import Sampling, get_backend, policy_for
    from shoparena.tasks.generator import generate_problems

    root = work / "catalog"
    if not (root / "index" / "meta.json").exists():
        create_catalog(generate_catalog(3000, seed), root)
    index = SearchIndex.open(root / "index")
    service = SearchService(index)
    problems = [p.public_view() for p in generate_problems(index, n=n, seed=seed, paraphrases=0)]
    policy = policy_for(get_backend("policy:expert"), Sampling(temperature=0.0, seed=seed))
    episodes = []
    for problem in problems:
        ep = run_episode(problem, policy, service, protocol="native")
        turns = [ep.messages[:j] for j, m in enumerate(ep.messages) if m.get("role") == "assistant"][:max_turns]
        if turns:
            episodes.append({"problem_id": ep.problem_id, "tools": ep.tools, "turns": turns})
    return episodes


def make_backend(kind: str, mode: str, model: str, dtype: str, parallel: int) -> Any:
    if kind == "llamacpp":
        from shoparena.llm.llamacpp_backend import LlamaCppBackend

        if mode == "slots":
            return LlamaCppBackend(model, mode="slots", dtype=dtype)
        return LlamaCppBackend(model, mode="batched", dtype=dtype, parallel=parallel,
                               engines=1 if mode == "batched1" else None)
    from shoparena.llm.hf_backend import HFBackend

    return HFBackend(model, device="cpu", mode=mode)


def replay(backend: Any, episodes: list[dict[str, Any]], concurrency: int, max_tokens: int, seed: int,
           ) -> dict[str, Any]:
    """Replay ``episodes`` with ``concurrency`` in flight; totals and per-call timings."""
    from shoparena.llm.types import Sampling

    lock = threading.Lock()
    todo = list(range(len(episodes)))
    calls: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            ep = episodes[i]
            for t, messages in enumerate(ep["turns"]):
                sampling = Sampling(temperature=0.7, top_p=0.95, max_tokens=max_tokens, seed=seed * 100_003 + i * 97 + t)
                try:
                    _, n_prompt, n_gen = backend.generate(messages, ep["tools"], sampling)
                except BaseException as exc:  # reported after the run
                    errors.append(exc)
                    return
                timing = getattr(getattr(backend, "last_call", None), "timing", None)
                with lock:
                    calls.append({"prompt": n_prompt, "gen": n_gen,
                                  "evaluated": timing.prompt_evaluated if timing else n_prompt,
                                  "ttft_s": timing.ttft_s if timing else None})

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    ttfts = [c["ttft_s"] for c in calls if c["ttft_s"] is not None]
    return {"wall_s": wall, "calls": len(calls), "gen_tokens": sum(c["gen"] for c in calls),
            "prompt_tokens": sum(c["prompt"] for c in calls), "prompt_evaluated": sum(c["evaluated"] for c in calls),
            "ttft_ms": round(1000 * statistics.median(ttfts), 1) if ttfts else None}


def matmul_gflops(threads: int) -> float:
    """The CPU's fp32 matrix-multiply throughput, measured: the best of five 1024² × 1024² products."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(5))
    return 2 * 1024 ** 3 / best / 1e9


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def n_params(model: str) -> int:
    from safetensors import safe_open

    total = 0
    with safe_open(str(Path(model) / "model.safetensors"), "pt") as f:
        for key in f.keys():
            shape = f.get_slice(key).get_shape()
            size = 1
            for d in shape:
                size *= d
            total += size
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a prepared checkpoint directory (shoparena models prepare)")
    ap.add_argument("--backends", default="llamacpp", help="comma list of llamacpp, hf")
    ap.add_argument("--modes", default=None, help="comma list of backend/mode to run (default: all of --backends)")
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--episodes", type=int, default=0, help="episodes per row (default: 2 × concurrency, 4 to 24)")
    ap.add_argument("--turns", type=int, default=6, help="turns replayed per episode at most")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--dtype", default="Q8_0", help="llamacpp weights (F32, F16, Q8_0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    if not (Path(args.model) / "config.json").is_file():
        print(f"error: no prepared checkpoint at {args.model}\n"
              "hint: shoparena models prepare smollm2-135m --out DIR", file=sys.stderr)
        return 2
    try:
        levels = [int(c) for c in args.concurrency.split(",")]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1 or args.turns < 1 or args.max_tokens < 1 or args.episodes < 0:
        print("error: --concurrency takes whole numbers ≥ 1; --turns and --max-tokens ≥ 1; --episodes ≥ 0\n"
              "hint: e.g. --concurrency 1,4,8,16", file=sys.stderr)
        return 2
    wanted = [(k, m) for k in args.backends.split(",") for m in MODES.get(k, ())]
    if args.modes:
        wanted = [tuple(x.split("/", 1)) for x in args.modes.split(",")]  # type: ignore[misc]
    if not wanted or any(k not in MODES or m not in MODES[k] for k, m in wanted):
        print(f"error: unknown backend or mode in {args.backends!r} / {args.modes!r}\n"
              "hint: backends llamacpp, hf; modes llamacpp/slots, llamacpp/batched, hf/serial, hf/batched",
              file=sys.stderr)
        return 2
    per_level = {c: args.episodes or min(24, max(4, 2 * c)) for c in levels}
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    with tempfile.TemporaryDirectory() as tmp:
        episodes = record_episodes(max(per_level.values()) + 4, args.seed, Path(tmp), args.turns)
    threads = os.cpu_count() or 1
    gflops = matmul_gflops(threads)
    flops_per_token = 2 * n_params(args.model)
    log(f"sampling bench — {Path(args.model).name}, {len(episodes)} recorded episodes, "
        f"{statistics.mean(len(e['turns']) for e in episodes):.1f} turns each, ≤ {args.max_tokens} tokens a turn; "
        f"{threads} cores, fp32 matmul {gflops:.0f} GFLOP/s")
    header = (f"{'backend':9} {'mode':8} {'conc':>4} {'eps':>4} {'ep/s':>6} {'gen tok/s':>9} {'prefill/s':>9} "
              f"{'ttft ms':>8} {'in decode':>9} {'of matmul':>9}")
    log(header)
    results = []
    for kind, mode in wanted:
        for c in levels:
            eps = episodes[:per_level[c]]
            backend = make_backend(kind, mode, args.model, args.dtype, max(16, c))
            try:
                backend.generate(eps[0]["turns"][0], eps[0]["tools"], _warm())
                engines = getattr(backend, "_engines", [])
                decode_before = sum(e.stats.decode_s for e in engines)
                r = replay(backend, eps, c, args.max_tokens, args.seed)
                # engines decode in parallel on their own threads: their mean share of the wall time
                decode_s = ((sum(e.stats.decode_s for e in engines) - decode_before) / len(engines)
                            if engines else None)
            finally:
                close = getattr(backend, "close", None)
                if close:
                    close()
            wall = r["wall_s"]
            row = {"backend": kind, "mode": mode, "concurrency": c, "episodes": len(eps), "calls": r["calls"],
                   "episodes_per_s": round(len(eps) / wall, 4), "gen_tokens_per_s": round(r["gen_tokens"] / wall, 1),
                   "prefill_tokens_per_s": round(r["prompt_evaluated"] / wall, 1),
                   "prompt_tokens": r["prompt_tokens"], "prompt_evaluated": r["prompt_evaluated"],
                   "gen_tokens": r["gen_tokens"], "ttft_ms": r["ttft_ms"], "wall_s": round(wall, 2),
                   "decode_share": round(decode_s / wall, 3) if decode_s is not None else None,
                   "matmul_fraction": round((r["gen_tokens"] + r["prompt_evaluated"]) * flops_per_token / wall
                                            / (gflops * 1e9), 3)}
            results.append(row)
            log(f"{kind:9} {mode:8} {c:>4} {len(eps):>4} {row['episodes_per_s']:>6.3f} {row['gen_tokens_per_s']:>9.1f} "
                f"{row['prefill_tokens_per_s']:>9.1f} {row['ttft_ms'] if row['ttft_ms'] is not None else '-':>8} "
                f"{row['decode_share'] if row['decode_share'] is not None else '-':>9} {row['matmul_fraction']:>9.3f}")
    ratios = []
    for kind, (serial, *batched) in MODES.items():
        base = {r["concurrency"]: r for r in results if (r["backend"], r["mode"]) == (kind, serial)}
        best = max((r["episodes_per_s"] for r in base.values()), default=None)
        for r in results:
            if r["backend"] != kind or r["mode"] not in batched or r["concurrency"] not in base:
                continue
            b = base[r["concurrency"]]
            ratios.append({"backend": kind, "mode": r["mode"], "concurrency": r["concurrency"],
                           "episodes_per_s": round(r["episodes_per_s"] / b["episodes_per_s"], 2),
                           "gen_tokens_per_s": round(r["gen_tokens_per_s"] / b["gen_tokens_per_s"], 2),
                           "vs_best_serial_episodes_per_s": round(r["episodes_per_s"] / best, 2) if best else None})
    for x in ratios:
        log(f"{x['backend']} {x['mode']} / {MODES[x['backend']][0]} at {x['concurrency']:>2}: episodes/s ×"
            f"{x['episodes_per_s']}, generated tokens/s ×{x['gen_tokens_per_s']}, vs the best "
            f"{MODES[x['backend']][0]} row ×{x['vs_best_serial_episodes_per_s']}")
    if args.json:
        print(json.dumps({"machine": f"{platform.machine()} {platform.processor() or ''} {threads} cores".strip(),
                          "model": Path(args.model).name, "settings": vars(args), "matmul_gflops": round(gflops, 1),
                          "results": results, "ratios": ratios}))
    return 0


def _warm() -> Any:
    from shoparena.llm.types import Sampling

    return Sampling(temperature=0.0, max_tokens=4)


if __name__ == "__main__":
    run_script(main)
