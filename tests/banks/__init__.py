"""Tests of the leak-cluster guard and the problem banks; helpers shared by the modules below."""

from __future__ import annotations

import functools
import random
from pathlib import Path

from shoparena.tasks.loader import load_problems
from shoparena.tasks.types import Problem, RewardItem

DATA = Path(__file__).resolve().parent.parent / "data"
_STEMS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber brass cedar denim ember "
          "flint garnet hazel ivory jade khaki lilac maple navy olive pearl quartz ruby sage teal umber").split()
_WORDS = [f"{w}{i}" for w in _STEMS for i in range(10)]


@functools.cache
def upstream() -> tuple[Problem, ...]:
    """The 900 upstream ShoppingBench test problems."""
    return tuple(p for f in sorted((DATA / "shoppingbench").glob("*.jsonl")) for p in load_problems(f))


@functools.cache
def suites() -> dict[str, tuple[Problem, ...]]:
    """The three ORO suites, name → problems in suite order."""
    return {f.stem: tuple(load_problems(f)) for f in sorted((DATA / "oro_suites").glob("*.json"))}


def real_problems() -> list[Problem]:
    """All 990 real problems (upstream + suites)."""
    return [*upstream(), *(p for s in suites().values() for p in s)]


def synthetic_bank(n_clusters: int, seed: int = 0, *, prefix: str = "s") -> list[Problem]:
    """Problems in ``n_clusters`` planted clusters of 1–3 members (members share a generator ``cluster_id``);
    random-word queries (no two alike), unique GT ids, one weak constraint each, buckets product / shop."""
    rng = random.Random(f"{prefix}:{seed}")
    out: list[Problem] = []
    for c in range(n_clusters):
        bucket = rng.choice(("product", "shop"))
        for m in range(rng.randint(1, 3)):
            pid = f"{prefix}{seed}-{c}-{m}"
            items = [RewardItem(product_id=f"{pid}-gt{i}", title=[" ".join(rng.choices(_WORDS, k=6))],
                                service=["COD"]) for i in range(1 if bucket == "product" else 2)]
            query = " ".join(rng.choices(_WORDS, k=14)) + f" {pid}"
            out.append(Problem(problem_id=pid, bucket=bucket, query=query, reward=items,  # type: ignore[arg-type]
                               cluster_id=f"{prefix}{seed}-{c}"))
    return out
