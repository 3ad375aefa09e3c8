"""The format and length rewards (docs/shoppingbench.md §5.1, §7.3; upstream ``rewards/prm.py``, ``orm.py``).

``format_reward(content)`` is 1.0 iff the model output obeys the tag protocol:

1. of the roles in play (think mode: ``think``, ``tool_call``, ``response``; no-think/ReAct: ``tool_call``
   only, as upstream's ablation), each tag pair that occurs occurs exactly once, opening before closing;
2. think mode: ``<think>`` is present;
3. ``<tool_call>`` or ``<response>`` is present;
4. the ``<tool_call>`` body parses as a JSON **list** of objects with a string ``name`` and an object
   ``parameters`` (an empty list passes, as upstream);
5. no pair opens or closes strictly inside another (no nesting, no overlap);
6. the pairs appear in the order think → tool_call → response (``check_order``; the upstream/ORO code we
   read has no such check, so ``check_order=False`` reproduces it).

Otherwise 0.0. The per-step score of a trajectory is taken on ``completion.content`` by default, or on the
re-rendered ``completion.message`` (``format_source="message"``, what the upstream/ORO evaluators do).
Strict mode multiplies a step's score by 0.5 when ``extra_info.timestamp`` is missing or not positive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from shoparena.scoring.types import TIMESTAMP_MISSING_PENALTY, ParityFlags
from shoparena.types import Mode

#: Tags of a model output, in protocol order (upstream ``OUTPUT_ROLES``).
OUTPUT_ROLES: tuple[str, ...] = ("think", "tool_call", "response")
_TAG_RE = {role: (re.compile(re.escape(f"<{role}>")), re.compile(re.escape(f"</{role}>")))
           for role in OUTPUT_ROLES}


def format_reward(content: str, *, think: bool = True, check_order: bool = True) -> float:
    """1.0 if ``content`` follows the tag protocol (rules in the module docstring), else 0.0."""
    if not isinstance(content, str):
        return 0.0
    roles = OUTPUT_ROLES if think else ("tool_call",)
    pos: dict[str, tuple[list[int], list[int]]] = {}
    for role in roles:
        open_re, close_re = _TAG_RE[role]
        starts = [m.start() for m in open_re.finditer(content)]
        ends = [m.start() for m in close_re.finditer(content)]
        if starts or ends:
            pos[role] = (starts, ends)
    if think and "think" not in pos:
        return 0.0
    if "tool_call" not in pos and "response" not in pos:
        return 0.0
    for starts, ends in pos.values():
        if len(starts) != 1 or len(ends) != 1 or starts[0] >= ends[0]:
            return 0.0
    if "tool_call" in pos:
        body = content[pos["tool_call"][0][0] + len("<tool_call>"): pos["tool_call"][1][0]]
        if not _valid_tool_calls(body):
            return 0.0
    spans = {role: (s[0], e[0]) for role, (s, e) in pos.items()}
    for a, (a_start, a_end) in spans.items():
        for b, (b_start, b_end) in spans.items():
            if a != b and (a_start < b_start < a_end or a_start < b_end < a_end):
                return 0.0
    if check_order:
        ordered = [spans[r][0] for r in roles if r in spans]
        if ordered != sorted(ordered):
            return 0.0
    return 1.0


def _valid_tool_calls(body: str) -> bool:
    try:
        calls = json.loads(body)
    except ValueError:
        return False
    if not isinstance(calls, list):
        return False
    return all(
        isinstance(c, dict) and isinstance(c.get("name"), str) and "parameters" in c
        and isinstance(c["parameters"], dict)
        for c in calls
    )


def render_message(message: Mapping[str, Any]) -> str:
    """Upstream ``Message.to_string(OUTPUT_ROLES)``: each non-empty role as ``<role>…</role>`` (lists and
    dicts as JSON), joined by newlines, always in protocol order."""
    parts = []
    for role in OUTPUT_ROLES:
        value = message.get(role)
        if not value:
            continue
        if isinstance(value, dict | list):
            value = json.dumps(value, ensure_ascii=False)
        elif not isinstance(value, str):
            raise TypeError(f"message role {role!r} holds {type(value).__name__}")
        parts.append(f"<{role}>{value}</{role}>")
    return "\n".join(parts)


def _completion(step: Any) -> Mapping[str, Any] | None:
    if not isinstance(step, Mapping):
        return None
    completion = step.get("completion")
    return completion if isinstance(completion, Mapping) else None


def step_content(step: Mapping[str, Any], source: str = "content") -> str | None:
    """The text ``format_reward`` checks for one step; falls back to the other source when the chosen one is
    absent (a ``message``-only record, or a step without ``message``). None if neither exists."""
    completion = _completion(step)
    if completion is None:
        return None
    content = completion.get("content")
    message = completion.get("message")
    if source == "message" or not isinstance(content, str):
        if isinstance(message, Mapping):
            try:
                return render_message(message)
            except TypeError:
                return None
        return content if isinstance(content, str) else None
    return content


def has_valid_timestamp(step: Any) -> bool:
    """ORO's rule: ``extra_info.timestamp`` is a number > 0 (ms since the epoch)."""
    extra = step.get("extra_info") if isinstance(step, Mapping) else None
    ts = extra.get("timestamp") if isinstance(extra, Mapping) else None
    return isinstance(ts, int | float) and not isinstance(ts, bool) and ts > 0


def trajectory_format(
    steps: Sequence[Any],
    *,
    mode: Mode,
    think: bool = True,
    parity: ParityFlags | None = None,
    source: str | None = None,
) -> float:
    """Mean over steps of the per-step format score; malformed steps score 0 but stay in the denominator;
    strict applies the timestamp penalty. 0.0 for an empty trajectory."""
    if not steps:
        return 0.0
    parity = parity or ParityFlags()
    src = source or parity.format_source
    total = 0.0
    for step in steps:
        text = step_content(step, src)
        score = 0.0 if text is None else format_reward(text, think=think,
                                                       check_order=parity.format_order_check)
        if mode == "strict" and not has_valid_timestamp(step):
            score *= TIMESTAMP_MISSING_PENALTY
        total += score
    return total / len(steps)


def step_tool_calls(step: Any) -> list[Mapping[str, Any]]:
    """The parsed tool calls of a step (``completion.message.tool_call``), skipping malformed entries."""
    completion = _completion(step)
    message = completion.get("message") if completion is not None else None
    calls = message.get("tool_call") if isinstance(message, Mapping) else None
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, Mapping)]


def length_reward(steps: Sequence[Any]) -> float:
    """1/len(steps) if the last step calls ``terminate`` (its status is ignored, §9.8), else 0."""
    if not steps:
        return 0.0
    if any(c.get("name") == "terminate" for c in step_tool_calls(steps[-1])):
        return 1.0 / len(steps)
    return 0.0
