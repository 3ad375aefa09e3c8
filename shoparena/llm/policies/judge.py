"""Offline *judge* models, ``policy:judge-<style>[-<seed>]``: the reasoning judge's chat protocol answered offline.

The shopping policies answer a judge prompt with tool calls (so ``llm:policy:expert`` fails cleanly); these
answer it as a judge model would. A :class:`JudgePolicy` reads only the conversation it is given: it finds the
DATA block of the judge's user message (``<<<TRACE nonce>>>`` … ``<<<END TRACE nonce>>>``), checks that the nonce is
the prefix of the SHA-256 of the text between the markers (so it has recovered the rendered trace byte for byte),
re-reads the trace's layout (query, call-log summary and lines, per step THINKING with its provenance tag, TOOL,
RESULT, RESPONSE), decides the four gates of docs/arena.md §7.3, and answers with exactly the JSON object the prompt asks
for, every evidence quote a verbatim substring of the block with its offsets. The answer then goes through the LLM
judge's own parser and span check like any model's. A prompt it cannot read (no DATA block, a nonce that does not
match) gets a short prose refusal, which the LLM judge counts as an unparseable answer: a failure, never a score.

It is an independent reading of the rendered trace (``llm`` sits below ``validator``, so nothing of the rubric
judge is imported): its own lexicons, and it sees only what an LLM judge sees — results cut to 300 characters,
the first 30 call-log lines, tags instead of completions. Styles (:data:`STYLES`) differ in what they accept:

==================  =========================================================================================
``judge-strict``    reasoning only when the log holds it verbatim (``[partly in call log]`` does not count);
                    G2 needs a cited datum (a result count is not analysis) and a definite assessment ("looks
                    right" / "promising" is not one); G3 only ids and prices; only ids a
                    RESULT showed; G4's comparing sentence names both candidates and gives a reason
``judge-standard``  partly-logged reasoning counts; result counts are analysis; brand / attribute values count
                    for G3; ids the call log returned count as observed; G4 needs two candidates in one step
``judge-lenient``   as standard, plus a title fragment counts as a datum and a comparison word alone passes G4
``judge-noisy``     standard, then a seeded slip: with probability 0.25 the score moves one rubric step (up
                    with a verbatim but irrelevant quote, or down), never across G1
==================  =========================================================================================

Every style reads G1 from the call-log summary only (the count of inference calls with ≥ 30 completion tokens).
A suffix ``-<seed>`` (``judge-noisy-3``) seeds the slips; the draw is a function of (style, seed,
``Sampling.seed``, trace hash), so the same trace and seed always get the same answer.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from shoparena.env.types import AssistantMessage, Usage
from shoparena.llm.policies.decide import stable_seed
from shoparena.llm.types import Sampling

__all__ = ["STYLES", "JudgePolicy", "JudgeStyle", "TraceView", "judge_policy_names", "read_trace"]

_SCORES = {1: 0.1, 2: 0.3, 3: 0.5, 4: 0.7, None: 0.9}
_MAX_QUOTE = 300


@dataclass(frozen=True, slots=True)
class JudgeStyle:
    """What one judge style accepts as evidence (module docstring)."""

    name: str
    partial: bool = True
    """``[partly in call log]`` reasoning is admissible."""
    counts: bool = True
    """A statement about result counts ("10 results", "no match") refers to a result for G2."""
    values: bool = True
    """Brand / attribute / option values are data for G3 (ids and prices always are)."""
    titles: bool = False
    """A 4-word title fragment is a datum for G3."""
    log_ids: bool = True
    """Product ids the call log returned count as observed (else only ids a RESULT showed)."""
    same_sentence: bool = False
    """G4: the comparing sentence itself names two candidates (else two in the step suffice)."""
    needs_reason: bool = True
    """G4: the comparing sentence also gives a reason (because / since / a price / an assessment)."""
    vague: bool = True
    """G2: a vague verdict on a cited result ("looks right", "promising") is an assessment."""
    slip: float = 0.0
    """Probability of moving the score one rubric step (seeded per trace)."""


STYLES: dict[str, JudgeStyle] = {
    "strict": JudgeStyle("strict", partial=False, counts=False, values=False, log_ids=False, vague=False,
                         same_sentence=True),
    "standard": JudgeStyle("standard"),
    "lenient": JudgeStyle("lenient", titles=True, needs_reason=False),
    "noisy": JudgeStyle("noisy", slip=0.25),
}


def judge_policy_names() -> list[str]:
    return [f"judge-{s}" for s in STYLES]


# -- reading the trace ---------------------------------------------------------------------------------------------
_BLOCK = re.compile(r"<<<TRACE ([0-9a-f]{16})>>>\n(.*)\n<<<END TRACE \1>>>", re.DOTALL)
_SUMMARY = re.compile(r"\d+ calls: \d+ inference \(\d+ answered, (\d+) with ≥ 30 completion tokens")
_CALL = re.compile(r"#\d+ inference model=.*? → 200, completion_tokens=(\d+)")
_RETURNED = re.compile(r"#\d+ search .*; returned \d+ ids: ([\d,]+)")
_TAG = re.compile(r"^(THINKING|RESPONSE)(?: \[(in call log #\d+|partly in call log|NOT in call log)\])?: ")
_TRUNC = "…[truncated]"
_HEADS = (("query", "QUERY: ", 7), ("summary", "Summary: ", 9), ("call", "  #", 2), ("warning", "WARNING: ", 0))
"""Lines before the trajectory: part kind, line prefix, length of the label before the part."""


@dataclass(frozen=True, slots=True)
class Part:
    kind: str
    """``query``, ``summary``, ``call``, ``warning``, ``think``, ``response``, ``tool``, ``result``."""
    start: int
    end: int
    step: int | None = None
    tag: str = ""
    """``verified``, ``partial``, ``unverified`` or ``unknown`` (reasoning parts)."""


@dataclass
class TraceView:
    """The rendered trace re-read from the prompt: its text and where each part lies."""

    text: str
    parts: list[Part] = field(default_factory=list)

    def of(self, kind: str) -> list[Part]:
        return [p for p in self.parts if p.kind == kind]

    def body(self, p: Part) -> str:
        return self.text[p.start:p.end]


def read_trace(messages: list[dict[str, Any]]) -> TraceView | None:
    """The judged trace from the judge's messages, or None when there is no block or its nonce does not match."""
    for m in messages:
        if m.get("role") != "user" or not isinstance(m.get("content"), str):
            continue
        hit = _BLOCK.search(m["content"])
        if hit is None:
            continue
        text = hit.group(2)
        if hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] != hit.group(1):
            return None
        return _parts(text)
    return None


