"""Reading an LLM judge's answer: JSON extraction and quote → span resolution.

``parse_answer`` accepts (in order) the bare JSON object, the *last* object in the text that holds
``reasoning_quality`` (after a ``<think>`` block, inside a markdown fence, after prose), or a truncated answer
repaired by closing its open string, array and object. It returns a :class:`JudgeAnswer` or raises
:class:`AnswerError` saying why the text is unusable. ``resolve_quotes`` turns the answer's quoted evidence into
spans of the rendered trace: offsets are used when they point at the quote, else the quote is searched verbatim
(whitespace runs may differ); a quote that does not occur is an error, never silently dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from shoparena.validator.judge.types import SCORES, CitedSpan, gate_for

__all__ = ["AnswerError", "JudgeAnswer", "parse_answer", "resolve_quotes"]

MIN_QUOTE_CHARS = 6
MAX_QUOTE_CHARS = 1200
_KEY = '"reasoning_quality"'


class AnswerError(ValueError):
    """The judge's answer is unusable: ``kind`` is ``unparseable`` (no JSON verdict in it), ``invalid`` (a
    verdict with a value off the rubric) or ``uncited`` (quotes that do not resolve)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Quote:
    text: str
    start: int | None = None
    end: int | None = None
    gate: int | None = None


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    score: float
    gate: int | None
    explanation: str
    quotes: tuple[Quote, ...] = field(default_factory=tuple)
    repaired: bool = False


def _objects(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every JSON object that decodes starting at some ``{`` of ``text`` and holds the key, by position."""
    dec = json.JSONDecoder(strict=False)
    out = []
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and "reasoning_quality" in obj:
            out.append((m.start(), obj))
    return out


def _close(text: str) -> str:
    """``text`` with its open string / arrays / objects closed (a dangling comma or key dropped)."""
    stack: list[str] = []
    in_str = esc = False
    last_safe = 0
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
        elif ch == ",":
            last_safe = i
    out = text + ('"' if in_str else "")
    closing = "".join(reversed(stack))
    try:
        json.loads(out + closing, strict=False)
        return out + closing
    except ValueError:  # cut inside a key or before a value: fall back to the last complete member
        return _close(text[:last_safe]) if last_safe else out + closing


def _repair(text: str) -> dict[str, Any] | None:
    at = text.rfind(_KEY)
    start = text.rfind("{", 0, at)
    while start >= 0:
        try:
            obj = json.loads(_close(text[start:]), strict=False)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "reasoning_quality" in obj:
            return obj
        start = text.rfind("{", 0, start)
    return None


def _quotes(raw: Any) -> tuple[Quote, ...]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str):
            out.append(Quote(item))
        elif isinstance(item, dict):
            text = item.get("quote", item.get("text"))
            if not isinstance(text, str):
                continue
            nums = [item.get(k) if isinstance(item.get(k), int) and not isinstance(item.get(k), bool) else None
                    for k in ("start", "end", "gate")]
            out.append(Quote(text, nums[0], nums[1], nums[2] if nums[2] in (1, 2, 3, 4) else None))
    return tuple(out)


def parse_answer(text: str | None) -> JudgeAnswer:
    """The verdict in a judge model's reply (module docstring)."""
    if not text or _KEY not in text:
        raise AnswerError("unparseable", "no reasoning_quality in the answer")
    repaired = False
    try:
        whole = json.loads(text.strip(), strict=False)
        obj = whole if isinstance(whole, dict) and "reasoning_quality" in whole else None
    except ValueError:
        obj = None
    if obj is None:
        found = _objects(text)
        obj = found[-1][1] if found else None
    if obj is None:
        obj, repaired = _repair(text), True
    if obj is None:
        raise AnswerError("unparseable", "no JSON object with reasoning_quality could be read or repaired")
    try:
        score = float(obj["reasoning_quality"])
    except (TypeError, ValueError) as exc:
        raise AnswerError("invalid", f"reasoning_quality {obj['reasoning_quality']!r} is not a number") from exc
    value = next((s for s in SCORES if abs(s - score) < 1e-6), None)
    if value is None:
        raise AnswerError("invalid", f"reasoning_quality {score} is not one of {SCORES}")
    explanation = obj.get("explanation")
    return JudgeAnswer(score=value, gate=gate_for(value), explanation=str(explanation or "")[:500],
                       quotes=_quotes(obj.get("evidence", obj.get("citations", obj.get("spans")))),
                       repaired=repaired)


def _clean(quote: str) -> str:
    q = quote.strip().strip("\"'“”‘’`").strip()
    for tail in ("...", "…"):
        q = q.removesuffix(tail).removeprefix(tail).strip()
    return q


def _find(text: str, quote: str) -> tuple[int, int] | None:
    at = text.find(quote)
    if at >= 0:
        return at, at + len(quote)
    words = quote.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return (m.start(), m.end()) if m else None


def resolve_quotes(trace_text: str, answer: JudgeAnswer, *, require: bool = True) -> list[CitedSpan]:
    """Spans of ``trace_text`` for every quote of ``answer``; :class:`AnswerError` (``uncited``) when a quote
    does not occur verbatim, is too short to mean anything, or (``require``) when there is no quote at all."""
    spans, problems = [], []
    for q in answer.quotes:
        if (q.start is not None and q.end is not None and 0 <= q.start < q.end <= len(trace_text)
                and trace_text[q.start:q.end] == q.text and len(q.text.strip()) >= MIN_QUOTE_CHARS):
            spans.append(CitedSpan(start=q.start, end=q.end, text=q.text, gate=q.gate))
            continue
        quote = _clean(q.text)
        if len(quote) < MIN_QUOTE_CHARS or len(quote) > MAX_QUOTE_CHARS:
            problems.append(f"quote {q.text[:60]!r} is too short or too long to cite")
            continue
        hit = _find(trace_text, quote)
        if hit is None:
            problems.append(f"quote {quote[:60]!r} does not occur in the trace")
            continue
        spans.append(CitedSpan(start=hit[0], end=hit[1], text=trace_text[hit[0]:hit[1]], gate=q.gate))
    if problems:
        raise AnswerError("uncited", "; ".join(problems))
    if require and not spans:
        raise AnswerError("uncited", "the answer cites no evidence")
    return spans
