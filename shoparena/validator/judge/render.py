"""The canonical rendered trace every judge reads and every cited span indexes into (docs/arena.md §7.2).

``render_trace(query, steps, calls)`` is deterministic: the same inputs give the same text and the same
``sha256``. Layout::

    QUERY: …
    VERIFIED GATEWAY CALLS (…)          ← from the call log: counts, tokens, models, the first 30 calls
    Summary: … / Models: … / Call sequence (first 30 of N): / #seq … / WARNING … (no inference call)
    TRAJECTORY (written by the agent; untrusted):
    --- Step k ---
    THINKING [in call log #seq]: …      ← ≤ 1000 chars; the tag says whether a logged completion contains it
    TOOL name: {…}                      ← parameters, ≤ 300 chars
    RESULT: …                           ← ≤ 300 chars
    RESPONSE: …

Agent-written text is shown with control characters removed and whitespace runs collapsed to one space, so it
never starts a line: structural markers (``--- Step``, ``THINKING``, ``WARNING``) cannot be forged from inside a
think or a result. :class:`Section` records where each part lies, for the rubric judge and for span checks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shoparena.env.records import step_results
from shoparena.validator.judge.calls import (
    LoggedCall,
    Provenance,
    completion_texts,
    normalise_calls,
    normalise_text,
    provenance,
)
from shoparena.validator.judge.types import CitedSpan

__all__ = ["RENDER_VERSION", "RenderedTrace", "Section", "render_trace", "sentence_spans", "span_errors"]

RENDER_VERSION = "2"  # 2: JSON keys sorted (key order of a stored record no longer changes the trace)
MAX_THINK_CHARS = 1000
MAX_RESULT_CHARS = 300
MAX_TOOL_CHARS = 300
MAX_PARAM_CHARS = 200
MAX_CALLS_SHOWN = 30
MAX_IDS_SHOWN = 20
TRUNCATED = "…[truncated]"
_HIDDEN_PARAMS = ("messages_sha256", "tools_sha256")

SectionKind = Literal["query", "summary", "call", "warning", "think", "tool", "result", "response"]
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Section(BaseModel):
    """One part of the rendered trace: ``text[start:end]`` (the content, without its label)."""

    model_config = _FROZEN

    kind: SectionKind
    start: int
    end: int
    step: int | None = None
    """0-based step index (trajectory parts)."""
    index: int | None = None
    """``call``: the record's ``seq``; ``tool``/``result``: the tool call's index within its step."""
    truncated: bool = False
    provenance: Provenance | None = None
    """``think``/``response``: whether a logged completion contains the text (``unknown``: the log records none)."""


class RenderedTrace(BaseModel):
    model_config = _FROZEN

    text: str
    sha256: str
    sections: tuple[Section, ...]
    calls: int
    """Call-log records rendered (shown or counted)."""

    def part(self, section: Section) -> str:
        return self.text[section.start:section.end]

    def of(self, kind: SectionKind, step: int | None = None) -> list[Section]:
        return [s for s in self.sections if s.kind == kind and (step is None or s.step == step)]

    def span(self, start: int, end: int, gate: int | None = None) -> CitedSpan:
        return CitedSpan(start=start, end=end, text=self.text[start:end], gate=gate)


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pos = 0
        self.sections: list[Section] = []

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.pos += len(text)

    def field(self, label: str, content: str, kind: SectionKind, *, limit: int | None = None,
              **meta: Any) -> None:
        """``label`` then ``content`` (cut to ``limit``) as a section, then a newline."""
        truncated = limit is not None and len(content) > limit
        shown = content[:limit] if truncated else content
        self.put(label)
        self.sections.append(Section(kind=kind, start=self.pos, end=self.pos + len(shown), truncated=truncated,
                                     **meta))
        self.put(shown)
        self.put((TRUNCATED if truncated else "") + "\n")


def _dumps(obj: Any) -> str:
    # keys sorted: a record read back from a store (which may store JSON with sorted keys) renders the very trace
    # the judge was given, so cited spans and ``trace_sha256`` stay checkable
    return normalise_text(json.dumps(obj, ensure_ascii=False, default=str, sort_keys=True))


def _shown_params(call: LoggedCall) -> str:
    params = {k: v for k, v in call.params.items() if k not in _HIDDEN_PARAMS}
    text = _dumps(params)
    return text if len(text) <= MAX_PARAM_CHARS else text[:MAX_PARAM_CHARS] + "…"


def _call_line(c: LoggedCall) -> str:
    if c.kind == "inference":
        bits = [f"#{c.seq} inference model={c.model or '?'} → {c.status}",
                f"completion_tokens={c.completion_tokens if c.completion_tokens is not None else '?'}"]
        if c.n_tool_calls is not None:
            bits.append(f"tool_calls={c.n_tool_calls}")
    else:
        axis = f" axis={c.axis}" if c.axis else ""
        bits = [f"#{c.seq} {c.kind} {c.tool}{axis} → {c.status}"]
    bits.append(f"{c.duration_ms:.0f} ms")
    bits.append(f"params {_shown_params(c)}")
    line = ", ".join(bits)
    if c.returned_ids:
        shown = ",".join(c.returned_ids[:MAX_IDS_SHOWN])
        more = len(c.returned_ids) - MAX_IDS_SHOWN
        line += f"; returned {len(c.returned_ids)} ids: {shown}" + (f" (+{more} more)" if more > 0 else "")
    elif c.returned_ids is not None and c.kind == "search":
        line += "; returned 0 ids"
    return line


def _summary(calls: list[LoggedCall]) -> str:
    inf = [c for c in calls if c.kind == "inference"]
    answered = [c for c in inf if c.ok]
    toks = [c.completion_tokens or 0 for c in answered]
    search = [c for c in calls if c.kind == "search"]
    tools = Counter(c.tool for c in search)
    axes = Counter(c.axis for c in search if c.axis)
    tool_s = ", ".join(f"{n} {name}" for name, n in sorted(tools.items()))
    failed = sum(1 for c in calls if not c.ok)
    secs = sum(c.duration_ms for c in calls) / 1000
    return (f"{len(calls)} calls: {len(inf)} inference ({len(answered)} answered, "
            f"{sum(1 for c in answered if c.substantial)} with ≥ 30 completion tokens, {sum(toks)} completion "
            f"tokens in all, max {max(toks, default=0)}); {len(search)} search ({tool_s or 'none'}; "
            f"axis A {axes.get('A', 0)}, axis B {axes.get('B', 0)}); "
            f"{sum(1 for c in calls if c.kind == 'other')} refused; {failed} failed; {secs:.1f} s gateway time")


def _call_block(w: _Writer, calls: list[LoggedCall]) -> None:
    w.put("VERIFIED GATEWAY CALLS (recorded by the gateway, not by the agent: counts, statuses, tokens and "
          "returned ids are facts; parameter strings were chosen by the agent)\n")
    w.field("Summary: ", _summary(calls), "summary")
    models = sorted({c.model for c in calls if c.kind == "inference" and c.model})
    w.put(f"Models: {', '.join(models) or 'none'}\n")
    if calls:
        w.put(f"Call sequence (first {min(len(calls), MAX_CALLS_SHOWN)} of {len(calls)}):\n")
    for c in calls[:MAX_CALLS_SHOWN]:
        w.field("  ", _call_line(c), "call", index=c.seq)
    if len(calls) > MAX_CALLS_SHOWN:
        w.put(f"  … and {len(calls) - MAX_CALLS_SHOWN} more calls\n")
    inf = [c for c in calls if c.kind == "inference" and c.ok]
    if not inf:
        w.field("", "WARNING: the agent made 0 inference calls: any reasoning text in the trajectory is NOT "
                    "from an LLM.", "warning")
    elif not any(c.substantial for c in inf):
        w.field("", "WARNING: no inference call produced ≥ 30 completion tokens: the LLM wrote next to nothing; "
                    "the trajectory's reasoning text is not its work.", "warning")


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def sentence_spans(text: str, start: int = 0) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` (split after ``.``/``!``/``?`` followed by a space),
    offset by ``start``."""
    out, pos = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((start + pos, start + m.start()))
        pos = m.end()
    if pos < len(text):
        out.append((start + pos, start + len(text)))
    return out


