"""Writing a policy's step: think-text helpers and the reply in each protocol.

- tag protocol (no ``tools`` passed): ``<think>…</think>\\n<tool_call>[{"name", "parameters"}]</tool_call>``
  (no think in the ReAct ablation, whose system prompt asks for ``<tool_call>`` only);
- native protocol with ``tools``: API ``tool_calls`` with the think as ``reasoning_content`` (what
  ``env.protocol_native.parse_reply_native`` reads when the content has no ``<think>``; left out when the request
  sets ``enable_thinking=False``, Qwen3's no-think mode);
- native conversation without ``tools``: Qwen3 text, ``<think>…</think>`` then one ``<tool_call>`` block per call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from shoparena.env.types import AssistantMessage, ToolCall, Usage
from shoparena.llm.policies.knowledge import Cand, Match

__all__ = ["Action", "fmt_cand", "fmt_match", "money", "render_reply"]


@dataclass(slots=True)
class Action:
    """One step: the rationale and the calls ``(name, parameters)``."""

    think: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def money(x: float | None) -> str:
    if x is None:
        return "?"
    return f"₱{x:,.0f}" if float(x).is_integer() else f"₱{x:,.2f}"


def fmt_cand(c: Cand, n: int = 44, services: bool = True) -> str:
    svc = f" [{', '.join(c.service)}]" if services and c.service else ""
    return f"{c.short(n)} {money(c.price)}{svc}"


def fmt_match(m: Match, limit: int = 4) -> str:
    parts = []
    if m.ok:
        parts.append("matches " + ", ".join(m.ok[:limit]))
    if m.bad:
        parts.append("misses " + ", ".join(m.bad[:limit]))
    if m.unknown:
        parts.append("unverified " + ", ".join(m.unknown[:limit]))
    return "; ".join(parts) or "no stated constraints"


def join(parts: Sequence[str]) -> str:
    parts = [p for p in parts if p]
    if len(parts) <= 2:
        return " and ".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _usage(messages: list[dict[str, Any]], out_chars: int) -> Usage:
    n = 0
    for m in messages:
        c = m.get("content")
        n += len(c) if isinstance(c, str) else 0
    prompt, completion = max(1, n // 4), max(1, out_chars // 4)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def render_reply(action: Action, *, protocol: str, think: bool, native_tools: bool,
                 messages: list[dict[str, Any]]) -> AssistantMessage:
    """The reply for one step in the conversation's protocol (module docstring)."""
    if protocol == "tags":
        body = orjson.dumps([{"name": n, "parameters": p} for n, p in action.calls]).decode()
        content = (f"<think>{action.think}</think>\n" if think else "") + f"<tool_call>{body}</tool_call>"
        return AssistantMessage(content=content, usage=_usage(messages, len(content)))
    if native_tools:
        calls = [ToolCall(name=n, arguments=p) for n, p in action.calls]
        return AssistantMessage(content="", reasoning_content=action.think if think else None, tool_calls=calls,
                                usage=_usage(messages, len(action.think) + 60 * len(calls)))
    blocks = "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': p}, ensure_ascii=False)}\n</tool_call>"
                       for n, p in action.calls)
    content = (f"<think>\n{action.think}\n</think>\n\n" if think else "") + blocks
    return AssistantMessage(content=content, usage=_usage(messages, len(content)))
