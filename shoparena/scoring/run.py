"""Score a rollout file against a problem set in one call (what ``shoparena score`` runs).

:func:`score_run` loads the rollouts, joins them to problems, scores every sample, adds an unmatched entry
for each problem without a rollout (so strict's full-suite denominator and the per-axis totals see it), and
aggregates. The :class:`ScoreConfig` is returned with the result so a report says how it was made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shoparena.catalog.types import ProductLookup
from shoparena.errors import ConfigError, DataError
from shoparena.scoring.aggregate import aggregate
from shoparena.scoring.metrics import N_RESAMPLES
from shoparena.scoring.rollouts import Rollout, RolloutLoadReport, load_rollouts, match_rollouts
from shoparena.scoring.scorer import Scorer
from shoparena.scoring.similarity import TitleSimilarity, get_similarity
from shoparena.scoring.types import ParityFlags, ProblemScore, ScoreReport
from shoparena.tasks.types import Problem
from shoparena.types import Mode


class ScoreConfig(BaseModel):
    """Everything that changes a score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = "upstream"
    similarity: str = "lexical"
    """A :func:`shoparena.scoring.similarity.get_similarity` spec."""
    parity: ParityFlags = Field(default_factory=ParityFlags)
    think: bool = True
    """Think-mode format checking; False for no-think/ReAct trajectories."""
    suite_size: int | None = None
    """Strict denominator; default: the number of problems given."""
    ks: list[int] | None = None
    n_resamples: int = N_RESAMPLES
    confidence: float = 0.95
    seed: int = 0


class ScoreRun(BaseModel):
    """Per-problem scores, the aggregate, what loading saw, and the config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config: ScoreConfig
    problems: list[ProblemScore]
    aggregate: ScoreReport
    rollouts: dict[str, Any]


def score_rollouts(
    scorer: Scorer, problems: Sequence[Problem], matched: Mapping[str, Sequence[Rollout]]
) -> list[ProblemScore]:
    """One score per sample, and one unmatched entry per problem without a rollout, in problem order."""
    out: list[ProblemScore] = []
    for problem in problems:
        samples = matched.get(problem.problem_id, [])
        if not samples:
            out.append(scorer.unmatched(problem))
            continue
        for i, r in enumerate(samples):
            envelope = {"problem_id": r.problem_id, "status": r.status, "error": r.error, "dialogue": r.steps}
            out.append(scorer.score_steps(problem, envelope if r.kind == "envelope" else r.steps,
                                          sample=i, rollout_line=r.line))
    return out


def check_config(config: ScoreConfig, problems: Sequence[Problem], matched: Mapping[str, Sequence[Rollout]]) -> None:
    """Refuse a denominator or pass@k that would make the numbers meaningless (:class:`ConfigError`): a suite
    size below 1 or below the number of 3-bucket problems scored (ASR could pass 1.0), a k below 1, or a k
    above the most samples any problem has (pass@k needs k ≤ n)."""
    from shoparena.tasks.types import ASR_BUCKETS

    if config.suite_size is not None:
        scored = sum(1 for p in problems if p.bucket in ASR_BUCKETS)
        if config.suite_size < max(1, scored):
            raise ConfigError(f"suite size {config.suite_size} is smaller than the {scored} problems scored",
                              hint="the suite size is the strict denominator: at least the number of problems")
    if config.ks:
        most = max((len(v) for v in matched.values()), default=0)
        bad = sorted(k for k in config.ks if k < 1 or k > max(most, 1))
        if bad:
            raise ConfigError(f"pass@k with k={bad[0]}: k must be from 1 to the samples per problem ({most} here)",
                              hint="run more samples (-n) or ask for a smaller --k")


def score_run(
    lookup: ProductLookup,
    problems: Sequence[Problem],
    rollouts: str | os.PathLike[str] | Sequence[Rollout],
    config: ScoreConfig | None = None,
    *,
    similarity: TitleSimilarity | None = None,
) -> ScoreRun:
    """Load (unless given) and join the rollouts, score them, aggregate. ``similarity`` overrides
    ``config.similarity`` with a ready backend."""
    config = config or ScoreConfig()
    report = RolloutLoadReport()
    if isinstance(rollouts, str | os.PathLike):
        records = load_rollouts(rollouts, report, max_lines=config.parity.max_rollout_lines)
        if not records and report.malformed:
            line, reason = report.malformed[0]
            raise DataError(f"no usable rollout in {rollouts}: all {len(report.malformed)} lines are malformed "
                            f"(line {line}: {reason})", hint="pass step-list or ORO-envelope JSONL (docs/shoppingbench.md §7)")
    else:
        records = list(rollouts)
        report.records = len(records)
    matched = match_rollouts(problems, records, report)
    check_config(config, problems, matched)
    backend = similarity if similarity is not None else get_similarity(config.similarity)
    scorer = Scorer(lookup, mode=config.mode, similarity=backend, parity=config.parity, think=config.think)
    scores = score_rollouts(scorer, problems, matched)
    suite: int | dict[str, int] | None = config.suite_size
    if suite is None and config.mode == "strict":
        suite = {}
        for p in problems:
            suite[p.bucket] = suite.get(p.bucket, 0) + 1
    report_ = aggregate(scores, mode=config.mode, suite_size=suite, ks=config.ks,
                        n_resamples=config.n_resamples, confidence=config.confidence, seed=config.seed)
    return ScoreRun(config=config, problems=scores, aggregate=report_, rollouts=report.as_dict())
