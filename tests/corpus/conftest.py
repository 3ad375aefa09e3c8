"""Shared corpus fixtures: a small synthetic world and a real trajectory store filled by the real validator loop
(``process`` sandbox, rubric judge) with an agentic agent (react → axis A) and a sub-task agent (pipeline → axis B)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from shoparena.agents import agent_path
from shoparena.arena.validator import AgentSpec, ValidatorConfig, evaluate
from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.store import open_store
from shoparena.tasks.generator import generate_problems
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
    index = create_catalog(generate_catalog(600, seed=31), root / "cat")
    problems = generate_problems(index, n=12, seed=7, paraphrases=1)
    dump_problems(problems, root / "problems.jsonl")
    url = f"sqlite:///{root / 'store.db'}"
    with open_store(url) as store:
        for agent_id, name, model in (("react", "react", "policy:careful"), ("pipeline", "pipeline", "policy:careful"),
                                      ("react-expert", "react", "policy:expert")):
            config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, validator_hotkey="5Fval",
                                     model=model)
            evaluate(AgentSpec(path=str(agent_path(name)), agent_id=agent_id, miner_hotkey=f"5Fminer-{agent_id}"),
                     problems, root / "cat", store, config)
    return CorpusWorld(catalog=root / "cat", problems=problems, problems_file=root / "problems.jsonl",
                       store_url=url)
