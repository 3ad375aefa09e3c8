"""The per-row gates: :class:`JudgeGate` (reasoning-coefficient gate), :class:`FormatGate` (the five hard format
rejects of ``docs/paper.md`` §3 / Appendix A.2), :class:`AxisSplit` (keep axis-A, route axis-B to the rewriter) and
:class:`OutcomeGate` (Trac's *freeze*). Each streams: one row in, decided, out or rejected with a counted reason.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from shoparena.corpus.filter.base import Stage, call_args, call_name
from shoparena.corpus.filter.config import FilterConfig
from shoparena.corpus.filter.tokens import make_counter
from shoparena.corpus.types import Rejection, Trajectory
from shoparena.env.turns import callless

__all__ = ["FORMAT_REASONS", "AxisSplit", "FormatGate", "JudgeGate", "OutcomeGate", "recommended_ids"]

FORMAT_REASONS: tuple[str, ...] = ("unpaired_tool_call", "recommend_count", "recommend_unresolved",
                                   "think_then_stop", "too_long")
"""The five hard rejects, in the order they are checked (the first that applies is the one counted; the token
count is last because it is the costliest)."""


class JudgeGate(Stage):
    """Reasoning-coefficient gate: keep a row whose ``judge_score`` (else its run's ``coefficient``) is at least
    ``min_judge_score``. Reasons: ``judge_below``, ``judge_missing`` (neither value, with
    ``judge_missing="reject"``), ``judge_invalid`` (not a finite number)."""

    name = "judge"

    def __init__(self, config: FilterConfig, sink: list[Rejection] | None = None) -> None:
        super().__init__(sink)
        self.threshold = config.min_judge_score
        self.keep_missing = config.judge_missing == "keep"
        self.report.notes.update(min_judge_score=self.threshold, judge_missing=config.judge_missing,
                                 read_from=Counter())

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:
        report, threshold = self.report, self.threshold
        read_from: Counter[str] = report.notes["read_from"]
        for t in rows:
            report.seen += 1
            score: Any = t.judge_score
            field = "judge_score"
            if score is None:
                score, field = t.coefficient, "coefficient"
            if score is None:
                read_from["missing"] += 1
                if self.keep_missing:
                    report.kept += 1
                    yield t
                else:
                    self.reject(t, "judge_missing", "no judge score and no reasoning coefficient")
                continue
            read_from[field] += 1
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                self.reject(t, "judge_invalid", f"{field} is {score!r}, not a finite number")
            elif score < threshold:
                self.reject(t, "judge_below", f"{field} {score:g} < {threshold:g}")
            else:
                report.kept += 1
                yield t


def recommended_ids(args: dict[str, Any]) -> list[str] | None:
    """The ids a ``recommend_product`` call recommends: ``product_ids`` as a comma string or an array of ids, or
    ``product_id`` alone (the forms the tools accept); pieces stripped, empties dropped. None when the value has
    another type or an array item is not a string / integer."""
    for key in ("product_ids", "product_id"):
        value = args.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        if isinstance(value, int) and not isinstance(value, bool):
            return [str(value)]
        if isinstance(value, list):
            out = []
            for v in value:
                if isinstance(v, bool) or not isinstance(v, str | int):
                    return None
                s = str(v).strip()
                if s:
                    out.append(s)
            return out
        return None
    return []


class FormatGate(Stage):
    """The five hard rejects (``docs/paper.md`` §3, Appendix A.2), checked in :data:`FORMAT_REASONS` order:

    - ``unpaired_tool_call``: an assistant turn's tool calls are not answered, one tool message each, by the tool
      messages that directly follow it (by ``tool_call_id`` when calls and responses all carry ids, else by
      count), or a tool message answers no call (an orphan);
    - ``recommend_count``: ``recommend_product`` is not called exactly once;
    - ``recommend_unresolved``: its arguments are not a JSON object, name no product id, or (with ``check_ids``
      and a ``known_ids`` callable) name an id the catalog does not have;
    - ``think_then_stop``: the trace ends on an assistant turn with no tool call (a think or text turn) before
      any ``terminate`` completed — a closing text turn after a completed ``terminate`` is allowed;
    - ``too_long``: tools + messages take more than ``max_length`` tokens (see
      :mod:`shoparena.corpus.filter.tokens`).

    A row whose structure is not the canonical form at all (messages not a list of objects) is counted as
    ``malformed`` rather than crashing the run.
    """

    name = "format"

    def __init__(self, config: FilterConfig, sink: list[Rejection] | None = None, *,
                 known_ids: Callable[[str], bool] | None = None) -> None:
        super().__init__(sink)
        self.max_length = config.max_length
        self.count_tokens = make_counter(config.tokenizer)
        self.known_ids = known_ids if config.check_ids else None
        self.report.notes.update(ids_checked=self.known_ids is not None, max_length=self.max_length,
                                 tokenizer=config.tokenizer or "estimate")

    def check(self, t: Trajectory) -> tuple[str, str] | None:
        """The first hard reject that applies to ``t`` as ``(reason, message)``; None when it passes."""
        msgs = t.messages
        if not isinstance(msgs, list):
            return "malformed", f"messages is a {type(msgs).__name__}, not a list"
        n = len(msgs)
        recommends: list[Any] = []
        terminated_at = -1
        i = 0
        while i < n:
            m = msgs[i]
            if not isinstance(m, dict):
                return "malformed", f"message {i} is a {type(m).__name__}, not an object"
            role = m.get("role")
            if role == "tool":
                return "unpaired_tool_call", f"message {i}: tool response answers no tool call"
            calls = m.get("tool_calls") if role == "assistant" else None
            if not calls:
                i += 1
                continue
            j = i + 1
            while j < n and isinstance(msgs[j], dict) and msgs[j].get("role") == "tool":
                j += 1
            if j - i - 1 != len(calls):
                return ("unpaired_tool_call",
                        f"message {i}: {len(calls)} tool call(s) answered by {j - i - 1} tool response(s)")
            ids = [c.get("id") if isinstance(c, dict) else None for c in calls]
            got = [msgs[k].get("tool_call_id") for k in range(i + 1, j)]
            if all(ids) and all(got) and sorted(map(str, ids)) != sorted(map(str, got)):
                return ("unpaired_tool_call",
                        f"message {i}: tool call ids {sorted(map(str, ids))} answered by {sorted(map(str, got))}")
            for c in calls:
                name = call_name(c)
                if name == "recommend_product":
                    recommends.append(c)
                elif name == "terminate":
                    terminated_at = i
            i = j
        if len(recommends) != 1:
            return "recommend_count", f"recommend_product called {len(recommends)} times, not once"
        args = call_args(recommends[0])
        if args is None:
            return "recommend_unresolved", "recommend_product arguments are not a JSON object"
        ids = recommended_ids(args)
        if not ids:
            return "recommend_unresolved", "recommend_product names no product id"
        if self.known_ids is not None:
            missing = [p for p in ids if not self.known_ids(p)]
            if missing:
                return "recommend_unresolved", f"recommended id(s) not in the catalog: {', '.join(missing[:5])}"
        last = msgs[-1] if msgs else None
        # canonical traces carry their calls in tool_calls (the parser already read the text): content not re-read
        if (isinstance(last, dict) and last.get("role") == "assistant" and callless(last, parse_content=False)
                and terminated_at < 0):
            return "think_then_stop", "the trace ends on an assistant turn with no recommend_product / terminate"
        tokens = self.count_tokens(msgs, t.tools)
        if tokens > self.max_length:
            return "too_long", f"{tokens} tokens > max_length {self.max_length}"
        return None

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:
        report = self.report
        for t in rows:
            report.seen += 1
            try:
                verdict = self.check(t)
            except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
                verdict = "malformed", f"{type(exc).__name__}: {exc}"
            if verdict is None:
                report.kept += 1
                yield t
            else:
                self.reject(t, *verdict)
        fallbacks = getattr(self.count_tokens, "template_fallbacks", 0)
        if fallbacks:
            report.notes["template_fallbacks"] = fallbacks


class AxisSplit(Stage):
    """Keep rows whose axis is in ``axis_keep`` (default axis A: the LLM emitted every search call); route axis-B
    rows (Python emitted the calls) to :attr:`axis_b` for the rewriter; drop the rest. Reasons: ``axis_b`` (routed,
    not lost), ``axis_mixed``, ``axis_none``, ``axis_unknown`` (no axis), ``axis_a`` (only when A is not kept).
    ``notes["by_source"]`` counts every decision by how the axis was decided (``call_log`` / ``text`` /
    ``rewrite``) and axis."""

    name = "axis"

    def __init__(self, config: FilterConfig, sink: list[Rejection] | None = None) -> None:
        super().__init__(sink)
        self.keep = frozenset(config.axis_keep)
        self.axis_b: list[Trajectory] = []
        self.by_source: dict[str, Counter[str]] = {}
        self.report.notes.update(axis_keep=list(config.axis_keep), by_source=self.by_source)

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:
        report, keep, by_source = self.report, self.keep, self.by_source
        for t in rows:
            report.seen += 1
            axis = t.axis
            src = t.axis_source or "unknown"
            counter = by_source.get(src)
            if counter is None:
                counter = by_source[src] = Counter()
            counter[axis or "unknown"] += 1
            if axis in keep:
                report.kept += 1
                yield t
            elif axis == "B":
                self.axis_b.append(t)
                self.reject(t, "axis_b", f"axis B (decided by {src}): routed to the rewriter")
            else:
                self.reject(t, f"axis_{(axis or 'unknown').lower()}",
                            f"axis {axis or 'unknown'} (decided by {src}) is not kept")


class OutcomeGate(Stage):
    """Trac's *freeze* (``docs/paper.md`` §3): with ``require_success`` only rows the rule scorer marked successful
    stay (``outcome_failed``, ``outcome_unscored`` otherwise; failed ones are collected in :attr:`failed` for
    preference data when ``allow_failed``); without it every row stays except failed ones when
    ``allow_failed=False``."""

    name = "outcome"

    def __init__(self, config: FilterConfig, sink: list[Rejection] | None = None) -> None:
        super().__init__(sink)
        self.require_success = config.require_success
        self.allow_failed = config.allow_failed
        self.failed: list[Trajectory] = []
        self.report.notes.update(require_success=self.require_success, allow_failed=self.allow_failed)

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:
        report = self.report
        for t in rows:
            report.seen += 1
            ok = t.success
            if ok is True or (ok is None and not self.require_success) or (
                    ok is False and self.allow_failed and not self.require_success):
                report.kept += 1
                yield t
            elif ok is None:
                self.reject(t, "outcome_unscored", "no rule-scorer verdict and require_success is set")
            else:
                if self.allow_failed:
                    self.failed.append(t)
                    msg = "failed (strict rule score): kept for preference data only"
                else:
                    msg = "failed (strict rule score) and allow_failed is off"
                self.reject(t, "outcome_failed", msg)
        self.report.notes["failed_collected"] = len(self.failed)
