"""Score records: per item, per problem, per run (docs/shoppingbench.md §7).

Every record is frozen and strict so a score can be stored beside its trajectory and compared across
re-scorings. Field names follow upstream's score dict (``gt``, ``rule``, ``product``, ``shop``, ``budget``,
``format``, ``length`` and the four ``FIELDS``) and ORO's aggregate names (``ground_truth_rate``,
``success_rate``, ``format_score``, ``field_matching``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena.types import MODES as MODES
from shoparena.types import Mode as Mode

#: The per-axis field names, exactly as upstream's ``FIELDS`` (docs/shoppingbench.md §7.2).
FIELDS: tuple[str, ...] = ("title", "price", "service", "sku & attrs")

#: Title-similarity thresholds per mode (§7.2) and for the Knowledge bucket (§7.7).
TITLE_THRESHOLD: dict[str, float] = {"upstream": 0.5, "strict": 0.7}
KNOWLEDGE_TITLE_THRESHOLD = 0.8
#: ORO's multiplier on a step's format score when ``extra_info.timestamp`` is missing or ≤ 0 (§7.3).
TIMESTAMP_MISSING_PENALTY = 0.5
#: Upstream ``load_rollout_outputs`` stops after this many lines (§7.5, §9.4); parity flag only.
UPSTREAM_MAX_ROLLOUT_LINES = 501

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ParityFlags(BaseModel):
    """Switches that reproduce known upstream/ORO behaviour which shoparena fixes by default.

    ``ParityFlags()`` is the fixed default; :meth:`exact` turns every switch to the behaviour found in the
    upstream and ORO source, for byte-level comparisons with their published numbers.
    """

    model_config = _FROZEN

    max_rollout_lines: int | None = None
    """Read at most this many rollout lines (upstream reads 501: §7.5 quirk). ``None`` reads all."""
    format_source: Literal["content", "message"] = "content"
    """What ``format_reward`` checks per step: the raw ``completion.content`` (default), or, as the upstream
    and ORO code do for product/shop/voucher, ``completion.message`` re-rendered in fixed tag order (which
    hides order/duplicate errors of the raw output). Knowledge always uses ``content`` (upstream ``eval_web``)."""
    format_order_check: bool = True
    """Require think → tool_call → response order (§7.3). The upstream/ORO ``prm.py`` we read has no such
    check; ``False`` reproduces it."""
    ids_string_only: bool = False
    """Upstream/ORO ignore a ``recommend_product`` whose ``product_ids`` is not a string. By default we also
    accept a JSON array of ids and a lone ``product_id`` parameter (§4.4)."""

    @classmethod
    def exact(cls) -> ParityFlags:
        """Every switch set to the upstream/ORO code's behaviour."""
        return cls(max_rollout_lines=UPSTREAM_MAX_ROLLOUT_LINES, format_source="message",
                   format_order_check=False, ids_string_only=True)


class AxisScore(BaseModel):
    """Hits over atomic constraints on one axis of one item; ``score`` already applies the mode's rule
    for an absent axis (1 upstream, 0 strict)."""

    model_config = _FROZEN

    hits: int
    total: int
    score: float


class ItemScore(BaseModel):
    """One requested product (one ``reward[i]``) against the id recommended at position ``i``."""

    model_config = _FROZEN

    position: int
    gt_product_id: str
    product_id: str | None = None
    """The recommended id at this position (as split, unstripped in upstream mode), or None if missing."""
    resolved: bool = False
    """The id resolved to a catalog product."""
    gt: float = 0.0
    rule: float = 0.0
    short_circuit: bool = False
    """The id equals the GT id: rule 1 and every present axis reported hit (§7.2)."""
    axes: dict[str, AxisScore] = Field(default_factory=dict)
    title_similarity: float | None = None
    """Similarity of the candidate title to the (first) GT title, when computed."""
    price: float | None = None
    shop_id: str | None = None
    hit: bool = False
    """Counts as a hit for the shop/budget rules: resolved (upstream) / ``rule > 0`` (strict)."""