def _label(prov: Provenance, seq: int | None) -> str:
    return {"verified": f" [in call log #{seq}]", "partial": " [partly in call log]",
            "unverified": " [NOT in call log]", "unknown": ""}[prov]


def _text_provenance(text: str, completions: list[tuple[int, str]] | None) -> tuple[Provenance, int | None]:
    prov, seq = provenance(text, completions)
    if prov == "unverified" and any(provenance(text[a:b], completions)[0] == "verified"
                                    for a, b in sentence_spans(text)):
        return "partial", None
    return prov, seq


def _step(w: _Writer, i: int, step: dict[str, Any], completions: list[tuple[int, str]] | None) -> None:
    comp = step.get("completion") if isinstance(step.get("completion"), dict) else {}
    msg = comp.get("message") if isinstance(comp.get("message"), dict) else {}
    w.put(f"--- Step {i + 1} ---\n")
    think = normalise_text(str(msg.get("think") or comp.get("reasoning_content") or ""))
    if think:
        prov, seq = _text_provenance(think, completions)
        w.field(f"THINKING{_label(prov, seq)}: ", think, "think", limit=MAX_THINK_CHARS, step=i, provenance=prov)
    calls = [c for c in msg.get("tool_call") or [] if isinstance(c, dict)]
    try:
        results = step_results(msg)
    except (TypeError, AttributeError, KeyError):
        results = [(False, None)] * len(calls)
    for j, (call, (has, value)) in enumerate(zip(calls, results, strict=False)):
        name = normalise_text(str(call.get("name") or "?"))[:80]
        w.field(f"TOOL {name}: ", _dumps(call.get("parameters", {})), "tool", limit=MAX_TOOL_CHARS, step=i, index=j)
        shown = normalise_text(value) if isinstance(value, str) else _dumps(value)
        if has:
            w.field("RESULT: ", shown, "result", limit=MAX_RESULT_CHARS, step=i, index=j)
        else:
            w.put("RESULT: (none)\n")
    response = normalise_text(str(msg.get("response") or ""))
    if response:
        prov, seq = _text_provenance(response, completions)
        w.field(f"RESPONSE{_label(prov, seq)}: ", response, "response", limit=MAX_THINK_CHARS, step=i,
                provenance=prov)


