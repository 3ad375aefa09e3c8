"""Small seeded worlds for tests that run agents: a synthetic catalog with its index and a problem file."""

from __future__ import annotations

from pathlib import Path

from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.loader import dump_problems
from shoparena.tasks.types import Problem


def small_world(root: Path, *, size: int, catalog_seed: int, n: int, problem_seed: int
                ) -> tuple[Path, list[Problem], Path]:
    """``(catalog dir, problems, problems.jsonl)`` under ``root``: ``size`` products, ``n`` independent problems."""
    index = create_catalog(generate_catalog(size, seed=catalog_seed), root / "cat")
    problems = generate_problems(index, n=n, seed=problem_seed, paraphrases=0)
    dump_problems(problems, root / "problems.jsonl")
    return root / "cat", problems, root / "problems.jsonl"
