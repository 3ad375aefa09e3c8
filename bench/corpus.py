"""Corpus benchmark: trajectories per second through read + normalise, and through the filter stages.

    python bench/corpus.py [--records 20000] [--seed 0] [--min-judge-score 0.5]

Setup (not timed): the real validator loop (``process`` sandbox, rubric judge) runs the ``react`` (axis A),
``pipeline`` (axis B) and ``react`` + ``policy:expert`` agents on 12 generated problems over a 600-product
synthetic catalog, as the corpus test fixture does — 36 real records. They are replicated to ``--records`` stored
records: every block of 36 gets its own eval run, two consecutive blocks share their problems (so each problem
has every agent's trace twice — the exact duplicates several validators produce), and a seeded ~30 % of rows get
one defect (a dropped tool response, a second ``recommend_product``, an unknown product id, a think-then-stop
ending, a 30× tool response) so every reject path is exercised. The records are sealed and written to a fresh
SQLite store with ``append_many``.

Timed, separately:
- (a) read + normalise: ``iter_store`` (``store.bodies()`` → orjson → ``from_record``) over the whole store;
- (b) the filter: ``run_filters`` end to end (the figure the goal is about: ≥ 5,000 trajectories/s on this
  2-core machine, counted on the rows that enter the filter), then each stage alone on its own input
  (what the stage before it kept), with ``known_ids`` answered by the catalog's search index.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
GOAL = 5_000.0
_DERIVED = ("record_id", "idempotency_key", "trace_sha256", "call_log_sha256", "pipeline_version", "created_at")


def real_bodies(root: Path) -> tuple[list[dict[str, Any]], Path]:
    """The 36 real records of the corpus test world (:func:`shoparena.corpus.testing.seed_world`), and the catalog
    directory."""
    import orjson

    from shoparena.corpus.testing import seed_world
    from shoparena.store import open_store

    world = seed_world(root)
    with open_store(world.store_url) as store:
        return [orjson.loads(b) for b in store.bodies()], world.catalog


def _mutate(body: dict[str, Any], rng: random.Random) -> str:
    """Apply at most one seeded defect to ``body["messages"]`` in place; its name ("" for none)."""
    msgs = body["messages"]
    roll = rng.random()
    if roll < 0.70:
        return ""
    if roll < 0.75:  # the terminate call loses its response
        del msgs[-1]
        return "dropped_response"
    if roll < 0.80:  # recommend twice
        i = next(k for k, m in enumerate(msgs) if any(c["function"]["name"] == "recommend_product"
                                                      for c in m.get("tool_calls") or ()))
        twin = [dict(msgs[i], tool_calls=[dict(c, id=c["id"] + "x") for c in msgs[i]["tool_calls"]]),
                dict(msgs[i + 1], tool_call_id=msgs[i + 1]["tool_call_id"] + "x")]
        msgs[i + 2:i + 2] = twin
        return "second_recommend"
    if roll < 0.85:  # an id the catalog does not have
        for m in msgs:
            for c in m.get("tool_calls") or ():
                if c["function"]["name"] == "recommend_product":
                    c["function"]["arguments"] = '{"product_ids": "0000000001"}'
        return "unknown_id"
    if roll < 0.90:  # stop thinking instead of terminating
        del msgs[-2:]
        msgs.append({"role": "assistant", "content": "", "reasoning_content": "Let me think about it more."})
        return "think_then_stop"
    if roll < 0.95:  # a huge observation
        k = next(k for k, m in enumerate(msgs) if m["role"] == "tool")
        msgs[k] = dict(msgs[k], content=msgs[k]["content"] * 30)
        return "huge_observation"
    return ""


def build_store(url: str, bodies: list[dict[str, Any]], n: int, seed: int) -> dict[str, int]:
    """Write ``n`` replicated (and partly defective) records; counts of each defect."""
    import copy
    from collections import Counter

    from shoparena.store import open_store
    from shoparena.store.types import TrajectoryRecord

    rng = random.Random(seed)
    defects: Counter[str] = Counter()
    batch: list[TrajectoryRecord] = []
    with open_store(url) as store:
        for i in range(n):
            block, base = divmod(i, len(bodies))
            body = copy.deepcopy({k: v for k, v in bodies[base].items() if k not in _DERIVED})
            body["eval_run_id"] = f"bench-{block}-{body['agent_id']}"
            body["problem_id"] = f"{body['problem_id']}~{block // 2}"
            defects[_mutate(body, rng) or "none"] += 1
            batch.append(TrajectoryRecord.model_validate(body))
            if len(batch) == 500:
                store.append_many(batch)
                batch = []
        if batch:
            store.append_many(batch)
        assert store.count() == n, store.count()
    return dict(defects)


def _normalise(url: str) -> tuple[list[Any], int, float]:
    from shoparena.corpus.normalize import iter_store
    from shoparena.corpus.types import Trajectory
    from shoparena.store import open_store

    with open_store(url) as store:
        t0 = time.perf_counter()
        out = list(iter_store(store))
        dt = time.perf_counter() - t0
    return [r for r in out if isinstance(r, Trajectory)], sum(not isinstance(r, Trajectory) for r in out), dt


def bench_filter(rows: list[Any], known: Any, min_judge_score: float) -> None:
    from shoparena.corpus.filter import FilterConfig, build_stages, run_filters

    config = FilterConfig(min_judge_score=min_judge_score)
    t0 = time.perf_counter()
    res = run_filters(rows, config, known_ids=known)
    dt = time.perf_counter() - t0
    rate = len(rows) / dt
    print(f"  filter, end to end (min_judge_score={min_judge_score:g}): {len(rows):,} rows in {dt:.2f} s = "
          f"{rate:9,.0f} trajectories/s  ({rate / GOAL:.2f}x the {GOAL:,.0f}/s goal); kept {len(res.kept):,}, "
          f"axis-B {len(res.axis_b):,}")
    stages = build_stages(config, [], known_ids=known)
    current = rows
    for stage in stages:
        t0 = time.perf_counter()
        out = list(stage.run(current))
        dt = time.perf_counter() - t0
        rej = ", ".join(f"{k} {v:,}" for k, v in sorted(stage.report.rejected.items())) or "-"
        print(f"    {stage.name:11s} {stage.report.seen:7,} in → {stage.report.kept:7,} kept  "
              f"{stage.report.seen / dt if dt else float('inf'):10,.0f} rows/s   rejected: {rej}")
        current = out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-judge-score", type=float, default=0.5,
                    help="judge gate of the default run (a second run always uses 0: every row through)")
    args = ap.parse_args(argv)

    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex

    print(f"{args.records:,} stored trajectories, {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        bodies, catalog = real_bodies(root)
        url = f"sqlite:///{root / 'bench.db'}"
        defects = build_store(url, bodies, args.records, args.seed)
        size = (root / "bench.db").stat().st_size
        print(f"setup: {len(bodies)} real records replicated to {args.records:,} ({size / 1e6:,.0f} MB SQLite) in "
              f"{time.perf_counter() - t0:.1f} s; defects {defects}")

        rows, bad, dt = _normalise(url)
        n = len(rows) + bad
        print(f"(a) read + normalise: {n:,} records in {dt:.2f} s = {n / dt:9,.0f} trajectories/s "
              f"({bad:,} normalisation rejections)")
        index = SearchIndex.open(index_path(catalog))

        def known(pid: str) -> bool:
            return index.doc_of(pid) >= 0

        print("(b) filter stages:")
        bench_filter(rows, known, args.min_judge_score)
        bench_filter(rows, known, 0.0)
        t0 = time.perf_counter()
        from shoparena.corpus.filter import FilterConfig, run_filters
        from shoparena.corpus.normalize import iter_store
        from shoparena.store import open_store

        with open_store(url) as store:
            res = run_filters(iter_store(store), FilterConfig(min_judge_score=args.min_judge_score), known_ids=known)
        dt = time.perf_counter() - t0
        print(f"overall, streamed store → kept: {n:,} records in {dt:.2f} s = {n / dt:9,.0f} trajectories/s "
              f"(kept {len(res.kept):,})")
    return 0


if __name__ == "__main__":
    run_script(main)
