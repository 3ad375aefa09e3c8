"""The tool calls a completion emitted: native ``tool_calls``, upstream tag-protocol text or Qwen3 text.

What axis-A search calls are matched against (:mod:`shoparena.llm.gateway.attribution`). Text is parsed the way
the episode runner reads it: every complete ``<tool_call>`` block after the think section (the whole text when
that has none), each holding a JSON object or array of ``{"name", "parameters" | "arguments"}`` — upstream's tag
protocol writes one array, Qwen3 one object per block. Reasoning text is never parsed.
"""

from __future__ import annotations

import json
from typing import Any

from shoparena.env.protocol_native import split_think
from shoparena.env.protocol_tags import accept_calls, tool_call_id
from shoparena.env.types import AssistantMessage

__all__ = ["emitted_calls"]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _calls_from_text(content: str) -> list[dict[str, Any]]:
    _, rest = split_think(content)
    if _OPEN not in rest:
        rest = content
    items: list[Any] = []
    start = rest.find(_OPEN)
    while start >= 0:
        end = rest.find(_CLOSE, start)
        if end < 0:
            break
        try:
            decoded = json.loads(rest[start + len(_OPEN):end])
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            items.append(decoded)
        elif isinstance(decoded, list):
            items.extend(decoded)
        start = rest.find(_OPEN, end)
    return accept_calls(items, None, [])


def emitted_calls(message: AssistantMessage) -> list[dict[str, Any]]:
    """``{"name", "arguments", "id"}`` for each tool call a completion emitted: the native ``tool_calls`` when
    present, else those written in the content. Ids are the API's, else the upstream MD5 id (§5.1)."""
    if message.tool_calls:
        return [{"name": tc.name, "arguments": tc.arguments, "id": tc.id or tool_call_id(tc.name, tc.arguments)}
                for tc in message.tool_calls]
    if _OPEN not in (message.content or ""):
        return []
    return [{"name": c["name"], "arguments": c["parameters"], "id": c["tool_call_id"]}
            for c in _calls_from_text(message.content)]
