"""The corpus's canonical row (:class:`Trajectory`), a counted rejection (:class:`Rejection`) and the per-stage
report (:class:`StageReport`) every corpus step speaks (paper §5 / ``docs/paper.md`` §3; ``docs/training.md`` §2.3).

A :class:`Trajectory` is one trace in OpenAI messages form — ``system``, ``user`` (the query), ``assistant``
(``content``, optional ``reasoning_content``, optional ``tool_calls`` with ``arguments`` as JSON **strings**),
``tool`` (``tool_call_id``, ``content`` as a string) — plus the ``tools`` it was run with, in the nested OpenAI form
(``{"type": "function", "function": {name, description, parameters}}``). Messages hold nothing but what a trainer
sees: no ``step_meta`` and no provenance (those live in :attr:`Trajectory.extras` and :attr:`Trajectory.provenance`).

These are plain slotted dataclasses, not pydantic models: the filter stages touch tens of thousands of rows per
second and must not pay validation on every attribute access. Validation happens once, at normalisation.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from shoparena.types import Axis

__all__ = ["Axis", "AxisSource", "Rejection", "SourceKind", "StageReport", "Trajectory", "trajectory_id"]

SourceKind = Literal["store", "rollout", "oro_envelope", "oro_sft", "rewrite"]
"""Where a row came from: a store record, an upstream ShoppingBench rollout file, an ORO ``output.jsonl`` envelope,
an ORO SFT row (``messages`` + flat ``tools``), or the axis-B → axis-A rewriter."""
AxisSource = Literal["call_log", "text", "rewrite"]
"""How :attr:`Trajectory.axis` was decided: the gateway's call-log attribution, the text-only heuristic for imported
traces without a call log, or set by the rewriter."""


def trajectory_id(messages: list[dict[str, Any]], tools: list[dict[str, Any]], problem_id: str | None) -> str:
    """Content id of an imported row: SHA-256 of the canonical JSON of (problem id, messages, tools)."""
    body = orjson.dumps({"problem_id": problem_id, "messages": messages, "tools": tools},
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(body).hexdigest()


@dataclass(slots=True)
class Trajectory:
    """One canonical corpus row."""

    traj_id: str
    """Store rows: :func:`shoparena.corpus.normalize.store.store_row_id` (from the record's key, not its
    time-stamped record id). Imports: :func:`trajectory_id`. Rewrites: a new content id."""
    source: SourceKind
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    problem_id: str | None = None
    bucket: str | None = None
    """``product`` / ``shop`` / ``voucher`` (or ``web`` for upstream knowledge problems); None when unknown."""
    cluster_id: str | None = None
    suite: str | None = None
    success: bool | None = None
    """The rule scorer's verdict (strict unless the source says otherwise); None when not scored."""
    judge_score: float | None = None
    coefficient: float | None = None
    """The run's reasoning coefficient (store rows); the judge gate reads ``judge_score`` first, then this."""
    axis: Axis | None = None
    axis_source: AxisSource | None = None
    call_log: list[dict[str, Any]] | None = None
    """The gateway call log (store rows only): inference records (``kind: "inference"``) and search records
    (``kind: "search"``, with ``axis`` attribution and ``status``)."""
    outcome: dict[str, Any] | None = None
    """The rule scorer's result (store rows), e.g. ``gt`` product ids and per-axis hits."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the row came from, never shown to a trainer: ``record_id``, ``agent_id``, ``agent_version``,
    ``eval_run_id``, ``miner_hotkey``, ``validator_hotkey``, ``pipeline_version`` (store rows); ``file`` and
    ``line`` (imports); ``rewritten_from`` + ``rewriter`` (rewrites)."""
    extras: dict[str, Any] = field(default_factory=dict)
    """What a lossless conversion back to the source format needs beyond the messages (e.g. per-step
    ``step_meta`` of :mod:`shoparena.env.records`, the envelope's status and timings)."""
    rewritten: bool = False

    def assistant_messages(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("role") == "assistant"]

    def tool_calls(self) -> list[dict[str, Any]]:
        """Every assistant tool call, in order (``{"id", "type", "function": {"name", "arguments"}}``)."""
        return [c for m in self.messages if m.get("role") == "assistant" for c in (m.get("tool_calls") or ())]


@dataclass(slots=True, frozen=True)
class Rejection:
    """One input that did not make it, and exactly why. ``reason`` is a short stable code (counted in reports);
    ``message`` is the readable detail; ``where`` locates it (``file:line``, a record id or a trajectory id)."""

    stage: str
    reason: str
    message: str
    where: str
    traj_id: str | None = None


@dataclass(slots=True)
class StageReport:
    """What one stage did: rows in, kept, and rejected by reason (with up to a few examples per reason)."""

    stage: str
    seen: int = 0
    kept: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    """Stage-specific figures (e.g. axis decisions by ``call_log`` vs ``text``)."""

    def reject(self, reason: str, where: str, *, keep_examples: int = 3) -> None:
        self.rejected[reason] += 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < keep_examples:
            ex.append(where)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "seen": self.seen, "kept": self.kept,
                "rejected": dict(sorted(self.rejected.items())), "examples": self.examples, "notes": self.notes}
