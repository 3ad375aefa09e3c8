"""The gateway call log as the judge reads it: normalised records, completion texts, provenance of trace text.

The call log (``shoparena.llm.gateway.calllog``) is the ground truth of what a run did; the trace is what the agent
says it did. This module reduces the log to what the judge needs: per record its kind, status, model, completion
tokens and returned ids (:class:`LoggedCall`), the completion texts the LLM really produced, and whether a piece
of trace text occurs in one of them (``provenance``). Records may be :class:`CallRecord` objects or their JSON
dicts (``calls.jsonl`` adds ``problem_id``/``sample``; unknown keys are ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["LoggedCall", "Provenance", "completion_texts", "normalise_calls", "normalise_text", "provenance"]

#: Completion tokens an inference call needs for gate 1 (docs/arena.md §7.3).
MIN_COMPLETION_TOKENS = 30

Provenance = Literal["verified", "partial", "unverified", "unknown"]
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]")


def normalise_text(text: str) -> str:
    """Control characters dropped, every whitespace run one space, stripped: the form trace text is shown in."""
    return _WS.sub(" ", _CONTROL.sub(" ", text)).strip()


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One call-log record, reduced to what the judge reads."""

    seq: int
    kind: str
    """``search``, ``inference`` or ``other``."""
    path: str
    status: int
    params: dict[str, Any]
    model: str | None
    completion_tokens: int | None
    n_tool_calls: int | None
    returned_ids: tuple[str, ...] | None
    axis: str | None
    duration_ms: float
    completion: str | None
    """Inference: ``content`` and ``reasoning_content`` as logged (None when the log did not record them)."""

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def substantial(self) -> bool:
        """An answered inference call with at least :data:`MIN_COMPLETION_TOKENS` completion tokens."""
        return (self.kind == "inference" and self.ok
                and (self.completion_tokens or 0) >= MIN_COMPLETION_TOKENS)

    @property
    def tool(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


def _as_dict(rec: Any) -> Mapping[str, Any]:
    if isinstance(rec, Mapping):
        return rec
    dump = getattr(rec, "model_dump", None)
    if callable(dump):
        return dump(mode="json")  # type: ignore[no-any-return]
    raise TypeError(f"a call-log record must be a mapping or a CallRecord, not {type(rec).__name__}")


def _kind(d: Mapping[str, Any]) -> str:
    kind = d.get("kind")
    if kind in ("search", "inference", "other"):
        return str(kind)
    path = str(d.get("path") or "")
    return "inference" if "/inference/" in path else "search" if "/search/" in path else "other"


def _int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _one(i: int, rec: Any) -> LoggedCall:
    d = _as_dict(rec)
    usage = d.get("usage")
    if not isinstance(usage, Mapping):  # ORO's proxy log keeps the usage inside the response
        resp = d.get("response")
        usage = resp.get("usage") if isinstance(resp, Mapping) else None
    tokens = _int(usage.get("completion_tokens")) if isinstance(usage, Mapping) else None
    ids = d.get("result_product_ids")
    calls = d.get("tool_calls")
    content, reasoning = d.get("content"), d.get("reasoning_content")
    texts = [t for t in (content, reasoning) if isinstance(t, str)]
    params = d.get("params")
    return LoggedCall(
        seq=_int(d.get("seq")) if _int(d.get("seq")) is not None else i, kind=_kind(d),
        path=str(d.get("path") or ""), status=_int(d.get("status", d.get("status_code"))) or 0,
        params=dict(params) if isinstance(params, Mapping) else {}, model=d.get("model"),
        completion_tokens=tokens, n_tool_calls=len(calls) if isinstance(calls, list) else None,
        returned_ids=tuple(str(x) for x in ids) if isinstance(ids, list) else None,
        axis=d.get("axis"), duration_ms=float(d.get("duration_ms") or 0.0),
        completion="\n".join(texts) if texts else None,
    )


def normalise_calls(calls: Iterable[Any]) -> list[LoggedCall]:
    """The records in log order (by ``seq`` when every record has one)."""
    out = [_one(i, rec) for i, rec in enumerate(calls)]
    return sorted(out, key=lambda c: c.seq)


def completion_texts(calls: list[LoggedCall]) -> list[tuple[int, str]] | None:
    """``(seq, normalised text)`` of every answered inference call; None when the log records no completion text
    at all (then nothing can be checked against it and provenance is ``unknown``)."""
    answered = [c for c in calls if c.kind == "inference" and c.ok]
    if not any(c.completion is not None for c in answered):
        return None
    return [(c.seq, normalise_text(c.completion)) for c in answered if c.completion is not None]


def provenance(text: str, completions: list[tuple[int, str]] | None) -> tuple[Provenance, int | None]:
    """Whether ``text`` (already normalised) occurs verbatim in a logged completion, and in which (its ``seq``)."""
    if completions is None:
        return "unknown", None
    if not text:
        return "unverified", None
    for seq, completion in completions:
        if text in completion:
            return "verified", seq
    return "unverified", None
