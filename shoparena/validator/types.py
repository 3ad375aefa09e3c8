"""What an evaluation takes and gives back: the validator's config, the agent version, the per-problem lines and
the summary with ORO's score components (docs/arena.md §6)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena.types import Mode
from shoparena.validator.sandbox.types import SandboxLimits

__all__ = ["EPISODE_TOKENS_MAX", "AgentSpec", "EpisodeTokens", "EvaluationSummary", "ProblemLine", "ValidatorConfig"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

EPISODE_TOKENS_MAX = 1_000_000_000
"""The largest episode budget in generated tokens: far above any episode, and small enough for every place it is
written (a JSON integer of 64 bits)."""
EpisodeTokens = Annotated[int, Field(ge=1, le=EPISODE_TOKENS_MAX)]
"""An episode's budget in generated tokens, the clock that does not depend on concurrency (``episode_tokens`` of
the validator's, the run's, the evaluation's and the RS stage's configs)."""


class ValidatorConfig(BaseModel):
    """How an evaluation runs (``validate``, and ``run`` without its judge); part of it becomes the records'
    pipeline version."""

    model_config = _FROZEN

    model: str = "policy:expert"
    """The default inference model (``SHOPARENA_MODEL`` in the sandbox); always allowed."""
    models: tuple[str, ...] = ()
    """Further models agents may ask for by name (the gateway allowlist is ``model`` plus these)."""
    judge: str = "rubric"
    """``rubric`` or ``llm:<model-uri>[,<model-uri>…]``."""
    sandbox: str = "bubblewrap"
    allow_non_hermetic: bool = False
    """Permit the ``process`` sandbox (validator-logic tests only; never for untrusted code)."""
    workers: int | None = None
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    episode_tokens: EpisodeTokens | None = None
    """Completion tokens one episode may generate (the gateway's per-run budget): an episode that asks for more is
    timed out (:func:`~shoparena.validator.core.budget_timeout`). A clock in the episode's own work, so outcomes do
    not depend on how many episodes share the model; ``None``: only the wall clock of ``limits``."""
    scorer_mode: Mode = "strict"
    similarity: str = "lexical"
    validator_hotkey: str | None = None
    temperature: float = 0.0
    seed: int = 0
    """Base of the per-(problem, sample) seeds (``SHOPARENA_SEED``; see ``core.sample_seed``)."""
    search_mode: Mode = "upstream"
    """Argument handling of the gateway's search service (its flavour is always ``oro``)."""
    protocol: Literal["native", "tags"] | None = None
    """``SHOPARENA_PROTOCOL`` for the built-in ReAct agents (None: their default, native)."""
    richness_weight: float = Field(0.0, ge=0.0, le=1.0)
    """The agentic-richness incentive (``shoparena.scoring.richness.fold``): the share of a successful trajectory's
    score that depends on the LLM having chosen its calls. 0 = ORO's scoring; > 0 is named in the pipeline version."""


class AgentSpec(BaseModel):
    """What is evaluated: one version of one miner's agent file."""

    model_config = _FROZEN

    path: str
    agent_id: str
    agent_version: str = "v1"
    miner_hotkey: str | None = None


class ProblemLine(BaseModel):
    model_config = _FROZEN

    problem_id: str
    bucket: str
    status: str
    success: bool
    judge_score: float | None
    judge_ok: bool | None
    recorded: bool
    seconds: float
    richness: float | None = None
    """The trajectory's agentic richness (``shoparena.scoring.richness``); None without a trace."""


class EvaluationSummary(BaseModel):
    """ORO's score components (docs/arena.md §6) plus the run's bookkeeping."""

    model_config = _FROZEN

    eval_run_id: str
    status: Literal["SUCCESS", "FAILED"]
    failure_reason: str | None = None
    ground_truth_rate: float
    success_rate: float
    format_score: float
    field_matching: float
    total_problems: int
    successful_problems: float
    scored_problems: int
    reasoning_quality: float | None
    reasoning_coefficient: float | None
    final_score: float | None
    """``success_rate · coeff(q)`` folded with the richness incentive at ``richness_weight`` (0: ORO's)."""
    judge_inference_failed: int
    judge_inference_total: int
    records_written: int
    records_skipped: int
    """Problems already recorded by an earlier attempt of this evaluation (resume)."""
    sandbox: str
    problems: list[ProblemLine]
    seconds: float
    richness: float | None = None
    """Mean richness of the run's successful trajectories (the ``R̄`` of the fold; None when none succeeded)."""
    richness_weight: float = 0.0
    """The weight ``final_score`` was folded with."""
