"""Shared corpus fixtures: the small real world of :mod:`shoparena.corpus.testing` (a synthetic catalog, problems and
a store filled by the real validator loop: react → axis A, pipeline → axis B, react-expert)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from shoparena.corpus.testing import seed_world
from shoparena.tasks.loader import dump_problems
from shoparena.tasks.types import Problem


@dataclass(frozen=True)
class CorpusWorld:
    catalog: Path
    """Catalog directory (index inside)."""
    problems: list[Problem]
    problems_file: Path
    store_url: str
    """SQLite store holding one record per (agent, problem): react (axis A) and pipeline (axis B) on every
    problem (``policy:careful``), plus react with ``policy:expert`` (agent id ``react-expert``)."""


@pytest.fixture(scope="session")
def corpus_world(tmp_path_factory: pytest.TempPathFactory) -> CorpusWorld:
    root = tmp_path_factory.mktemp("corpus")
    world = seed_world(root)
    dump_problems(world.problems, root / "problems.jsonl")
    return CorpusWorld(catalog=world.catalog, problems=world.problems, problems_file=root / "problems.jsonl",
                       store_url=world.store_url)