class ProblemScore(BaseModel):
    """The score of one trajectory (one sample) on one problem (§7.3–7.4)."""

    model_config = _FROZEN

    problem_id: str
    bucket: str
    mode: Mode
    similarity: str
    """Name of the title-similarity backend that produced ``title`` hits."""
    matched: bool = True
    """A rollout was found for this problem. Unmatched problems score 0 and fail; upstream aggregation
    leaves them out of the denominator, strict counts them (§7.5)."""
    sample: int = 0
    """Index of this sample among the problem's rollouts (n samples ⇒ pass@k)."""
    success: bool = False
    gt: float = 0.0
    rule: float = 0.0
    fields: dict[str, float] = Field(default_factory=dict)
    """Per-axis field scores averaged over ``len(reward)`` (upstream ``FIELDS``)."""
    axis_hits: dict[str, int] = Field(default_factory=dict)
    axis_totals: dict[str, int] = Field(default_factory=dict)
    """Summed over every reward item (items with no resolved product count their totals with 0 hits)."""
    product: float = 0.0
    """Fraction of positions whose id resolved to a real product (product bucket: first id only)."""
    shop: float | None = None
    """Shop bucket: 1 iff every position hits and all hit products share one ``shop_id``."""
    budget: float | None = None
    """Voucher bucket: 1 iff every position hits and the bundle fits the budget (with the voucher)."""
    bundle_total: float | None = None
    bundle_discounted: float | None = None
    """Voucher bucket: price of the hit products, and after the voucher when it applies."""
    kw: float | None = None
    """Knowledge bucket: the clue word occurs in the recommended product's title or description (§7.7)."""
    format: float = 0.0
    length: float = 0.0
    steps: int = 0
    recommended_ids: list[str] = Field(default_factory=list)
    items: list[ItemScore] = Field(default_factory=list)
    status: str | None = None
    """ORO envelope status (``SUCCESS``/``FAILED``/``TIMED_OUT``) when scored from an envelope."""
    error: str | None = None
    rollout_line: int | None = None
    """Line of the rollout file this sample came from."""


class BucketReport(BaseModel):
    """Aggregates over one set of problems (all ASR buckets, one bucket, or Knowledge)."""

    model_config = _FROZEN

    total_problems: int
    """The denominator: scored problems (upstream) or the suite size (strict)."""
    scored_problems: int
    successful_problems: float
    """Sum over problems of the per-problem success rate (an integer count with one sample each)."""
    asr: float
    gt_rate: float
    rule_mean: float
    format_mean: float
    length_mean: float
    product_rate: float
    field_scores: dict[str, float] = Field(default_factory=dict)
    """Mean per-problem field score (upstream's "match score" per field)."""
    axis_rates: dict[str, float | None] = Field(default_factory=dict)
    """Micro rates: Σ axis hits / Σ axis totals over items; None when no item carries the axis."""
    shop_rate: float | None = None
    budget_rate: float | None = None
    kw_rate: float | None = None


class ScoreReport(BaseModel):
    """A run's aggregate (§7.5): 3-bucket ASR overall and per bucket, Knowledge apart, pass@k."""

    model_config = _FROZEN

    mode: Mode
    similarity: list[str]
    total_problems: int
    scored_problems: int
    successful_problems: float
    asr: float
    asr_by_bucket: dict[str, float]
    gt_rate: float
    rule_mean: float
    format_mean: float
    length_mean: float
    product_rate: float
    field_scores: dict[str, float]
    axis_rates: dict[str, float | None]
    shop_rate: float | None = None
    budget_rate: float | None = None
    by_bucket: dict[str, BucketReport] = Field(default_factory=dict)
    knowledge: BucketReport | None = None
    """Knowledge bucket, kept out of the 3-bucket ASR (§7.7)."""
    samples_per_problem: tuple[int, int] = (0, 0)
    """(min, max) samples over scored problems."""
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    ci: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """Percentile bootstrap intervals over problems (``asr``, ``pass@k``)."""
    # ORO names (src/agent/scoring.py compute_aggregate)
    ground_truth_rate: float
    success_rate: float
    format_score: float
    field_matching: float
