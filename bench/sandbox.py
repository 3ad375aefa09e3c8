"""Sandbox start overhead per problem.

    python bench/sandbox.py [--problems 50] [--backend bubblewrap] [--workers 1] [--mode both] [--baseline]

Runs a trivial agent (``agent_main`` returns ``[]`` at once) on ``--problems`` problems in each ``--mode``
(``per_problem``: one sandbox each; ``batch``: one sandbox for all, each problem forked inside it) and prints
p50 / p99 of:
- start overhead: per_problem, launch (the validator's ``Popen``) → the entry's ready mark, just before the agent
  file is imported: namespaces, mounts, uid drop, seccomp, interpreter start; batch, the executor starting the
  problem (fork, limits, cgroup move) → the agent called (the batch's own start is paid once);
- end to end: the validator's wall time per problem (launch → envelope parsed → sandbox torn down);
and, with ``--baseline``, the same for the non-hermetic ``process`` backend (the interpreter alone), so the
sandbox's own share is visible. Goal: start overhead ≤ 100 ms at p50 and p99.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")

GOAL_MS = 100.0
TRIVIAL = "def agent_main(problem_data):\n    return []\n"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(backend: str, n: int, workers: int, mode: str = "per_problem") -> dict[str, float]:
    from shoparena.validator.sandbox import SandboxLimits, get_sandbox

    root = Path(tempfile.mkdtemp(prefix="sbx-bench-"))
    agent = root / "agent.py"
    agent.write_text(TRIVIAL)
    sock_path = root / "gw.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # the trivial agent never connects
    listener.bind(str(sock_path))
    listener.listen()
    sandbox = get_sandbox(backend, allow_non_hermetic=True)
    problems = [{"problem_id": f"p{i}", "query": "bench"} for i in range(n)]
    limits = SandboxLimits(timeout_s=30, mode=mode)  # type: ignore[arg-type]
    list(sandbox.run(agent, problems[:2], gateway_socket=sock_path, env_for=lambda _: {}, limits=limits))  # warm
    t0 = time.perf_counter()
    outs = list(sandbox.run(agent, problems, gateway_socket=sock_path, env_for=lambda _: {"SHOPARENA_RUN_TOKEN": "x"},
                            limits=limits, workers=workers))
    total = time.perf_counter() - t0
    listener.close()
    bad = [o.envelope for o in outs if o.envelope.status != "SUCCESS"]
    if bad:
        raise SystemExit(f"{len(bad)} runs failed, e.g. {bad[0].error}")
    starts = [o.start_overhead_ms for o in outs if o.start_overhead_ms is not None]
    walls = [o.wall_s * 1000 for o in outs]
    return {"start_p50": statistics.median(starts), "start_p99": _pct(starts, 0.99),
            "e2e_p50": statistics.median(walls), "e2e_p99": _pct(walls, 0.99), "per_s": n / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=50)
    ap.add_argument("--backend", default="bubblewrap")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mode", choices=("both", "batch", "per_problem"), default="both")
    ap.add_argument("--baseline", action="store_true", help="also measure the non-hermetic process backend")
    args = ap.parse_args()
    from shoparena.validator.sandbox import get_sandbox

    sandbox = get_sandbox(args.backend, allow_non_hermetic=True)
    reason = sandbox.unavailable()
    if reason:
        print(f"{args.backend}: unavailable here: {reason}")
        sys.exit(0)
    print(f"sandbox start overhead: {args.problems} problems, trivial agent, {args.workers} worker(s), "
          f"{os.cpu_count()} cores")
    for key, value in sandbox.describe().items():
        print(f"  {key:<10} {value}")
    modes = ("per_problem", "batch") if args.mode == "both" else (args.mode,)
    rows = [(f"{args.backend} {mode}", measure(args.backend, args.problems, args.workers, mode)) for mode in modes]
    if args.baseline and args.backend != "process":
        rows.append(("process (no isolation)", measure("process", args.problems, args.workers)))
    print(f"{'backend':<24} {'start p50':>10} {'start p99':>10} {'e2e p50':>9} {'e2e p99':>9} {'problems/s':>11}")
    for name, r in rows:
        print(f"{name:<24} {r['start_p50']:>8.1f}ms {r['start_p99']:>8.1f}ms {r['e2e_p50']:>7.1f}ms "
              f"{r['e2e_p99']:>7.1f}ms {r['per_s']:>11.1f}")
    for name, r in rows[:len(modes)]:
        ok = r["start_p50"] <= GOAL_MS and r["start_p99"] <= GOAL_MS
        print(f"goal: start overhead ≤ {GOAL_MS:.0f} ms per problem, {name}: p50 {r['start_p50']:.1f} ms, "
              f"p99 {r['start_p99']:.1f} ms → {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    run_script(main)
