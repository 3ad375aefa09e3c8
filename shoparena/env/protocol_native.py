"""The native protocol (docs/shoppingbench.md §5.2): OpenAI messages + function specs, and the Qwen3 text format.

A policy either returns API-side ``tool_calls`` (an OpenAI-compatible server with a tool parser) or raw
Qwen3 text: ``<think>…</think>`` then ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>`` blocks.
Only complete blocks after the think section are parsed; text outside the blocks is the response.
"""

from __future__ import annotations

import json
from typing import Any

import regex as re

from shoparena.env.protocol_tags import Parsed, accept_calls, render_content, strip_think_tags
from shoparena.env.types import AssistantMessage, ToolCall, Usage

_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


UNCLOSED_CALL_NOTE = "unclosed <tool_call> block dropped"
"""The parse note of a completion that ends inside a ``<tool_call>`` block (a turn cut at its token cap)."""


def split_think(text: str) -> tuple[str, str]:
    """``(think, rest)``. ``</think>`` closes the think section (the opening tag is optional, as Qwen3
    templates often pre-fill it); an unterminated ``<think>`` swallows the rest of the text."""
    end = text.find("</think>")
    if end >= 0:
        head = text[:end]
        start = head.find("<think>")
        return (head[start + len("<think>"):] if start >= 0 else head).strip(), text[end + len("</think>"):]
    start = text.find("<think>")
    if start >= 0:
        return text[start + len("<think>"):].strip(), ""
    return "", text


def parse_qwen3(text: str, known: frozenset[str] | None = None, reasoning_content: str | None = None) -> Parsed:
    """Parse Qwen3-native text. Malformed blocks are skipped and noted; an unclosed trailing
    ``<tool_call>`` is dropped (noted) and not part of the response."""
    text = text or ""
    think, rest = split_think(text)
    if not think and reasoning_content:
        think = strip_think_tags(reasoning_content)
    out = Parsed(think=think, reasoning_content=reasoning_content or "")
    items: list[Any] = []
    for m in _BLOCK_RE.finditer(rest):
        body = m.group(1).strip()
        try:
            items.append(json.loads(body))
        except ValueError as exc:
            out.errors.append(f"malformed <tool_call> block skipped: {exc}")
    out.calls = accept_calls(items, known, out.errors, key="arguments")
    remainder = _BLOCK_RE.sub("", rest)
    cut = remainder.find("<tool_call>")
    if cut >= 0:
        out.errors.append(UNCLOSED_CALL_NOTE)
        remainder = remainder[:cut]
    out.response = remainder.strip()
    out.content = render_content(out.think, out.calls, out.response)
    return out


def parse_reply_native(reply: AssistantMessage, known: frozenset[str] | None = None) -> Parsed:
    """API ``tool_calls`` win when present (their ids are kept); otherwise the content is parsed as
    Qwen3 text. ``content`` of the result is the re-rendered tag text, so ``format_reward`` applies."""
    if not reply.tool_calls:
        return parse_qwen3(reply.content, known, reply.reasoning_content)
    think, rest = split_think(reply.content or "")
    if not think and reply.reasoning_content:
        think = strip_think_tags(reply.reasoning_content)
    out = Parsed(think=think, reasoning_content=reply.reasoning_content or "")
    items = [{"id": tc.id, "name": tc.name, "arguments": tc.arguments} for tc in reply.tool_calls]
    out.calls = accept_calls(items, known, out.errors, key="arguments", ids=True)
    out.response = _BLOCK_RE.sub("", rest).strip()
    out.content = render_content(out.think, out.calls, out.response)
    return out


def assistant_from_openai(message: dict[str, Any], usage: dict[str, Any] | None = None) -> AssistantMessage:
    """An OpenAI ``choices[0].message`` dict as an :class:`AssistantMessage`. String ``arguments`` are
    decoded; a call whose arguments are not a JSON object is dropped (it cannot be executed)."""
    calls: list[ToolCall] = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or tc  # nested OpenAI shape or our flat {id, name, arguments}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                continue
        if args is None:
            args = {}
        if not isinstance(args, dict) or not isinstance(fn.get("name"), str):
            continue
        calls.append(ToolCall(id=str(tc.get("id") or ""), name=fn["name"], arguments=args))
    return AssistantMessage(
        content=message.get("content") or "",
        reasoning_content=message.get("reasoning_content"),
        tool_calls=calls,
        usage=Usage(**{k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")})
        if usage else None,
    )


def coerce_reply(reply: Any) -> AssistantMessage:
    """Accept what policies commonly return: an :class:`AssistantMessage`, an OpenAI message dict, or a
    bare string (tag text or Qwen3 text)."""
    if isinstance(reply, AssistantMessage):
        return reply
    if isinstance(reply, str):
        return AssistantMessage(content=reply)
    if isinstance(reply, dict):
        return assistant_from_openai(reply, reply.get("usage"))
    raise TypeError(f"a policy must return an AssistantMessage, a message dict or a str, not {type(reply).__name__}")
