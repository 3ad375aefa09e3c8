"""The gateway's call log: one frozen :class:`CallRecord` per request a run made, accepted or rejected.

This log is the ground truth of a run (docs/arena.md §5): the judge and the corpus filter read it, never anything the
agent writes. Records are built by the gateway on the hot path with ``model_construct`` (every field is produced
by gateway code, so there is nothing to validate); :func:`read_call_log` validates them when they come back from
disk. ``calls.jsonl`` holds one record per line, in ``(run_id, seq)`` order when written by :func:`write_call_log`.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from shoparena.env.types import Usage
from shoparena.types import SearchAxis as Axis

__all__ = ["Axis", "CallKind", "CallLogWriter", "CallRecord", "EmittedCall", "dump_record", "log_sha256",
           "read_call_log", "write_call_log"]

CallKind = Literal["search", "inference", "other"]
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class EmittedCall(BaseModel):
    """One tool call an LLM completion emitted (native ``tool_calls``, tag-protocol or Qwen3 text)."""

    model_config = _FROZEN

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str = ""
    """The API call id (native calls), else the upstream MD5 id of ``name`` + arguments."""


class CallRecord(BaseModel):
    """One request the gateway answered for a run (or, with ``run_id`` of a closed/unknown token, refused)."""

    model_config = _FROZEN

    run_id: str
    """The run the capability token belongs to; ``""`` when the token was missing or unknown."""
    seq: int
    """0-based arrival order within the run (assigned when the request arrives); ``-1`` for orphan records."""
    kind: CallKind
    """``search`` (``/search/*``), ``inference`` (``/inference/*``) or ``other`` (any other path: refused)."""
    method: str = "GET"
    path: str
    params: dict[str, Any] = Field(default_factory=dict)
    """Search: the query parameters as sent (strings). Inference: the request body without ``messages`` and
    ``tools``, plus ``messages_sha256`` / ``n_messages`` and ``tool_names`` / ``tools_sha256``."""
    model: str | None = None
    """Inference: the model name (URI) asked for."""
    problem_id: str | None = None
    started_at: int
    """Milliseconds since the epoch when the request reached the gateway."""
    duration_ms: float
    """Gateway time from arrival to response body ready (search: includes the search itself)."""
    status: int
    """HTTP status answered (200, 400, 401, 403, 404, 405, 413, 429, 502)."""
    error: str | None = None
    usage: Usage | None = None
    """Inference: token counts reported by the backend."""
    result_product_ids: list[str] | None = None
    """Search: ids returned by find_product / view_product_information, in result order."""
    tool_calls: list[EmittedCall] | None = None
    """Inference: the tool calls the completion emitted (what axis-A search calls are matched against)."""
    content: str | None = None
    """Inference: the completion text as returned (lets the judge check a trace's think/response verbatim)."""
    reasoning_content: str | None = None
    axis: Axis | None = None
    """Search calls answered 200: ``A`` if the call appeared as a tool call in a preceding completion of the
    same run (or was issued by a composite tool such a call asked for: see ``via``), else ``B``."""
    via: str | None = None
    """Axis-A search issued by the agent's implementation of a composite tool the LLM called (its name)."""
    attributed_to: int | None = None
    """``seq`` of the inference record whose completion emitted the matching tool call."""
    parse_notes: list[str] | None = None
    """Inference: what the backend's text parser dropped from the completion (a malformed ``<tool_call>`` block, an
    unclosed one cut at the token limit), which ``content`` and ``tool_calls`` no longer show; ``None``: nothing."""
    truncated: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    """Inference answered 200: whether the backend cut the completion at its token cap (the request's ``max_tokens``
    under the backend's per-turn cap) rather than it ending at an end token or stop string — a cut turn can lose its
    ``<tool_call>`` and read as a turn that chose to stop. ``None`` (the key left out of the line, so logs written
    before this field, and records of every other kind, dump and hash as they did): not reported."""


def dump_record(record: CallRecord) -> bytes:
    """One JSONL line (with the trailing newline); ``None`` fields are kept so every line has every key, except
    ``truncated``, which is left out when ``None`` (:attr:`CallRecord.truncated`)."""
    return orjson.dumps(record.model_dump(mode="json")) + b"\n"


def log_sha256(records: Iterable[CallRecord]) -> str:
    """Content hash of a run's log: sha256 of its JSONL bytes (the trajectory record's ``proxy_log_sha256``)."""
    h = hashlib.sha256()
    for record in records:
        h.update(dump_record(record))
    return h.hexdigest()


class CallLogWriter:
    """Appends records to a ``calls.jsonl``; thread-safe; use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike[str], *, append: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab" if append else "wb")
        self._lock = threading.Lock()
        self.count = 0

    def write(self, records: Iterable[CallRecord]) -> int:
        """Append ``records`` (e.g. what :meth:`Gateway.close_run` returned) and flush; returns how many."""
        data = b"".join(dump_record(r) for r in records)
        n = data.count(b"\n")
        with self._lock:
            self._fh.write(data)
            self._fh.flush()
            self.count += n
        return n

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> CallLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_call_log(path: str | os.PathLike[str], records: Iterable[CallRecord]) -> int:
    """Write ``records`` to ``path`` (replacing it), sorted by ``(run_id, seq)``; returns how many."""
    ordered = sorted(records, key=lambda r: (r.run_id, r.seq))
    with CallLogWriter(path, append=False) as writer:
        return writer.write(ordered)


def read_call_log(path: str | os.PathLike[str]) -> list[CallRecord]:
    """Records of a ``calls.jsonl``, validated."""
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                out.append(CallRecord.model_validate(orjson.loads(line)))
    return out
