"""Offline policy benchmark: ASR of every ``policy:<name>`` level on generated problems, and parser accuracy.

    python bench/policies.py [--size 5000] [--problems 150] [--seeds 4] [--temperature 0.7]
                             [--policies random,novice,careful,expert]
                             [--harness tags:upstream4,native:upstream4,tags:oro7,native:oro7] [--greedy]

Builds a synthetic catalog (``generate_catalog``) and problems (``generate_problems``), runs every policy through
``env.run_episode`` in-process against the real ``SearchService`` in each harness (protocol × tool profile),
``--seeds`` samples per problem at ``--temperature`` (seed = sample index), scores every episode with the real
``Scorer`` in strict and upstream mode, and prints per policy × harness: strict ASR (pass@1) overall and per
bucket, strict pass@k (k = number of seeds), upstream ASR, greedy ASR (``--greedy``: one sample at T = 0),
mean steps, tool calls per episode and policy CPU per step. Then the query parser's accuracy on the real upstream
ShoppingBench queries (bucket, item count, price mode + bounds, services, voucher fields) and on the generated
problems (plus attribute/option values).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "data" / "shoppingbench"
BUCKETS = ("product", "shop", "voucher")


class SyncPolicy:
    """A policy backend as the runner's synchronous ``Policy`` with fixed sampling (no event loop per call),
    timing the policy's own CPU."""

    def __init__(self, backend: Any, sampling: Any) -> None:
        self.backend, self.sampling = backend, sampling
        self.cpu = 0.0
        self.calls = 0

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        t0 = time.process_time()
        reply = self.backend.complete(messages, tools or None, self.sampling)
        self.cpu += time.process_time() - t0
        self.calls += 1
        return reply


def run_cell(policy: str, protocol: str, profile: str, problems: list[Any], svc: Any, scorers: dict[str, Any],
             seeds: int, temperature: float, greedy: bool) -> dict[str, Any]:
    """Every problem × seed for one policy in one harness; strict and upstream scores."""
    from shoparena.env import run_episode
    from shoparena.llm.policies import get_policy
    from shoparena.llm.types import Sampling
    from shoparena.scoring import pass_at_k

    backend = get_policy(policy)
    wins: dict[str, dict[str, list[int]]] = {m: defaultdict(list) for m in scorers}
    steps, calls, cpu, n_steps = [], [], 0.0, 0
    greedy_wins: list[int] = []
    runs = [(s, temperature) for s in range(seeds)] + ([(0, 0.0)] if greedy else [])
    for p in problems:
        for seed, temp in runs:
            pol = SyncPolicy(backend, Sampling(temperature=temp, seed=seed))
            ep = run_episode(p, pol, svc, protocol=protocol, profile=profile)
            cpu += pol.cpu
            n_steps += pol.calls
            if temp == 0.0 and greedy and seed == 0 and (seed, temp) == runs[-1]:
                greedy_wins.append(int(scorers["strict"].score_steps(p, ep.steps).success))
                continue
            steps.append(len(ep.steps))
            calls.append(ep.n_tool_calls)
            for mode, scorer in scorers.items():
                wins[mode][p.problem_id].append(int(scorer.score_steps(p, ep.steps).success))
    by_bucket: dict[str, list[float]] = defaultdict(list)
    bucket_of = {p.problem_id: p.bucket for p in problems}
    for pid, w in wins["strict"].items():
        by_bucket[bucket_of[pid]].append(sum(w) / len(w))
    k = seeds
    return {
        "asr": statistics.mean(sum(w) / len(w) for w in wins["strict"].values()),
        "bucket": {b: statistics.mean(v) for b, v in by_bucket.items()},
        "pass_k": statistics.mean(pass_at_k(len(w), sum(w), k) for w in wins["strict"].values()),
        "upstream": statistics.mean(sum(w) / len(w) for w in wins["upstream"].values()),
        "greedy": statistics.mean(greedy_wins) if greedy_wins else None,
        "steps": statistics.mean(steps), "calls": statistics.mean(calls),
        "ms_step": 1000 * cpu / max(1, n_steps),
    }


