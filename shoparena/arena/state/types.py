"""The arena's records (frozen pydantic) and errors, shaped like ORO's SDK models (docs/arena.md §2.1, §6, §8)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena.arena.weights import Finisher
from shoparena.errors import ShopArenaError
from shoparena.types import Status

__all__ = [
    "AgentPublic", "ArenaError", "ClaimWork", "CompleteRequest", "CompleteResult", "Conflict", "Finisher",
    "Forbidden", "Invalid", "LeaderboardRow", "LeaseExpired", "NotFound", "ProblemProgress", "QualifierPublic",
    "RaceDetail", "RacePublic", "ScoreComponents", "SeedCommitment", "Standings", "SubmitResult", "SuitePublic",
    "TopAgent", "VersionPublic", "Violation", "WorkItemStatus",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
VersionState = Literal["RECEIVED", "QUEUED", "RUNNING", "ELIGIBLE", "DISCARDED", "CANCELLED"]
RaceStatus = Literal["QUALIFYING_OPEN", "RACE_RUNNING", "RACE_COMPLETE", "CANCELLED"]


class ArenaError(ShopArenaError):
    """A refused arena operation; ``status`` is the HTTP status the API answers, ``code`` its error name."""

    status = 400
    code = "ArenaError"


class NotFound(ArenaError):
    status, code = 404, "NotFound"


class Forbidden(ArenaError):
    status, code = 403, "Forbidden"


class Conflict(ArenaError):
    status, code = 409, "Conflict"


class LeaseExpired(Conflict):
    code = "LeaseExpired"


class Invalid(ArenaError):
    status, code = 422, "Invalid"


# -- submissions -------------------------------------------------------------------------------------------------
class Violation(BaseModel):
    model_config = _FROZEN

    rule: str
    severity: str
    message: str
    line: int | None = None


class SubmitResult(BaseModel):
    """ORO's ``SubmitAgentResponse`` plus the gate's findings and the cooldown left."""

    model_config = _FROZEN

    admission_status: Literal["ACCEPTED", "REJECTED"]
    admission_reason: str | None = None
    """``COOLDOWN``, ``INVALID_FILE`` (gate), ``NOT_REGISTERED_ONCHAIN``, ``BANNED``, ``INVALID_NAME``."""
    hotkey: str
    agent_id: str | None = None
    agent_version_id: str | None = None
    version_number: int | None = None
    submission_id: str | None = None
    next_allowed_at: float | None = None
    remaining_seconds: float = 0.0
    cooldown: Literal["none", "reduced", "full"] | None = None
    violations: list[Violation] = Field(default_factory=list)
    similarity: float | None = None
    similar_to: str | None = None


class VersionPublic(BaseModel):
    model_config = _FROZEN

    agent_version_id: str
    agent_id: str
    version_number: int
    state: VersionState
    state_reason: str | None
    code_sha256: str
    submitted_at: float
    qualifying_score: float | None
    eligible_at: float | None
    eliminated_in_race_number: int | None


class AgentPublic(BaseModel):
    model_config = _FROZEN

    agent_id: str
    agent_name: str
    hotkey: str
    created_at: float
    version_count: int
    latest: VersionPublic | None


# -- validator work ----------------------------------------------------------------------------------------------
class ClaimWork(BaseModel):
    """ORO's ``ClaimWorkResponse``: one lease on one work item. ``eval_run_id`` names the lease in every later
    call (heartbeat, progress, complete, agent, problems)."""

    model_config = _FROZEN

    eval_run_id: str
    work_item_id: str
    kind: Literal["QUALIFYING", "RACE"]
    race_id: str
    suite_id: str
    agent_id: str
    agent_version_id: str
    version_number: int
    miner_hotkey: str
    code_sha256: str
    problem_ids: list[str]
    lease_expires_at: float
    attempt: int


class ProblemProgress(BaseModel):
    """ORO's ``ProblemProgressUpdate``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    problem_id: str
    status: str
    score: float | None = None
    reasoning_score: float | None = None
    execution_time: float | None = None


