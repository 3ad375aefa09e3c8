"""Problems: the schema, loaders (upstream JSONL, ORO suites), the offline generator, constraint predicates, leak
clusters, the leak guard and the problem banks.

The public interface (``from shoparena.tasks import Problem, load_problems, BankSet``); names load lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoparena._lazy import lazy_exports

if TYPE_CHECKING:
    from shoparena.tasks.banks import BankConfig, BankSet
    from shoparena.tasks.clusters import GUARD_VERSION, ClusterConfig, build_clusters
    from shoparena.tasks.generator import GenerationReport, generate_problems
    from shoparena.tasks.guard import prove
    from shoparena.tasks.loader import (
        ProblemLoadReport,
        derive_problem_id,
        dump_problems,
        load_problems,
        problem_row,
    )
    from shoparena.tasks.stats import problem_stats
    from shoparena.tasks.types import ASR_BUCKETS, BUCKETS, Problem, RewardItem

#: Public name → ``module`` (same name) or ``module:attr`` under this package; imported on first use.
_EXPORTS: dict[str, str] = {
    "ASR_BUCKETS": "types",
    "BankConfig": "banks",
    "BankSet": "banks",
    "BUCKETS": "types",
    "build_clusters": "clusters",
    "ClusterConfig": "clusters",
    "derive_problem_id": "loader",
    "dump_problems": "loader",
    "generate_problems": "generator",
    "GenerationReport": "generator",
    "GUARD_VERSION": "clusters",
    "load_problems": "loader",
    "Problem": "types",
    "problem_row": "loader",
    "problem_stats": "stats",
    "ProblemLoadReport": "loader",
    "prove": "guard",
    "RewardItem": "types",
}
__all__ = [
    "ASR_BUCKETS",
    "BUCKETS",
    "GUARD_VERSION",
    "BankConfig",
    "BankSet",
    "ClusterConfig",
    "GenerationReport",
    "Problem",
    "ProblemLoadReport",
    "RewardItem",
    "build_clusters",
    "derive_problem_id",
    "dump_problems",
    "generate_problems",
    "load_problems",
    "problem_row",
    "problem_stats",
    "prove"
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