def parser_report() -> list[tuple[str, dict[str, Any]]]:
    from shoparena.llm.policies.accuracy import parser_accuracy
    from shoparena.tasks.loader import load_problems

    out = []
    for bucket in BUCKETS:
        path = UPSTREAM / f"synthesize_{bucket}_test.jsonl"
        if path.exists():
            out.append((f"upstream {bucket}", parser_accuracy(load_problems(path)).as_dict()))
    return out


def fmt(x: float | None) -> str:
    return "   –  " if x is None else f"{100 * x:5.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=5000, help="synthetic catalog size")
    ap.add_argument("--problems", type=int, default=150, help="generated problems (all three buckets)")
    ap.add_argument("--seeds", type=int, default=4, help="samples per problem (pass@k uses k = seeds)")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--policies", default="random,novice,careful,expert")
    ap.add_argument("--harness", default="tags:upstream4,native:upstream4,tags:oro7,native:oro7",
                    help="comma list of protocol:profile")
    ap.add_argument("--greedy", action="store_true", help="also run one greedy (T = 0) sample per problem")
    ap.add_argument("--catalog-seed", type=int, default=0)
    ap.add_argument("--problem-seed", type=int, default=11)
    ap.add_argument("--parser-only", action="store_true")
    args = ap.parse_args(argv)

    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.llm.policies.accuracy import parser_accuracy
    from shoparena.scoring import Scorer
    from shoparena.tasks.generator import generate_problems

    if not args.parser_only:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            index = SearchIndex.build(generate_catalog(args.size, args.catalog_seed), Path(tmp) / "index")
            problems = generate_problems(index, args.problems, seed=args.problem_seed)
            svc = SearchService(index)
            scorers = {"strict": Scorer(index, mode="strict"), "upstream": Scorer(index, mode="upstream")}
            counts = {b: sum(p.bucket == b for p in problems) for b in BUCKETS}
            print(f"catalog {len(index):,} products (seed {args.catalog_seed}), {len(problems)} problems {counts} "
                  f"(seed {args.problem_seed}); {args.seeds} samples at T={args.temperature}"
                  f"{' + greedy' if args.greedy else ''}; built in {time.perf_counter() - t0:.1f} s\n")
            k = args.seeds
            head = (f"{'policy':8} {'harness':17} {'ASR':>6} {'product':>7} {'shop':>6} {'voucher':>7} "
                    f"{f'pass@{k}':>7} {'upstr.':>6} {'greedy':>6} {'steps':>5} {'calls':>5} {'ms/step':>7}")
            print(head)
            print("-" * len(head))
            for policy in args.policies.split(","):
                for harness in args.harness.split(","):
                    protocol, profile = harness.split(":")
                    t1 = time.perf_counter()
                    r = run_cell(policy, protocol, profile, problems, svc, scorers, args.seeds, args.temperature,
                                 args.greedy)
                    b = r["bucket"]
                    print(f"{policy:8} {harness:17} {fmt(r['asr'])} {fmt(b.get('product'))}  {fmt(b.get('shop'))} "
                          f"{fmt(b.get('voucher'))}  {fmt(r['pass_k'])} {fmt(r['upstream'])} {fmt(r['greedy'])} "
                          f"{r['steps']:5.1f} {r['calls']:5.1f} {r['ms_step']:7.3f}"
                          f"   ({time.perf_counter() - t1:.0f} s)", flush=True)
            synthetic = parser_accuracy(problems, values=True).as_dict()
    else:
        synthetic = None
    print("\nquery parser accuracy (hits / total)")
    rows = parser_report() + ([("generated", synthetic)] if synthetic else [])
    fields = ("bucket", "items", "price", "service", "voucher", "values")
    print(f"{'set':18} " + " ".join(f"{f:>16}" for f in fields))
    for name, acc in rows:
        cells = []
        for f in fields:
            a = acc.get(f)
            cells.append(f"{100 * a['rate']:5.1f}% {a['hits']:>4}/{a['total']:<4}" if a else f"{'–':>16}")
        print(f"{name:18} " + " ".join(f"{c:>16}" for c in cells))
    return 0


if __name__ == "__main__":
    run_script(main)