def _parts(text: str) -> TraceView:
    view, pos, step = TraceView(text), 0, None
    for line in text.split("\n"):
        a, b = pos, pos + len(line)
        pos = b + 1
        end = b - len(_TRUNC) if line.endswith(_TRUNC) else b
        if step is None:
            head = next(((k, skip) for k, prefix, skip in _HEADS if line.startswith(prefix)), None)
            if head is not None:
                view.parts.append(Part(head[0], a + head[1], end))
        if line.startswith("--- Step ") and line.endswith(" ---"):
            step = int(line[9:-4]) - 1
        elif step is not None and (m := _TAG.match(line)):
            tag = {None: "unknown", "partly in call log": "partial", "NOT in call log": "unverified"}.get(
                m.group(2), "verified")
            view.parts.append(Part("think" if m.group(1) == "THINKING" else "response", a + m.end(), end, step, tag))
        elif step is not None and line.startswith("RESULT: ") and line != "RESULT: (none)":
            view.parts.append(Part("result", a + 8, end, step))
    return view


# -- what the results showed ---------------------------------------------------------------------------------------
_ID = re.compile(r"(?<![\d.,])\d{5,12}(?!\d|[.,]\d)")
_PRICE = re.compile(r"(?:₱|PHP ?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?(?!\d)")
_J_PID = re.compile(r'"(?:product_id|productId)": "?(\d{5,12})')
_J_SHOP = re.compile(r'"shop_id": "?(\d{5,12})')
_J_PRICE = re.compile(r'"price": (\d+(?:\.\d+)?)')
_J_TITLE = re.compile(r'"title": "((?:[^"\\]|\\.)*)')
_J_STR = re.compile(r'"(\w[\w ]{0,30})": (\[(?:"[^"]*"(?:, )?)*\]?|"[^"]*")')
_NOT_VALUES = {"title", "description", "short_description", "product_id", "productId", "shop_id", "service", "q",
               "page", "product_ids", "price"}
