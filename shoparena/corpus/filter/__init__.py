"""The structural-quality filter (``docs/paper.md`` §3; ``docs/training.md`` §2.2): reasoning-coefficient gate, the five
hard format rejects, axis split, per-problem dedup and structural ranking, and an optional outcome gate.

Owns :class:`FilterConfig`, the stages (:class:`JudgeGate`, :class:`FormatGate`, :class:`AxisSplit`,
:class:`DedupRank`, :class:`OutcomeGate` — each ``Stage.run(rows) -> Iterator[Trajectory]`` with a
:class:`~shoparena.corpus.types.StageReport`) and :func:`run_filters`. Rows are
:class:`~shoparena.corpus.types.Trajectory` dataclasses; no stage builds a pydantic model per row.
"""

from shoparena.corpus.filter.base import Stage
from shoparena.corpus.filter.config import FilterConfig
from shoparena.corpus.filter.gates import FORMAT_REASONS, AxisSplit, FormatGate, JudgeGate, OutcomeGate
from shoparena.corpus.filter.rank import DedupRank, features, score
from shoparena.corpus.filter.run import FilterResult, build_stages, run_filters
from shoparena.corpus.filter.tokens import HFTokenCounter, estimate_tokens

__all__ = ["FORMAT_REASONS", "AxisSplit", "DedupRank", "FilterConfig", "FilterResult", "FormatGate",
           "HFTokenCounter", "JudgeGate", "OutcomeGate", "Stage", "build_stages", "estimate_tokens", "features",
           "run_filters", "score"]
