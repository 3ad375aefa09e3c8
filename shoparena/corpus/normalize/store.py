"""Store records → :class:`~shoparena.corpus.types.Trajectory` (:func:`from_record`, :func:`iter_store`).

A record already holds its trace twice: ``steps`` and the canonical ``messages`` the validator derived from them
with :func:`shoparena.env.records.steps_to_messages` (so ``step_meta`` rides on assistant messages). The row takes
those messages without ``step_meta`` (the metas move to ``extras``, so :func:`~shoparena.corpus.normalize.to_steps`
gives the stored steps back exactly), the tools the run was given (matched by the call log's ``tools_sha256`` /
``tool_names``, else by the names it called), the scores, call log and outcome, and the provenance.

The row's ``traj_id`` is :func:`store_row_id`: a hash of the record's key (evaluation run, problem, scoring
pipeline), not the record id. The record id hashes the whole record, wall-clock times included (when each step
ran, how long each call took), so the same seeded arena run twice stores the same episodes under different record
ids; every choice the corpus makes by id (which of two tied traces a problem keeps, the order rows are exported
and trained in) would then follow the clock. The record id stays in the row's provenance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from shoparena.corpus.normalize._common import call_names, infer_tools, reject, scan_messages
from shoparena.corpus.normalize.axis import text_axis
from shoparena.corpus.types import Rejection, Trajectory
from shoparena.env.output import OutputDefect, validate_steps
from shoparena.env.records import steps_to_messages

__all__ = ["PROVENANCE_KEYS", "from_record", "iter_store", "store_row_id"]

PROVENANCE_KEYS = ("record_id", "agent_id", "agent_version", "eval_run_id", "miner_hotkey", "validator_hotkey",
                   "pipeline_version")
_REQUIRED = ("record_id", "problem_id")


def store_row_id(body: dict[str, Any]) -> str | None:
    """The corpus id of a stored record: SHA-256 of its ``idempotency_key`` (``eval_run_id|problem_id|
    pipeline_version``, one record per key in a store), which does not depend on when the episode ran; the record
    id when the body has no key (a body made by hand). None when it has neither."""
    key = body.get("idempotency_key")
    if isinstance(key, str) and key:
        return hashlib.sha256(b"store-row|" + key.encode()).hexdigest()
    rid = body.get("record_id")
    return rid if isinstance(rid, str) else None


def _tools(call_log: list[Any], messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    for rec in call_log:
        if isinstance(rec, dict) and rec.get("kind") == "inference":
            params = rec.get("params") or {}
            names = params.get("tool_names")
            if names:
                return infer_tools(names, params.get("tools_sha256"))
    return infer_tools(call_names(messages))


def from_record(body: Any, where: str | None = None) -> Trajectory | Rejection:
    """One stored record body (parsed ``TrajectoryStore.bodies()`` bytes or ``TrajectoryRecord.model_dump()``)
    as a row; ``traj_id`` is :func:`store_row_id` (the record id is in ``provenance``). Takes ownership of
    ``body``'s nested values (no deep copy).

    Axis: the record's own (``axis_source="call_log"``) when its call log has search records, else
    :func:`text_axis`. Rejections (``where`` = the record id, or ``where`` when given): ``not_object``,
    ``missing_keys``, ``bad_trace`` (steps / messages / call log of the wrong type), ``empty_trace``, the agent-output codes of
    :func:`shoparena.env.output.validate_steps` (stored steps that are not step records), ``bad_message``, ``bad_tool_call``, ``unpaired_tool_call_id``."""
    if not isinstance(body, dict):
        return reject("not_object", f"a record body must be a JSON object, got {type(body).__name__}",
                      where or "?")
    missing = [k for k in _REQUIRED if not isinstance(body.get(k), str)]
    rid = body.get("record_id") if isinstance(body.get("record_id"), str) else None
    loc = where or rid or "?"
    if missing:
        return reject("missing_keys", f"record body lacks string {missing}", loc, rid)
    for name in ("steps", "messages", "call_log"):
        value = body.get(name)
        if value is not None and type(value) is not list:
            return reject("bad_trace", f"record {name!r} is a {type(value).__name__}, not a list", loc, rid)
    steps, messages, call_log = body.get("steps") or [], body.get("messages") or [], body.get("call_log") or []
    if not messages and steps:
        checked = validate_steps(steps)
        if isinstance(checked, OutputDefect):  # the validator's reason code
            return reject(checked.code, f"{checked.message} (at {checked.path})", loc, rid)
        messages = steps_to_messages(checked.steps)
    if not messages:
        return reject("empty_trace", "record has no steps and no messages", loc, rid)
    extras: dict[str, Any] = {}
    clean, bad = scan_messages(messages, extras)
    if bad is not None:
        return reject(bad[0], bad[1], loc, rid)
    toolset, tools = _tools(call_log, clean)
    extras["toolset"] = toolset
    for key in ("status", "started_at", "finished_at"):
        if body.get(key) is not None:
            extras[key] = body[key]
    if any(isinstance(c, dict) and c.get("kind") == "search" for c in call_log):
        axis, axis_source = body.get("axis"), "call_log"
    else:
        axis, axis_source = text_axis(clean), "text"
    return Trajectory(
        traj_id=store_row_id(body) or "", source="store", messages=clean, tools=tools,
        problem_id=body["problem_id"],
        bucket=body.get("bucket"), cluster_id=body.get("cluster_id"), suite=body.get("suite"),
        success=body.get("success"), judge_score=body.get("judge_score"), coefficient=body.get("coefficient"),
        axis=axis, axis_source=axis_source, call_log=call_log, outcome=body.get("outcome"),
        provenance={k: body.get(k) for k in PROVENANCE_KEYS}, extras=extras,
    )


def iter_store(store: Any, query: Any = None) -> Iterator[Trajectory | Rejection]:
    """Every record of ``store`` matching ``query`` (a :class:`~shoparena.store.RecordQuery` or None), streamed
    from :meth:`~shoparena.store.TrajectoryStore.bodies` in chunks. An unreadable body is ``bad_json`` (where =
    ``store:<n>``, the 1-based position in the stream)."""
    for n, raw in enumerate(store.bodies(query), start=1):
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield reject("bad_json", f"stored body is not JSON: {exc}", f"store:{n}")
            continue
        yield from_record(body)
