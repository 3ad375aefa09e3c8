"""The ShoppingBench rule scorer (docs/shoppingbench.md §7): per-item and per-problem scores in ``upstream`` or
``strict`` mode, pluggable title similarity, format/length rewards, aggregation with ASR per bucket,
pass@k / pass^k and bootstrap intervals, and rollout-file loading.

Typical use::

    from shoparena.scoring import Scorer, aggregate
    scorer = Scorer(index, mode="strict")
    scores = [scorer.score_steps(problem, steps) for problem, steps in pairs]
    report = aggregate(scores, mode="strict", suite_size=len(problems))
"""

from shoparena.scoring.aggregate import aggregate
from shoparena.scoring.format import format_reward, length_reward, trajectory_format
from shoparena.scoring.metrics import bootstrap_ci, pass_at_k, pass_hat_k
from shoparena.scoring.rollouts import Rollout, RolloutLoadReport, load_rollouts, match_rollouts
from shoparena.scoring.run import ScoreConfig, ScoreRun, score_rollouts, score_run
from shoparena.scoring.scorer import Scorer, is_successful
from shoparena.scoring.similarity import (
    EmbeddingSimilarity,
    Encoder,
    LexicalSimilarity,
    PrecomputedSimilarity,
    SentenceTransformerEncoder,
    TitleSimilarity,
    get_similarity,
    register_similarity,
    similarity_names,
)
from shoparena.scoring.steps import last_recommendation, split_ids
from shoparena.scoring.types import (
    FIELDS,
    AxisScore,
    BucketReport,
    ItemScore,
    Mode,
    ParityFlags,
    ProblemScore,
    ScoreReport,
)

__all__ = [
    "FIELDS",
    "AxisScore",
    "BucketReport",
    "EmbeddingSimilarity",
    "Encoder",
    "ItemScore",
    "LexicalSimilarity",
    "Mode",
    "ParityFlags",
    "PrecomputedSimilarity",
    "ProblemScore",
    "Rollout",
    "RolloutLoadReport",
    "ScoreConfig",
    "ScoreReport",
    "ScoreRun",
    "Scorer",
    "SentenceTransformerEncoder",
    "TitleSimilarity",
    "aggregate",
    "bootstrap_ci",
    "format_reward",
    "get_similarity",
    "is_successful",
    "last_recommendation",
    "length_reward",
    "load_rollouts",
    "match_rollouts",
    "pass_at_k",
    "pass_hat_k",
    "register_similarity",
    "score_rollouts",
    "score_run",
    "similarity_names",
    "split_ids",
    "trajectory_format",
]