_WORD = re.compile(r"[a-z0-9]+")


def _money(whole: str, frac: str | None) -> float:
    return round(float(whole.replace(",", "") + ("." + frac if frac else "")), 2)


@dataclass
class Observed:
    """Data the RESULT parts (and, per style, the call log) showed, each with the first step that showed it."""

    query: str
    ids: dict[str, tuple[str, int]] = field(default_factory=dict)
    prices: dict[float, int] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)
    grams: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)

    def add(self, text: str, step: int) -> None:
        q = self.query.lower()
        for kind, rx in (("product", _J_PID), ("shop", _J_SHOP)):
            for m in rx.finditer(text):
                self.ids.setdefault(m.group(1), (kind, step))
        if not _J_PID.search(text):  # a plain-text result: any id-like number
            for m in _ID.finditer(text):
                self.ids.setdefault(m.group(), ("product", step))
        qnums = {float(x) for x in re.findall(r"\d+(?:\.\d+)?", q.replace(",", ""))}
        for m in _J_PRICE.finditer(text):
            p = round(float(m.group(1)), 2)
            if p not in qnums:
                self.prices.setdefault(p, step)
        for m in _J_STR.finditer(text):
            if m.group(1) in _NOT_VALUES:
                continue
            for v in re.findall(r'"([^"]*)"', m.group(2)):
                v = " ".join(v.lower().split())
                if 3 <= len(v) <= 40 and re.search(r"[a-z]", v) and not re.search(rf"(?<!\w){re.escape(v)}(?!\w)", q):
                    self.values.setdefault(v, step)
        pid, qwords = "", set(_WORD.findall(q))
        for m in re.finditer(rf"{_J_PID.pattern}|{_J_TITLE.pattern}", text):
            if m.group(1):
                pid = m.group(1)
                continue
            words = _WORD.findall(m.group(2).lower())
            for i in range(len(words) - 3):
                gram = tuple(words[i:i + 4])
                if not set(gram) <= qwords:
                    self.grams.setdefault(gram, (pid, step))


@dataclass(frozen=True, slots=True)
class Cite:
    kind: str
    value: str
    product: str | None = None


def _cited(obs: Observed, text: str, before: int) -> list[Cite]:
    out = []
    for m in _ID.finditer(text):
        hit = obs.ids.get(m.group())
        if hit is not None and hit[1] < before:
            out.append(Cite(hit[0], m.group(), m.group() if hit[0] == "product" else None))
    for m in _PRICE.finditer(text):
        if obs.prices.get(_money(m.group(1), m.group(2)), before) < before:
            out.append(Cite("price", m.group()))
    low = text.lower()
    for v, step in obs.values.items():
        if step < before and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", low):
            out.append(Cite("value", v))
    words = _WORD.findall(low)
    for i in range(len(words) - 3):
        hit = obs.grams.get(tuple(words[i:i + 4]))
        if hit is not None and hit[1] < before:
            out.append(Cite("title", " ".join(words[i:i + 4]), hit[0] or None))
    return out


# -- the gates -----------------------------------------------------------------------------------------------------
_ASSESS = re.compile(
    r"\b(?:match\w*|meets?|fits?|within|exceeds?|over (?:the )?budget|under budget|cheap\w*|expensive|pricier|"
    r"afford\w*|best|better|closest|closer|worse|wrong|(?:un)?suitable|confirm\w*|verified|only|none|"
    r"not|\w+n't|lacks?|missing|fails?|instead)\b", re.IGNORECASE)
