"""The filter's one configuration object, :class:`FilterConfig` (``docs/paper.md`` §3; ``docs/corpus-design.md``).

Validated once when built (pydantic, frozen); the stages copy the few values they need into plain attributes so
no per-row work touches pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FilterConfig"]


class FilterConfig(BaseModel):
    """Every knob of :func:`shoparena.corpus.filter.run_filters`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_judge_score: float = Field(default=0.5, ge=0.0, le=1.0)
    """Judge gate threshold (inclusive): a row passes when its ``judge_score`` — or, when that is missing, its
    run's reasoning ``coefficient`` — is at least this. The paper's value is not public (``docs/training.md`` §2.2)."""
    judge_missing: Literal["keep", "reject"] = "keep"
    """What the judge gate does with a row that has neither a judge score nor a coefficient (imports such as ORO
    SFT rows): ``keep`` lets it through (the structural gates still apply), ``reject`` counts it as
    ``judge_missing``."""
    max_length: int = Field(default=14_336, ge=1)
    """Format gate: most tokens a whole trace (tools + messages) may take under the trainer's tokenizer."""
    tokenizer: str | None = None
    """None: the fast conservative estimate of :func:`shoparena.corpus.filter.tokens.estimate_tokens`. A path (or
    hub id already in the local cache): a ``transformers`` ``AutoTokenizer`` loaded on first use, applied with its
    chat template when it has one."""
    per_problem: int = Field(default=2, ge=1, le=2)
    """Dedup/rank: rows kept per problem (the paper keeps one or two)."""
    require_success: bool = False
    """Outcome gate (Trac's *freeze*): only rows the rule scorer marked successful reach ``kept``; failed rows
    count as ``outcome_failed`` and unscored ones as ``outcome_unscored``. Off by default: the paper's filter is
    structural and does not read the outcome."""
    allow_failed: bool = True
    """Whether structurally good but *failed* rows (``success is False``) are admitted at all — preference data
    (KTO's undesirable side) needs them. With ``require_success=False`` they stay in ``kept``; with
    ``require_success=True`` they leave ``kept`` (counted ``outcome_failed``) but are collected in
    ``FilterResult.failed``. ``False`` drops them outright (``outcome_failed``, nothing collected)."""
    axis_keep: tuple[str, ...] = ("A",)
    """Axis split: axes kept. Axis-B rows not kept here go to ``FilterResult.axis_b`` for the rewriter."""
    check_ids: bool = True
    """Format gate: resolve every recommended id through ``known_ids`` (the catalog). Without a ``known_ids``
    callable the ids are only checked for shape, and the format report says so (``notes["ids_checked"]``)."""
