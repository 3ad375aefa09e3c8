"""Incentive benchmark: does paying for agentic richness shift the arena toward axis-A trajectories, and at what
cost in ASR? (paper §9, ``docs/incentives.md``)

    python bench/incentives.py [--weights 0.25,0.5] [--days 3] [--miners 8] [--validators 2] [--seed 0]
                               [--qualifying-problems 6] [--race-problems 6] [--json FILE]

Runs ``shoparena arena simulate`` in-process with the same seed and days at W = 0 (today's ORO scoring) and at each
weight in ``--weights``, and reports per simulated day: the share of axis-A trajectories in the firehose, how many
of the day's trajectories pass the corpus filter's judge and format gates (``FilterConfig()`` defaults: judge ≥
0.5), the agentic rows after the axis split and dedup/rank (≤ 2 per problem), the top agent at the end of the day
with its held-out ASR (the success rate of its race runs), and how many teams redesigned that day (cumulative in
brackets). Everything is seeded: the same arguments give the same table. The default configuration is small (a
few minutes on an unloaded 2-core machine); scale with the flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")


def day_corpus(store_url: str, catalog: Path, eval_runs: list[str]) -> dict[str, int]:
    """The corpus filter over one day's records: rows seen, rows past the judge and format gates, agentic rows
    kept after the axis split and dedup/rank."""
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.corpus.filter import FilterConfig, run_filters
    from shoparena.corpus.normalize import iter_store
    from shoparena.store import open_store
    from shoparena.store.types import RecordQuery

    if not eval_runs:
        return {"rows": 0, "passed": 0, "agentic": 0}
    index = SearchIndex.open(index_path(catalog))
    with open_store(store_url, create=False) as st:
        result = run_filters(iter_store(st, RecordQuery(eval_run_id=tuple(eval_runs))), FilterConfig(),
                             known_ids=lambda pid: index.doc_of(pid) >= 0)
    stages = {r.stage: r for r in result.reports}
    return {"rows": stages["judge"].seen, "passed": stages["format"].kept, "agentic": len(result.kept)}


def run_weight(weight: float, args: argparse.Namespace) -> dict[str, Any]:
    from shoparena.arena.simulate import SimulationConfig, simulate

    with tempfile.TemporaryDirectory(prefix="sa-incentives-") as tmp:
        cfg = SimulationConfig(miners=args.miners, validators=args.validators, days=args.days, seed=args.seed,
                               catalog_size=args.catalog_size, problems=args.problems,
                               qualifying_problems=args.qualifying_problems, race_problems=args.race_problems,
                               sandbox=args.sandbox, out=tmp, richness_weight=weight)
        t0 = time.perf_counter()
        result = simulate(cfg)
        days = []
        redesigned = 0
        for d in result.days:
            corpus = day_corpus(result.store, Path(tmp) / "catalog", d.eval_runs)
            redesigned += d.design_changes
            days.append({"day": d.day, "trajectories": d.trajectories, "axis_a_share": d.axis_a_share,
                         "by_axis": d.by_axis, "passed_filter": corpus["passed"], "agentic_rows": corpus["agentic"],
                         "top_agent": d.top_agent, "top_agent_asr": d.top_agent_asr,
                         "design_changes": d.design_changes, "redesigned_total": redesigned})
        wall = round(time.perf_counter() - t0, 1)
    moves = [e.split(" ", 2)[2] for e in result.events if " redesigns: " in e]
    return {"weight": weight, "days": days, "redesigns": moves, "sandbox": result.sandbox, "wall_s": wall}


def table(runs: list[dict[str, Any]]) -> str:
    head = ("| W | day | trajectories | axis-A share | pass filter | agentic rows (dedup) | top agent | "
            "top held-out ASR | redesigns (total) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for run in runs:
        for d in run["days"]:
            asr = "–" if d["top_agent_asr"] is None else f"{d['top_agent_asr']:.3f}"
            lines.append(f"| {run['weight']:g} | {d['day']} | {d['trajectories']} | {d['axis_a_share']:.3f} | "
                         f"{d['passed_filter']} | {d['agentic_rows']} | {d['top_agent'] or '–'} | {asr} | "
                         f"{d['design_changes']} ({d['redesigned_total']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default="0.25,0.5", help="richness weights beside 0 (comma list, each in (0, 1])")
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--miners", type=int, default=8)
    ap.add_argument("--validators", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--catalog-size", type=int, default=1000)
    ap.add_argument("--problems", type=int, default=150)
    ap.add_argument("--qualifying-problems", type=int, default=6)
    ap.add_argument("--race-problems", type=int, default=6)
    ap.add_argument("--sandbox", default="bubblewrap")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    from shoparena.scoring.richness import check_weight

    try:
        others = [check_weight(float(w)) for w in args.weights.split(",") if w.strip()]
    except ValueError as exc:
        print(f"error: --weights: {exc}", file=sys.stderr)
        return 2
    weights = [0.0, *[w for w in dict.fromkeys(others) if w != 0.0]]
    print(f"shoparena incentives bench — W in {weights}, {args.days} days, {args.miners} miners, "
          f"{args.validators} validators, seed {args.seed}, load average {os.getloadavg()[0]:.2f}", flush=True)
    runs = []
    for w in weights:
        runs.append(run_weight(w, args))
        print(f"  W={w:g}: {runs[-1]['wall_s']:.0f} s ({runs[-1]['sandbox']} sandbox); redesigns: "
              f"{runs[-1]['redesigns'] or 'none'}", flush=True)
    print()
    print(table(runs))
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: str(v) if isinstance(v, Path) else v
                                                  for k, v in vars(args).items()}, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_script(main)
