"""Environment benchmark: tool calls per second through the episode runner with a ``policy:`` model.

    python bench/env.py [--size 1000000] [--problems 200] [--model policy:expert] [--out bench-out/search]

Reuses (or builds) the synthetic catalog of ``bench/search.py``. Prints, from one run:
- in-process: episodes through ``env.run_episode`` with the policy backend and the in-process SearchService, on
  one core (one process, one thread): tool calls per second, policy time and tool time per call — once cold
  (distinct problems, search result cache off) and once arena-like (4 samples per problem, cache on);
- through the gateway over HTTP: the same episodes with the gateway in another process on a Unix socket and the
  agent using ``shoparena.sdk`` (``GatewayPolicy`` + ``GatewaySearch``): tool calls per second end to end, and
  the per-search-call overhead (HTTP p50 minus in-process p50 on the same queries).
Goals on this 2-core machine: ≥ 5,000 in-process tool calls/s per core; gateway overhead ≤ 1 ms per call at p50.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _catalog(size: int, out: Path) -> Path:
    """The bench/search.py catalog of this size (built here if missing)."""
    from shoparena.catalog.directory import create_catalog
    from shoparena.catalog.synthetic import generate_catalog

    root = out / str(size)
    if (root / "index" / "meta.json").exists():
        return root / "index"
    if (root / "documents.jsonl.gz").exists():
        from shoparena.catalog.index_build import build_index
        from shoparena.catalog.loader import iter_documents

        build_index(iter_documents(root / "documents.jsonl.gz"), root / "index")
        return root / "index"
    create_catalog(generate_catalog(size, 0), root)
    return root / "index"


def _episodes_in_process(index_path: Path, problems: list, model: str, *, samples: int = 1,
                         cache_size: int = 0) -> dict:
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.env import run_episode
    from shoparena.llm import Sampling, get_backend, policy_for

    index = SearchIndex.open(index_path)
    index.warm()
    svc = SearchService(index, cache_size=cache_size)
    backend = get_backend(model)
    run_episode(problems[0], policy_for(backend), svc, protocol="native")  # warm caches and imports
    calls = episodes = 0
    policy_s = tools_s = 0.0
    t0 = time.perf_counter()
    for sample in range(samples):
        policy = policy_for(backend, Sampling(temperature=0.7 if samples > 1 else 0.0, seed=sample))
        for p in problems:
            ep = run_episode(p, policy, svc, protocol="native")
            calls += ep.n_tool_calls
            episodes += 1
            policy_s += ep.timings.policy_s
            tools_s += ep.timings.tools_s
    wall = time.perf_counter() - t0
    return {"episodes": episodes, "calls": calls, "wall": wall, "policy_s": policy_s, "tools_s": tools_s}


def _gateway_child(index_path: str, model: str, queue: mp.Queue, stop: mp.Event) -> None:
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.llm.gateway import Gateway, Limits

    index = SearchIndex.open(index_path)
    index.warm()
    gateway = Gateway(SearchService(index, cache_size=0), allowed_models={model}, limits=Limits.unlimited())
    gateway.warm([model])
    sock = Path(tempfile.mkdtemp(prefix="sa-bench-")) / "gw.sock"
    with gateway.serve(uds=str(sock)) as srv:
        handle = gateway.open_run("bench")
        queue.put(srv.env(handle) | {"SHOPARENA_MODEL": model})
        stop.wait()
        log = gateway.close_run(handle.token)
        queue.put([r.duration_ms for r in log if r.kind == "search"])


def _episodes_via_gateway(env: dict, problems: list) -> dict:
    os.environ.update(env)
    from shoparena.env import run_episode
    from shoparena.sdk import GatewayPolicy, GatewaySearch

    policy, search = GatewayPolicy(), GatewaySearch()
    run_episode(problems[0], policy, search, protocol="native")
    calls = 0
    t0 = time.perf_counter()
    for p in problems:
        calls += run_episode(p, policy, search, protocol="native").n_tool_calls
    return {"episodes": len(problems), "calls": calls, "wall": time.perf_counter() - t0}


def _search_overhead(env: dict, index_path: Path, queries: list[str]) -> tuple[float, float]:
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.sdk import Gateway

    svc = SearchService(SearchIndex.open(index_path), cache_size=0)
    client = Gateway(env["SHOPARENA_GATEWAY"], env["SHOPARENA_RUN_TOKEN"])

    def timed(fn) -> float:
        out = []
        for q in queries:
            t0 = time.perf_counter()
            fn(q)
            out.append((time.perf_counter() - t0) * 1000)
        return statistics.median(out)

    timed(lambda q: svc.find_product_json(q))
    local = timed(lambda q: svc.find_product_json(q))
    timed(lambda q: client.find_product(q))
    remote = timed(lambda q: client.find_product(q))
    return local, remote


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--model", default="policy:expert")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench-out/search"))
    args = ap.parse_args()
    from shoparena.catalog.index import SearchIndex
    from shoparena.tasks.generator import generate_problems

    index_path = _catalog(args.size, args.out)
    index = SearchIndex.open(index_path)
    problems = [p.public_view() for p in generate_problems(index, n=args.problems, seed=args.seed, paraphrases=0)]
    print(f"shoparena env bench — {len(index):,}-product catalog, {len(problems)} problems, {args.model}, "
          f"native tool calls")

    r = _episodes_in_process(index_path, problems, args.model)
    rate = r["calls"] / r["wall"]
    print(f"  in-process   {r['calls']:,} tool calls in {r['episodes']} episodes, {r['wall']:.2f} s: "
          f"{rate:,.0f} tool calls/s on one core (goal ≥ 5,000: {rate / 5000:.2f}×); per call "
          f"policy {1000 * r['policy_s'] / r['calls']:.3f} ms, tool {1000 * r['tools_s'] / r['calls']:.3f} ms")

    r = _episodes_in_process(index_path, problems, args.model, samples=4, cache_size=4096)
    rate = r["calls"] / r["wall"]
    print(f"  in-process, arena-like: 4 samples per problem at T=0.7 with the search result cache on: "
          f"{r['calls']:,} calls, {rate:,.0f} tool calls/s ({rate / 5000:.2f}× goal); per call "
          f"policy {1000 * r['policy_s'] / r['calls']:.3f} ms, tool {1000 * r['tools_s'] / r['calls']:.3f} ms")

    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_gateway_child, args=(str(index_path), args.model, queue, stop), daemon=True)
    child.start()
    env = queue.get()
    g = _episodes_via_gateway(env, problems)
    grate = g["calls"] / g["wall"]
    print(f"  via gateway  {g['calls']:,} tool calls in {g['episodes']} episodes, {g['wall']:.2f} s: "
          f"{grate:,.0f} tool calls/s (agent process + gateway process, Unix socket, every call logged)")
    queries = [p["query"].split("\n")[0][:60] for p in problems]
    local, remote = _search_overhead(env, index_path, queries)
    print(f"  search call  in-process p50 {local:.3f} ms, through the gateway p50 {remote:.3f} ms: "
          f"overhead {remote - local:.3f} ms (goal ≤ 1 ms)")
    stop.set()
    inner = queue.get()
    print(f"  gateway-side search time p50 {statistics.median(inner):.3f} ms over {len(inner):,} logged calls")
    child.join(5)
    sys.stdout.flush()
    json.dumps(r)  # the figures above are the output; nothing is written


if __name__ == "__main__":
    run_script(main)