def render_trace(query: str, steps: list[dict[str, Any]], calls: Iterable[Any]) -> RenderedTrace:
    """The rendered trace of one trajectory (module docstring). ``query`` defaults to step 0's
    ``extra_info.query``; ``calls`` are the run's call-log records (dicts or ``CallRecord``)."""
    logged = normalise_calls(calls or [])
    steps = steps if isinstance(steps, list) else []
    if not query and steps and isinstance(steps[0], dict) and isinstance(steps[0].get("extra_info"), dict):
        query = str(steps[0]["extra_info"].get("query") or "")
    w = _Writer()
    w.field("QUERY: ", normalise_text(query or ""), "query")
    w.put("\n")
    _call_block(w, logged)
    w.put("\nTRAJECTORY (written by the agent; untrusted):\n")
    completions = completion_texts(logged)
    for i, step in enumerate(steps):
        if isinstance(step, dict):
            _step(w, i, step, completions)
    text = "".join(w.parts)
    return RenderedTrace(text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                         sections=tuple(w.sections), calls=len(logged))


def span_errors(trace: RenderedTrace | str, spans: Iterable[CitedSpan]) -> list[str]:
    """Why each span does not index into ``trace`` verbatim (empty list: all valid)."""
    text = trace.text if isinstance(trace, RenderedTrace) else trace
    errors = []
    for k, s in enumerate(spans):
        if not (0 <= s.start < s.end <= len(text)):
            errors.append(f"span {k}: [{s.start}, {s.end}) is outside the trace (length {len(text)})")
        elif text[s.start:s.end] != s.text:
            errors.append(f"span {k}: trace[{s.start}:{s.end}] is {text[s.start:s.end]!r}, not {s.text!r}")
    return errors
