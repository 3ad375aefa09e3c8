"""The trajectory record: one per (evaluation run, problem, scoring-pipeline version), append-only, with full
provenance (docs/arena.md §11.3, paper §2 "one canonical trajectory record per evaluation"), plus the store's query,
row, stats and verification models.

Records are content-addressed: ``record_id`` is the SHA-256 of the record's canonical JSON (every field but
``record_id`` and ``created_at``), so the same evaluation scored by the same pipeline always has the same id, and
``idempotency_key`` (``eval_run_id|problem_id|pipeline_version``) makes a re-append after a crash a no-op. A
re-score under a new pipeline writes new records; nothing is ever updated or deleted.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from shoparena.types import Axis, Mode, Status

_FROZEN = ConfigDict(frozen=True, extra="forbid")
#: Fields left out of the content hash: the id itself and the time the record was sealed.
UNHASHED_FIELDS = ("record_id", "created_at")


def canonical_json(obj: Any) -> bytes:
    """Sorted-key compact JSON: the bytes every content hash in the store is taken over."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def content_id(body: dict[str, Any]) -> str:
    """The record id of a record body (a ``model_dump()`` or parsed stored JSON): SHA-256 of its canonical JSON
    without :data:`UNHASHED_FIELDS`."""
    return sha256_json({k: v for k, v in body.items() if k not in UNHASHED_FIELDS})


def body_problems(body: dict[str, Any]) -> list[str]:
    """Everything wrong with a sealed record body: each derived field (record id, trace and call-log hashes,
    pipeline version, idempotency key) recomputed from the content and compared. Empty when the record is sound."""
    found: list[str] = []
    pv = sha256_json(body.get("pipeline"))[:16]
    expected = {
        "trace_sha256": sha256_json({"steps": body.get("steps"), "messages": body.get("messages")}),
        "call_log_sha256": sha256_json(body.get("call_log")),
        "pipeline_version": pv,
        "idempotency_key": f"{body.get('eval_run_id')}|{body.get('problem_id')}|{pv}",
        "record_id": content_id(body),
    }
    for name, want in expected.items():
        if body.get(name) != want:
            found.append(f"{name} is {body.get(name)!r}, content gives {want!r}")
    return found


class PipelineVersion(BaseModel):
    """Everything that can change a score: re-scoring under another pipeline appends new records."""

    model_config = _FROZEN

    scorer: str
    """e.g. ``shoparena-rule/1``."""
    scorer_mode: Mode
    similarity: str
    catalog_sha256: str
    judge: str
    """``rubric`` or the judge model URI(s)."""
    judge_prompt_version: str
    package_version: str

    def key(self) -> str:
        """Short stable id of this pipeline (first 16 hex of its hash)."""
        return sha256_json(self.model_dump())[:16]


class TrajectoryRecord(BaseModel):
    model_config = _FROZEN

    record_id: str = ""
    """SHA-256 of the canonical record (filled by :meth:`sealed`)."""
    idempotency_key: str = ""
    eval_run_id: str
    agent_id: str
    agent_version: str
    agent_code_sha256: str
    miner_hotkey: str | None = None
    validator_hotkey: str | None = None
    problem_id: str
    suite: str | None = None
    """Bank or suite the problem came from."""
    cluster_id: str | None = None
    bucket: str
    status: Status
    """The sandbox envelope status."""
    steps: list[dict[str, Any]] = Field(default_factory=list)
    """The trace as upstream/ORO step records."""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The same trace as canonical OpenAI messages."""
    trace_sha256: str = ""
    call_log: list[dict[str, Any]] = Field(default_factory=list)
    """The gateway's records for this run (ground truth of what the agent did)."""
    call_log_sha256: str = ""
    axis: Axis = "none"
    """From the call log: all searches agentic (A), all Python-issued (B), both, or no search."""
    outcome: dict[str, Any]
    """The rule scorer's result for this problem (success, gt, rule, per-axis fields and hits, mode …)."""
    success: bool
    judge: dict[str, Any] | None = None
    """The verdict (score, gate, explanation, cited spans, judge, prompt_version, trace_sha256); None if not judged."""
    judge_score: float | None = None
    coefficient: float | None = None
    """The run's reasoning coefficient (from the mean judge score of its judged problems)."""
    pipeline: PipelineVersion
    pipeline_version: str = ""
    started_at: int | None = None
    """ms since the epoch."""
    finished_at: int | None = None
    created_at: int = 0
    """ms since the epoch, set when sealed (not part of the content hash)."""

    @property
    def is_sealed(self) -> bool:
        return bool(self.record_id)

    def sealed_body(self, created_at: int) -> dict[str, Any]:
        """The ``model_dump()`` of :meth:`sealed` without building the model (the store's fast path)."""
        pv = self.pipeline.key()
        body = self.model_dump(exclude=set(UNHASHED_FIELDS))
        body.update(trace_sha256=sha256_json({"steps": body["steps"], "messages": body["messages"]}),
                    call_log_sha256=sha256_json(body["call_log"]), pipeline_version=pv,
                    idempotency_key=f"{self.eval_run_id}|{self.problem_id}|{pv}")
        return {**body, "record_id": content_id(body), "created_at": created_at}

    def sealed(self, created_at: int) -> TrajectoryRecord:
        """This record with its hashes, pipeline version, idempotency key, record id and creation time filled."""
        return TrajectoryRecord.model_validate(self.sealed_body(created_at))


StrFilter = str | tuple[str, ...] | None
"""One value, or any of several (``IN``)."""


class RecordQuery(BaseModel):
    """Which records to read: every set field must match (AND); ``None`` means any. Times are ms since the epoch
    (``since`` inclusive, ``until`` exclusive); judge-score bounds are inclusive."""

    model_config = _FROZEN

    agent_id: StrFilter = None
    agent_version: StrFilter = None
    problem_id: StrFilter = None
    cluster_id: StrFilter = None
    suite: StrFilter = None
    eval_run_id: StrFilter = None
    pipeline_version: StrFilter = None
    bucket: StrFilter = None
    status: StrFilter = None
    axis: StrFilter = None
    success: bool | None = None
    since: int | None = None
    until: int | None = None
    min_judge_score: float | None = None
    max_judge_score: float | None = None
    order_by: Literal["seq", "created_at", "judge_score"] = "seq"
    """``seq`` is append order."""
    descending: bool = False
    limit: int | None = Field(default=None, ge=0)


class RecordRow(BaseModel):
    """A record's indexed columns without the trace, call log or verdict: cheap to list by the million."""

    model_config = _FROZEN

    record_id: str
    idempotency_key: str
    eval_run_id: str
    agent_id: str
    agent_version: str
    problem_id: str
    suite: str | None
    cluster_id: str | None
    bucket: str
    status: Status
    axis: Axis
    success: bool
    judge_score: float | None
    coefficient: float | None
    pipeline_version: str
    trace_sha256: str
    call_log_sha256: str
    created_at: int


class StoreStats(BaseModel):
    """Record counts, overall and by status, axis, bucket and pipeline version."""

    model_config = _FROZEN

    url: str
    schema_version: int
    records: int
    by_status: dict[str, int]
    by_axis: dict[str, int]
    by_bucket: dict[str, int]
    by_pipeline: dict[str, int]
    first_created_at: int | None
    last_created_at: int | None


class VerifyReport(BaseModel):
    """The result of recomputing every checked record's content hashes from its stored body."""

    model_config = _FROZEN

    checked: int
    mismatches: list[tuple[str, str]]
    """``(record_id, what is wrong)``, one per problem found."""

    @property
    def ok(self) -> bool:
        return not self.mismatches
