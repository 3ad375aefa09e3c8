"""A small, real trajectory world for tests and benches: a synthetic catalog, generated problems with leak
clusters, and a SQLite store filled by the real validator loop (``process`` sandbox, rubric judge) with an
agentic agent (``react`` → axis A), a sub-task agent (``pipeline`` → axis B) and ``react`` on a stronger policy.

Deterministic in its arguments: the same call gives the same problems and the same trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shoparena.tasks.types import Problem

__all__ = ["AGENTS", "SeedWorld", "seed_world"]

AGENTS: tuple[tuple[str, str, str], ...] = (
    ("react", "react", "policy:careful"),
    ("pipeline", "pipeline", "policy:careful"),
    ("react-expert", "react", "policy:expert"),
)
"""``(agent id, built-in agent, model)`` evaluated on every problem."""


@dataclass(frozen=True)
class SeedWorld:
    catalog: Path
    """Catalog directory (index inside)."""
    problems: list[Problem]
    store_url: str
    """One record per (agent of :data:`AGENTS`, problem)."""
    problems_file: Path
    """``problems.jsonl``: the problems with their ground truth (``corpus build --problems``; the store's records
    hold none, and a corpus built without it exports no GRPO prompts)."""


def seed_world(root: Path, *, catalog_size: int = 600, n_problems: int = 12, catalog_seed: int = 31,
               problem_seed: int = 7) -> SeedWorld:
    """Build the world under ``root`` (``cat/``, ``problems.jsonl``, ``store.db``)."""
    from shoparena.agents import agent_path
    from shoparena.catalog.directory import create_catalog
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.store import open_store
    from shoparena.tasks.generator import generate_problems
    from shoparena.tasks.loader import dump_problems
    from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate

    index = create_catalog(generate_catalog(catalog_size, seed=catalog_seed), root / "cat")
    problems = generate_problems(index, n=n_problems, seed=problem_seed, paraphrases=1)
    dump_problems(problems, root / "problems.jsonl")
    url = f"sqlite:///{root / 'store.db'}"
    with open_store(url) as store:
        for agent_id, name, model in AGENTS:
            config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, validator_hotkey="5Fval", model=model)
            evaluate(AgentSpec(path=str(agent_path(name)), agent_id=agent_id, miner_hotkey=f"5Fminer-{agent_id}"),
                     problems, root / "cat", store, config)
    return SeedWorld(catalog=root / "cat", problems=problems, store_url=url, problems_file=root / "problems.jsonl")
