"""The deterministic offline judge: docs/arena.md §7.3's four gates from the call log and the rendered trace.

Gates, in order; the first that fails sets the score (G1 0.1, G2 0.3, G3 0.5, G4 0.7; all pass 0.9):

- **G1** — the *call log* has ≥ 1 inference call answered 200 with ≥ 30 completion tokens. What the trace says
  about its model use is never read.
- **G2** — a sentence of the reasoning (THINKING / RESPONSE) of some step ``k ≥ 1`` refers to a result observed in
  steps ``< k`` (an id, price, title fragment, brand / attribute value, or a statement about result counts) *and*
  assesses it (matches / misses / within / cheaper / no match / …): it analyses tool results.
- **G3** — such reasoning cites a specific datum that really occurs in earlier observations: a product id the
  gateway returned, a shop id, a ₱ price, a brand or attribute / SKU value (values that also occur in the query
  do not count: repeating the request is not citing a result).
- **G4** — one step names ≥ 2 observed candidates (product ids, shop ids, title fragments) and one of its
  sentences compares (than / rather than / instead of / prefer / better / cheaper / closest / unlike / …) with a
  reason (an assessment, a cited price or value, or because / since / given).

Reasoning counts only where the LLM wrote it: when the call log records completion texts, a sentence the gateway
never saw in any completion (text added by the agent's code) is not evidence. Instructions or scores planted in
the trace are inert: nothing here reads them. Every gate's evidence is a :class:`CitedSpan` of the rendered trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from shoparena.validator.judge.calls import LoggedCall, completion_texts, normalise_calls, provenance
from shoparena.validator.judge.evidence import Datum, Observed, observe
from shoparena.validator.judge.render import (
    RENDER_VERSION,
    RenderedTrace,
    Section,
    render_trace,
    sentence_spans,
)
from shoparena.validator.judge.types import GATE_SCORES, PASS_SCORE, CitedSpan, Verdict

__all__ = ["RUBRIC_VERSION", "RubricJudge"]

RUBRIC_VERSION = "1"

ASSESS = re.compile(
    r"\b(?:match(?:es|ed|ing)?|mismatch\w*|meets?|met|miss(?:es|ing)?|lacks?|lacking|fits?|fitting|"
    r"satisf(?:y|ies|ied|ying)|within|exceed(?:s|ed|ing)?|over budget|under budget|too (?:expensive|cheap|pricey)|"
    r"cheap(?:er|est)?|(?:more|less) expensive|pric(?:ier|iest)|afford\w*|best|closest|closer|better|worse|wrong|"
    r"(?:un)?suitable|promising|confirm(?:s|ed)?|verif(?:y|ies|ied)|only|none|not|\w+n't|fails?|failed|"
    r"sold out|out of stock|in stock|instead)\b", re.IGNORECASE)
COUNT = re.compile(
    r"\b(?:\d+|no|zero)\s+(?:\w+\s+)?(?:results?|hits?|matches|listings?)\b|\bnothing (?:found|matched|came back)\b|"
    r"\bno (?:confirmed |exact |good )?match\b|\b(?:results?|search) (?:shows?|showed|returned|gave)\b",
    re.IGNORECASE)
COMPARE = re.compile(
    r"\b(?:than|rather|instead of|prefer\w*|versus|vs\.?|compar\w*|whereas|unlike|better|best|cheap(?:er|est)|"
    r"closer|closest|outrank\w*|beats?|over the other|the other (?:one|option|candidate|listing)s?|"
    r"(?:pick|picked|picking|chose|choose|choosing|select\w*|take|taking|went with|go with)\s+\S+\s+over)\b",
    re.IGNORECASE)
REASON = re.compile(r"\b(?:because|since|as it|given|due to|thanks to|so that)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Unit:
    """One sentence of admissible reasoning: its step, its place in the rendered trace, its data."""

    step: int
    start: int
    end: int
    text: str
    data: tuple[Datum, ...]
    plain: str
    """``text`` with cited titles and values blanked: the words the lexicons may match (a product called
    "… cheap" is not an assessment)."""


def _units(trace: RenderedTrace, calls: list[LoggedCall], obs: Observed, logged_only: bool) -> list[_Unit]:
    completions = completion_texts(calls)
    out = []
    for sec in trace.sections:
        if sec.kind not in ("think", "response") or sec.step is None:
            continue
        if logged_only and sec.provenance == "unverified":
            continue
        for a, b in sentence_spans(trace.part(sec), sec.start):
            text = trace.text[a:b]
            if logged_only and sec.provenance == "partial" and provenance(text, completions)[0] != "verified":
                continue
            found = list(obs.cited(text, before=sec.step))
            plain = list(text)
            for d in found:
                if d.kind in ("title", "value"):
                    plain[d.start:d.end] = " " * (d.end - d.start)
            data = tuple(Datum(d.kind, d.value, a + d.start, a + d.end, d.product) for d in found)
            out.append(_Unit(sec.step, a, b, text, data, "".join(plain)))
    return out


def _occurrence(trace: RenderedTrace, d: Datum, gate: int) -> CitedSpan | None:
    """Where the datum shows in a RESULT or a call-log line (evidence that it was observed), if it is shown."""
    if d.kind == "price":
        return None
    needle = d.value.lower()
    for sec in trace.sections:
        if sec.kind in ("result", "call"):
            text = trace.part(sec).lower()
            # in a call line, only the gateway's "returned … ids" part (the parameters are the agent's words)
            base = text.find("; returned ") if sec.kind == "call" else 0
            at = text.find(needle, base) if base >= 0 else -1
            if at >= 0:
                return trace.span(sec.start + at, sec.start + at + len(d.value), gate)
    return None


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class RubricJudge:
    """docs/arena.md §7.3 as a pure function of the trace and the call log (module docstring)."""

    name = "rubric"
    prompt_version = f"rubric-{RUBRIC_VERSION}+render-{RENDER_VERSION}"

    def __init__(self, *, logged_reasoning_only: bool = True) -> None:
        self.logged_reasoning_only = logged_reasoning_only

    async def judge(self, query: str, steps: list[dict[str, Any]], calls: list[dict[str, Any]]) -> Verdict:
        return self.evaluate(query, steps, calls)

    def evaluate(self, query: str, steps: list[dict[str, Any]], calls: list[Any]) -> Verdict:
        """The verdict, synchronously (the rubric never waits on anything)."""
        trace = render_trace(query, steps, calls)
        logged = normalise_calls(calls)
        spans: list[CitedSpan] = []
        notes: list[str] = []

        def verdict(gate: int | None, why: str) -> Verdict:
            score = PASS_SCORE if gate is None else GATE_SCORES[gate]
            head = "All gates passed" if gate is None else f"Gate {gate} failed"
            return Verdict(ok=True, score=score, gate=gate, explanation=f"{head}: {why}" + "".join(notes),
                           spans=spans, judge=self.name, prompt_version=self.prompt_version,
                           trace_sha256=trace.sha256)

        summary = trace.of("summary")[0]
        # G1: the call log, never the trace.
        strong = [c for c in logged if c.substantial]
        if not strong:
            spans.append(trace.span(summary.start, summary.end, 1))
            spans.extend(trace.span(w.start, w.end, 1) for w in trace.of("warning"))
            n_inf = sum(1 for c in logged if c.kind == "inference" and c.ok)
            return verdict(1, "the call log has no inference call" if n_inf == 0 else
                           f"none of the {n_inf} logged inference calls produced ≥ 30 completion tokens")
        line = next((s for s in trace.of("call") if s.index == strong[0].seq), summary)
        spans.append(trace.span(line.start, line.end, 1))
        notes.append(f" | G1: inference #{strong[0].seq}, {strong[0].completion_tokens} completion tokens")

        returned_lists = [c.returned_ids for c in logged if c.kind == "search" and c.returned_ids is not None]
        returned = {i for ids in returned_lists for i in ids} if returned_lists else None
        obs = observe(trace.part(trace.of("query")[0]), steps, returned)
        units = _units(trace, logged, obs, self.logged_reasoning_only)
        first = min((s.step for s in trace.of("result") if s.step is not None), default=None)

        # G2: reasoning that refers to an earlier result and assesses it.
        g2 = next((u for u in units if first is not None and first < u.step
                   and (u.data or COUNT.search(u.plain)) and ASSESS.search(u.plain)), None)
        if g2 is None:
            return verdict(2, "no reasoning sentence refers to an observed tool result and assesses it"
                           + _unlogged_note(trace, self.logged_reasoning_only))
        spans.append(trace.span(g2.start, g2.end, 2))
        notes.append(f" | G2: step {g2.step + 1}")

        # G3: a specific observed datum (not a title fragment, not a value of the query).
        g3 = next(((u, d) for u in units for d in u.data if d.kind != "title"), None)
        if g3 is None:
            return verdict(3, "the reasoning cites no id, price, brand, attribute or shop seen in the results")
        u3, d3 = g3
        spans.append(trace.span(d3.start, d3.end, 3))
        seen = _occurrence(trace, d3, 3)
        if seen is not None:
            spans.append(seen)
        notes.append(f" | G3: {d3.kind} {_short(d3.value, 40)!r} (step {u3.step + 1})")

        # G4: two candidates in one step and a comparison with a reason.
        g4 = _comparison(units)
        if g4 is None:
            return verdict(4, "no step names two candidates and gives a reason to prefer one")
        spans.append(trace.span(g4.start, g4.end, 4))
        return verdict(None, json.dumps(_short(g4.text), ensure_ascii=False))


def _candidates(data: tuple[Datum, ...]) -> set[str]:
    return {d.product or d.value for d in data if d.kind in ("product", "shop") or (d.kind == "title" and d.product)}


def _comparison(units: list[_Unit]) -> _Unit | None:
    by_step: dict[int, list[_Unit]] = {}
    for u in units:
        by_step.setdefault(u.step, []).append(u)
    for group in by_step.values():
        if len(set().union(*(_candidates(u.data) for u in group))) < 2:
            continue
        for u in group:
            if _candidates(u.data) and COMPARE.search(u.plain) and (
                    REASON.search(u.plain) or ASSESS.search(u.plain)
                    or any(d.kind in ("price", "value") for d in u.data)):
                return u
    return None


def _unlogged_note(trace: RenderedTrace, logged_only: bool) -> str:
    if not logged_only:
        return ""
    secs: list[Section] = [s for s in trace.sections if s.kind in ("think", "response")]
    off = sum(1 for s in secs if s.provenance in ("unverified", "partial"))
    return f" ({off} of {len(secs)} reasoning texts are not, or only partly, in the call log)" if off else ""
