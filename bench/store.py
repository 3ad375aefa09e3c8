"""Trajectory-store benchmark: appends per second of ~20 KB records, SQLite and PostgreSQL.

    python bench/store.py [--records 4000] [--writers 4] [--size 20000] [--batch 50] [--backends sqlite,postgresql]

Records are :func:`shoparena.store.testing.synthetic_record` (a ReAct steps list, the matching messages and a
gateway call log, ~20 KB of canonical JSON), generated before the clock starts and sealed inside ``append`` (as a
validator does). For each backend, on a fresh database:
- ``append`` ×N writers: N writer processes, each committing one record per transaction (a validator writing
  each problem as it finishes) — the figure the goal is about;
- ``append_many`` ×N writers: the same, one transaction per batch of ``--batch`` records (one eval run);
- ``append_many`` ×1: one process, batches of 500 (an import);
- SQLite only: ``append`` ×N writers again with ``?synchronous=normal`` (commits not fsynced), for comparison.
SQLite runs with the store's defaults (WAL, synchronous=FULL: every commit fsynced). PostgreSQL is a private
server started here like the test fixture (``shoparena.store.pg.TempPostgres``) with its durable defaults
(fsync on, synchronous_commit on). Goal on this 2-core machine: ≥ 1,000 records/s on SQLite with 4 writers.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
GOAL = 1_000.0


def _writer(url: str, start: int, n: int, size: int, batch: int, barrier: Any, out: Any) -> None:
    from shoparena.store import open_store
    from shoparena.store.testing import synthetic_record

    recs = [synthetic_record(i, size=size) for i in range(start, start + n)]
    store = open_store(url)
    barrier.wait()
    t0 = time.perf_counter()
    added = 0
    if batch <= 1:
        for r in recs:
            added += store.append(r)
    else:
        for k in range(0, n, batch):
            added += store.append_many(recs[k:k + batch])
    t1 = time.perf_counter()
    store.close()
    out.put((t0, t1, added))


def run_writers(url: str, *, writers: int, records: int, size: int, batch: int) -> tuple[float, int]:
    """Records/s over the wall time from the first writer's start to the last one's end, and records added."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    per = records // writers
    procs = [ctx.Process(target=_writer, args=(url, w * per, per, size, batch, barrier, out))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"writer exited with {p.exitcode}")
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    added = sum(r[2] for r in results)
    return added / wall, added


def bench_backend(name: str, new_url: Callable[[], str], args: argparse.Namespace) -> list[tuple[str, float]]:
    from shoparena.store import open_store

    figures = []
    scenarios = [(f"append x{args.writers} writers", args.writers, 1, ""),
                 (f"append_many({args.batch}) x{args.writers} writers", args.writers, args.batch, ""),
                 ("append_many(500) x1 writer", 1, 500, "")]
    if name == "sqlite":
        scenarios.append((f"append x{args.writers} writers, sync=NORMAL", args.writers, 1, "?synchronous=normal"))
    for label, writers, batch, suffix in scenarios:
        url = new_url() + suffix
        open_store(url).close()  # create the schema before the clock starts
        rate, added = run_writers(url, writers=writers, records=args.records, size=args.size, batch=batch)
        with open_store(url) as store:
            n, report = store.count(), store.verify()
        assert n == added == args.records // writers * writers and report.ok, (n, added, report.mismatches[:3])
        figures.append((label, rate))
        goal = name == "sqlite" and batch == 1 and not suffix
        ratio = f"  ({rate / GOAL:.2f}x the {GOAL:,.0f}/s goal)" if goal else ""
        print(f"{name:10s} {label:34s} {rate:9,.0f} records/s  [{added} records, verified]{ratio}", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--size", type=int, default=20_000, help="approximate bytes of canonical JSON per record")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args(argv)

    from shoparena.store.testing import synthetic_record
    from shoparena.store.types import canonical_json

    size = len(canonical_json(synthetic_record(0, size=args.size).sealed(0).model_dump()))
    print(f"{args.records} records of {size / 1000:.1f} KB, {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}")
    backends = args.backends.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        if "sqlite" in backends:
            counter = iter(range(1_000_000))
            bench_backend("sqlite", lambda: f"sqlite:///{Path(tmp) / f'b{next(counter)}.db'}", args)
        if "postgresql" in backends:
            from shoparena.store.pg import TempPostgres, unavailable_reason

            reason = unavailable_reason()
            if reason:
                print(f"postgresql skipped: {reason}")
                return 0
            with TempPostgres(fsync=True) as pg:
                counter = iter(range(1_000_000))
                bench_backend("postgresql", lambda: pg.create_database(f"b{next(counter)}"), args)
    return 0


if __name__ == "__main__":
    run_script(main)