_VAGUE = re.compile(r"\b(?:right|good|promising|fine|nice|great)\b", re.IGNORECASE)
_COUNT = re.compile(r"\b(?:\d+|no|zero) (?:\w+ )?(?:results?|hits?|matches|listings?)\b|\bnothing (?:found|matched)\b"
                    r"|\bno (?:exact |good )?match\b", re.IGNORECASE)
_COMPARE = re.compile(r"\b(?:than|rather|instead of|prefer\w*|versus|vs|compar\w*|whereas|unlike|better|best|"
                      r"cheaper|cheapest|closer|closest|beats?|over the other)\b", re.IGNORECASE)
_REASON = re.compile(r"\b(?:because|since|as it|given|due to)\b", re.IGNORECASE)
_SENT = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass(frozen=True, slots=True)
class Unit:
    step: int
    start: int
    end: int
    cites: tuple[Cite, ...]


def _units(view: TraceView, obs: Observed, style: JudgeStyle) -> list[Unit]:
    out = []
    for p in view.parts:
        if p.kind not in ("think", "response") or p.step is None or p.tag == "unverified":
            continue
        if p.tag == "partial" and not style.partial:
            continue
        body, pos = view.body(p), 0
        bounds = [(m.start(), m.end()) for m in _SENT.finditer(body)] + [(len(body), len(body))]
        for cut, nxt in bounds:
            if cut > pos:
                a, b = p.start + pos, p.start + cut
                out.append(Unit(p.step, a, b, tuple(_cited(obs, view.text[a:b], p.step))))
            pos = nxt
    return out


def _candidates(cites: tuple[Cite, ...]) -> set[str]:
    return {c.product or c.value for c in cites if c.kind in ("product", "shop") or (c.kind == "title" and c.product)}


@dataclass
class Decision:
    gate: int | None
    why: str
    evidence: list[tuple[int, int, int]] = field(default_factory=list)
    """``(gate, start, end)`` offsets into the trace text."""


def decide(view: TraceView, style: JudgeStyle) -> Decision:
    """The first failing gate and its evidence (module docstring)."""
    summary = next(iter(view.of("summary")), None)
    m = _SUMMARY.match(view.body(summary)) if summary else None
    if summary is None or m is None or int(m.group(1)) == 0:
        ev = [(1, p.start, p.end) for p in view.of("summary") + view.of("warning")]
        return Decision(1, "no logged inference call has ≥ 30 completion tokens", ev)
    line = next((p for p in view.of("call") if (c := _CALL.match(view.body(p))) and int(c.group(1)) >= 30), summary)
    d = Decision(None, "", [(1, line.start, line.end)])
    query = view.body(view.of("query")[0]) if view.of("query") else ""
    obs = Observed(query)
    if style.log_ids:
        for p in view.of("call"):
            if r := _RETURNED.match(view.body(p)):
                for pid in r.group(1).split(","):
                    obs.ids.setdefault(pid, ("product", 0))
    for p in view.of("result"):
        obs.add(view.body(p), p.step or 0)
    units = _units(view, obs, style)
    first = min((p.step for p in view.of("result") if p.step is not None), default=None)
    text = view.text

    def refers(u: Unit) -> bool:
        return bool(u.cites) or (style.counts and _COUNT.search(text[u.start:u.end]) is not None)

    def assesses(u: Unit) -> bool:
        s = text[u.start:u.end]
        return _ASSESS.search(s) is not None or (style.vague and _VAGUE.search(s) is not None)

    g2 = next((u for u in units if first is not None and u.step > first and refers(u) and assesses(u)), None)
    if g2 is None:
        d.gate, d.why = 2, "no admissible reasoning analyses an earlier tool result"
        return d
    d.evidence.append((2, g2.start, g2.end))
    kinds = {"product", "shop", "price"} | ({"value"} if style.values else set()) | (
        {"title"} if style.titles else set())
    g3 = next((u for u in units if any(c.kind in kinds for c in u.cites)), None)
    if g3 is None:
        d.gate, d.why = 3, "the reasoning cites no specific datum seen in the results"
        return d
    d.evidence.append((3, g3.start, g3.end))
    g4 = _comparison(units, text, style)
    if g4 is None:
        d.gate, d.why = 4, "no step compares two candidates with a reason"
        return d
    d.evidence.append((4, g4.start, g4.end))
    d.why = json.dumps(text[g4.start:g4.end][:140], ensure_ascii=False)
    return d


