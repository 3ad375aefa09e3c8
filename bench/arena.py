"""Arena benchmark: one simulated day of the whole subnet, timed.

    python bench/arena.py [--miners 12] [--validators 3] [--days 1] [--seed 0] [--sandbox bubblewrap]

Runs ``shoparena arena simulate`` in-process (catalog, banks, LocalChain, arena, miners submitting through the gate,
validators running the real validator loop in the sandbox, races, weights, emissions) and prints, per simulated
day, the trajectories recorded, the wall time and the rate, against the goal: one simulated day of ≥ 2,000
trajectories in under 5 minutes on this 2-core machine. Trajectories scale with the number of miners (each
qualifying or racing version is evaluated on the qualifying / race set by X = 2 validators), so a second run with
half the miners shows the scaling.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--miners", type=int, default=12)
    ap.add_argument("--validators", type=int, default=3)
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sandbox", default="bubblewrap")
    ap.add_argument("--scaling", action="store_true", help="also run with half the miners")
    args = ap.parse_args()
    from shoparena.arena.simulate import SimulationConfig, simulate

    runs = [args.miners, max(2, args.miners // 2)] if args.scaling else [args.miners]
    print(f"shoparena arena bench — {args.validators} validators, {args.days} day(s), sandbox {args.sandbox}, "
          f"load average {os.getloadavg()[0]:.2f}")
    for miners in runs:
        with tempfile.TemporaryDirectory(prefix="sa-arena-bench-") as tmp:
            result = simulate(SimulationConfig(miners=miners, validators=args.validators, days=args.days,
                                               seed=args.seed, sandbox=args.sandbox, out=tmp))
        for d in result.days:
            rate = d.trajectories / d.wall_s if d.wall_s else 0.0
            goal_s = 2000 / rate if rate else float("inf")
            print(f"  {miners:3d} miners  day {d.day}: {d.trajectories:5d} trajectories in {d.wall_s:6.1f} s = "
                  f"{rate:5.2f}/s; a 2,000-trajectory day would take {goal_s:5.0f} s (goal ≤ 300 s: "
                  f"{goal_s / 300:.2f}×); {d.evaluations} evaluations, {d.wall_s / max(1, d.evaluations):.2f} s "
                  f"each; axis {d.by_axis}")
        print(f"  {miners:3d} miners  total wall {result.wall_s:.0f} s (setup included), sandbox {result.sandbox}")


if __name__ == "__main__":
    run_script(main)
