"""Search benchmark: build a synthetic index and time find_product (issue: task surface, "Search").

    python bench/search.py [--size 1000000] [--queries 1000] [--out bench-out/search] [--seed 0]

Prints, from one run: catalog generation time, index build time (documents file → index, in a child process so
its peak RSS is its own), index size on disk, p50/p99 latency of 1,000 queries per filter kind through the
in-process SearchService (result cache disabled, JSON items built), the same over loopback HTTP, and how much of
a second serving process's memory is shared page cache (the memory-mapped index) versus private memory.
Goals on a 2-core machine: p50 ≤ 1 ms unfiltered, ≤ 2 ms with a price filter (≤ 5 ms for any filter), build ≤ 60 s,
RSS ≤ 1.5 GB.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _generate(size: int, seed: int, docs: Path) -> float:
    from shoparena.catalog.loader import write_documents
    from shoparena.catalog.synthetic import generate_catalog

    t0 = time.perf_counter()
    write_documents(generate_catalog(size, seed), docs)
    return time.perf_counter() - t0


def _build_child(docs: str, index: str, queue: mp.Queue) -> None:
    from shoparena.catalog.index_build import build_index
    from shoparena.catalog.loader import LoadReport, iter_documents

    t0 = time.perf_counter()
    report = LoadReport(path=docs)
    build_index(iter_documents(docs, report), index)
    queue.put((time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, report.n_bad))


def _queries(index, n: int, seed: int) -> dict[str, list[dict]]:
    """Query text from random product titles (2–4 consecutive words), plus a filter per kind."""
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {"no filter": [], "price filter": [], "shop filter": [], "service filter": []}
    for _ in range(n):
        doc = rng.randrange(len(index))
        product = index[doc]
        words = product.title.split()
        k = rng.randint(2, min(4, max(2, len(words))))
        start = rng.randrange(max(1, len(words) - k + 1))
        q = " ".join(words[start:start + k])
        lo = int(product.price * rng.uniform(0.3, 0.9))
        out["no filter"].append({"q": q})
        out["price filter"].append({"q": q, "price": f"{lo}-{int(product.price * rng.uniform(1.1, 3)) + 1}"})
        out["shop filter"].append({"q": q, "shop_id": product.shop_id})
        out["service filter"].append({"q": q, "service": rng.choice(["COD", "freeShipping", "official,COD"])})
    return out


def _time(fn, calls: list[dict]) -> list[float]:
    times = []
    for kwargs in calls:
        t0 = time.perf_counter()
        fn(**kwargs)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def _smaps() -> dict[str, int]:
    out = {}
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) // 1024
    return out


def _replica_child(index_path: str, calls: list[dict], queue: mp.Queue) -> None:
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService

    svc = SearchService(SearchIndex.open(index_path), cache_size=0)
    times = _time(svc.find_product, calls)
    queue.put((statistics.median(times), _smaps()))


def _server_child(index_path: str, queue: mp.Queue) -> None:
    from shoparena._http import BackgroundServer
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.catalog.server import create_app

    index = SearchIndex.open(index_path)
    index.warm()
    with BackgroundServer(create_app(SearchService(index, cache_size=0))) as srv:
        queue.put(srv.url)
        while True:
            time.sleep(3600)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench-out/search"))
    args = ap.parse_args()
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService

    out: Path = args.out / str(args.size)
    out.mkdir(parents=True, exist_ok=True)
    docs = out / "documents.jsonl.gz"
    index_path = out / "index"
    print(f"shoparena search bench — {args.size:,} synthetic products, {args.queries:,} queries per kind")
    if docs.exists():
        print(f"  catalog            reusing {docs} ({docs.stat().st_size / 2**20:,.0f} MiB)")
    else:
        gen_s = _generate(args.size, args.seed, docs)
        print(f"  catalog generate   {gen_s:8.1f} s   ({docs.stat().st_size / 2**20:,.0f} MiB gz)")

    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    child = ctx.Process(target=_build_child, args=(str(docs), str(index_path), queue))
    child.start()
    build_s, build_rss, n_bad = queue.get()
    child.join()
    size = sum(f.stat().st_size for f in index_path.iterdir())
    print(f"  index build        {build_s:8.1f} s   goal ≤ 60 s   ({build_s / 60:.2f}× budget; {n_bad} bad lines)")
    print(f"  build peak RSS     {build_rss:8.0f} MiB goal ≤ 1536 MiB ({build_rss / 1536:.2f}× budget)")
    print(f"  index on disk      {size / 2**20:8.0f} MiB")

    t0 = time.perf_counter()
    index = SearchIndex.open(index_path)
    open_ms = (time.perf_counter() - t0) * 1000
    svc = SearchService(index, cache_size=0)
    calls = _queries(index, args.queries, args.seed)
    goals = {"no filter": 1.0, "price filter": 2.0, "shop filter": 5.0, "service filter": 5.0}
    first = {kind: statistics.median(_time(svc.find_product, c[: len(c) // 5])) for kind, c in
             _queries(index, args.queries, args.seed + 1).items()}
    print(f"  open (mmap)        {open_ms:8.1f} ms; first queries of a fresh process (page faults): "
          + ", ".join(f"{k} p50 {v:.2f} ms" for k, v in first.items()))
    t0 = time.perf_counter()
    warm_bytes = index.warm()
    print(f"  warm()             {time.perf_counter() - t0:8.2f} s   ({warm_bytes / 2**20:,.0f} MiB of postings/columns paged in)")
    print("  in-process find_product latency, warm (ms), 1,000 fresh queries per kind, result cache off:")
    for kind, kind_calls in calls.items():
        t = _time(svc.find_product, kind_calls)
        p50 = statistics.median(t)
        print(f"    {kind:15s} p50 {p50:6.3f}  p99 {_pct(t, 99):6.3f}  goal p50 ≤ {goals[kind]:.0f}  "
              f"({p50 / goals[kind]:.2f}× goal)")

    from shoparena.catalog.client import SearchClient

    server = ctx.Process(target=_server_child, args=(str(index_path), queue), daemon=True)
    server.start()
    url = queue.get()
    with SearchClient(url) as client:
        _time(client.find_product, calls["price filter"][:50])
        t = _time(client.find_product, calls["price filter"])
        print(f"  HTTP, server in another process (price filter): p50 {statistics.median(t):.3f} ms  "
              f"p99 {_pct(t, 99):.3f} ms  (HTTP + JSON overhead ≈ "
              f"{statistics.median(t) - statistics.median(_time(svc.find_product, calls['price filter'])):.3f} ms)")
    server.terminate()

    rss_parent = _smaps()
    child = ctx.Process(target=_replica_child, args=(str(index_path), calls["no filter"], queue))
    child.start()
    replica_p50, sm = queue.get()
    child.join()
    print(f"  serving process    RSS {rss_parent['Rss']:,} MiB = heap (anonymous) {rss_parent['Anonymous']:,} MiB "
          f"+ mapped index pages {rss_parent['Rss'] - rss_parent['Anonymous']:,} MiB (page cache, shareable)")
    shared = sm["Shared_Clean"] + sm["Shared_Dirty"]
    print(f"  second replica     RSS {sm['Rss']:,} MiB = heap {sm['Anonymous']:,} MiB + mapped pages "
          f"{sm['Rss'] - sm['Anonymous']:,} MiB, of which {shared:,} MiB shared with the first process; "
          f"PSS {sm['Pss']:,} MiB; p50 {replica_p50:.3f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    run_script(main)