class ScoreComponents(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    ground_truth_rate: float | None = None
    success_rate: float | None = None
    format_score: float | None = None
    field_matching: float | None = None
    total_problems: int | None = None
    successful_problems: float | None = None
    scored_problems: int | None = None
    reasoning_quality: float | None = None
    reasoning_coefficient: float | None = None
    judge_inference_failed: int | None = None
    judge_inference_total: int | None = None
    richness: float | None = None
    """Mean agentic richness of the run's successful trajectories (``shoparena.scoring.richness``)."""
    richness_weight: float | None = None
    """The richness weight the validator folded into ``validator_score`` (None: a validator that predates the
    option, i.e. 0)."""


class CompleteRequest(BaseModel):
    """ORO's complete body; :meth:`from_summary` builds it from ``validator.EvaluationSummary``."""

    model_config = _FROZEN

    terminal_status: Status
    validator_score: float | None = None
    score_components: ScoreComponents = Field(default_factory=ScoreComponents)
    failure_reason: str | None = None
    validator_run_id: str | None = None
    """The validator's own evaluation id (the trajectory records' ``eval_run_id``)."""
    sandbox_metadata: dict[str, Any] | None = None

    @classmethod
    def from_summary(cls, summary: Any) -> CompleteRequest:
        """From an ``EvaluationSummary`` (or anything with its fields)."""
        fields = ScoreComponents.model_fields
        comps = ScoreComponents(**{k: getattr(summary, k) for k in fields if hasattr(summary, k)})
        return cls(terminal_status=summary.status, validator_score=summary.final_score, score_components=comps,
                   failure_reason=getattr(summary, "failure_reason", None),
                   validator_run_id=getattr(summary, "eval_run_id", None),
                   sandbox_metadata={"sandbox": getattr(summary, "sandbox", None),
                                     "duration_seconds": getattr(summary, "seconds", None)})


class WorkItemStatus(BaseModel):
    model_config = _FROZEN

    work_item_id: str
    included_success_count: int
    required_successes: int
    failures: int
    is_closed: bool
    status: str


class CompleteResult(BaseModel):
    """ORO's ``CompleteRunResponse``."""

    model_config = _FROZEN

    status: str
    work_item: WorkItemStatus
    agent_version_became_eligible: bool = False
    final_score: float | None = None


# -- races -------------------------------------------------------------------------------------------------------
class RacePublic(BaseModel):
    model_config = _FROZEN

    race_id: str
    race_number: int
    status: RaceStatus
    qualifying_suite_id: str | None
    race_suite_id: str | None
    opened_at: float
    qualifying_closes_at: float
    race_started_at: float | None
    race_deadline_at: float | None
    race_completed_at: float | None
    qualifying_threshold: float | None
    commitment: str
    incumbent_version_id: str | None
    winner_agent_version_id: str | None
    winner_score: float | None
    promoted: bool
    code_release_at: float | None
    qualifier_count: int
    scored_count: int


class QualifierPublic(BaseModel):
    """``race_score`` / ``race_rank`` are None until RACE_COMPLETE (and None after it for a DNF)."""

    model_config = _FROZEN

    agent_version_id: str
    miner_hotkey: str
    qualification_type: Literal["INCUMBENT", "SCORED"]
    qualifying_score: float | None
    race_score: float | None
    race_rank: int | None
    eliminated: bool


class SeedCommitment(BaseModel):
    """The commitment from the moment the race opens; the secret, beacon and world seed once revealed."""

    model_config = _FROZEN

    race_id: str
    commitment: str
    qualifying_closes_at: float
    revealed: bool
    secret: str | None = None
    beacon_block: int | None = None
    beacon: str | None = None
    beacon_source: str | None = None
    world_seed: str | None = None


class RaceDetail(BaseModel):
    model_config = _FROZEN

    race: RacePublic
    qualifiers: list[QualifierPublic]
    seed: SeedCommitment


class SuitePublic(BaseModel):
    """Problem ids are listed for qualifying suites drawn from the open bank only (held-out and static problems
    are never published)."""

    model_config = _FROZEN

    suite_id: str
    kind: Literal["QUALIFYING", "RACE"]
    source: str
    race_id: str | None
    problem_count: int
    problem_ids: list[str] | None
    created_at: float


class LeaderboardRow(BaseModel):
    model_config = _FROZEN

    rank: int
    agent_version_id: str
    agent_id: str
    agent_name: str
    miner_hotkey: str
    version_number: int
    state: VersionState
    qualifying_score: float | None
    last_race_number: int | None
    last_race_score: float | None
    races_won: int
    is_top_agent: bool
    eliminated_in_race_number: int | None


class TopAgent(BaseModel):
    """ORO's ``TopAgentResponse`` plus the embargo: ``code`` only once ``release_state`` is RELEASED."""

    model_config = _FROZEN

    agent_version_id: str
    agent_id: str
    agent_name: str
    miner_hotkey: str
    top_score: float | None
    challenge_threshold: float
    margin: float
    race_id: str
    promoted_at: float
    code_available_at: float
    release_state: Literal["HIDDEN", "RELEASED"]
    code_sha256: str
    code: str | None = None


class Standings(BaseModel):
    """The newest RACE_COMPLETE race's finishers (None from ``Arena.standings()`` while no race completed)."""

    model_config = _FROZEN

    race_id: str
    race_number: int
    completed_at: float
    top_hotkey: str | None
    finishers: list[Finisher]