def _comparison(units: list[Unit], text: str, style: JudgeStyle) -> Unit | None:
    by_step: dict[int, list[Unit]] = {}
    for u in units:
        by_step.setdefault(u.step, []).append(u)
    for group in by_step.values():
        if len(set().union(*(_candidates(u.cites) for u in group))) < 2:
            continue
        for u in group:
            s = text[u.start:u.end]
            named = len(_candidates(u.cites))
            if named < (2 if style.same_sentence else 1) or not _COMPARE.search(s):
                continue
            if not style.needs_reason or _REASON.search(s) or _ASSESS.search(s) or any(
                    c.kind == "price" for c in u.cites):
                return u
    return None


def _slip(d: Decision, view: TraceView, rng: random.Random, style: JudgeStyle) -> Decision:
    """A seeded one-step move of the verdict (``judge-noisy``), never across G1."""
    if rng.random() >= style.slip or d.gate == 1:
        return d
    up = rng.random() < 0.5
    if up and d.gate is not None:
        reasoning = [p for p in view.parts if p.kind in ("think", "response") and p.tag != "unverified"]
        if not reasoning:
            return d
        p = reasoning[rng.randrange(len(reasoning))]  # a verbatim quote that does not show what it claims
        gate = d.gate + 1 if d.gate < 4 else None
        return Decision(gate, "the reasoning looks adequate", [*d.evidence, (d.gate, p.start, p.end)])
    if not up and d.gate != 2:
        gate = 4 if d.gate is None else d.gate - 1
        return Decision(gate, "the evidence for the next gate is not convincing",
                        [e for e in d.evidence if e[0] < gate])
    return d


def _quote(text: str, gate: int, start: int, end: int) -> dict[str, Any]:
    if end - start > _MAX_QUOTE:  # a verbatim prefix, cut at a word boundary
        cut = text.rfind(" ", start, start + _MAX_QUOTE)
        end = cut if cut > start + 20 else start + _MAX_QUOTE
    return {"gate": gate, "quote": text[start:end], "start": start, "end": end}


def answer(view: TraceView, style: JudgeStyle, seed: int) -> str:
    """The JSON verdict the judge prompt asks for."""
    d = decide(view, style)
    if style.slip:
        d = _slip(d, view, random.Random(stable_seed("judge", style.name, seed, view.text)), style)
    head = "All gates passed" if d.gate is None else f"Gate {d.gate} failed"
    return json.dumps({"reasoning_quality": _SCORES[d.gate], "gate": d.gate,
                       "explanation": f"{head}: {d.why}"[:180],
                       "evidence": [_quote(view.text, g, a, b) for g, a, b in d.evidence if b > a]},
                      ensure_ascii=False)


class JudgePolicy:
    """A judge style behind the chat interface (module docstring)."""

    def __init__(self, style: JudgeStyle, seed: int = 0) -> None:
        self.style, self.seed = style, seed
        self.name = f"policy:judge-{style.name}" + (f"-{seed}" if seed else "")

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        return self.complete(messages, tools, sampling)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 sampling: Sampling | None = None) -> AssistantMessage:
        view = read_trace(messages)
        seed = stable_seed(self.seed, (sampling.seed if sampling and sampling.seed is not None else 0))
        text = ("I can only judge a trajectory given in a DATA block between matching TRACE markers."
                if view is None else answer(view, self.style, seed))
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
        done = len(text) // 4 + 1
        return AssistantMessage(content=text, usage=Usage(prompt_tokens=prompt, completion_tokens=done,
                                                          total_tokens=prompt + done))


def parse_name(name: str) -> JudgePolicy | None:
    """``judge-<style>[-<seed>]`` → its policy; None when ``name`` is not a judge name."""
    m = re.fullmatch(r"judge-([a-z]+)(?:-(\d{1,9}))?", name)
    if m is None or m.group(1) not in STYLES:
        return None
    return JudgePolicy(STYLES[m.group(1)], int(m.group(2) or 0))
