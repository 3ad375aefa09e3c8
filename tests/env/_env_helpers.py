"""Helpers for the env tests: scripted policies (small real classes), a deterministic clock, reply text."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from shoparena.env.types import AssistantMessage


class ScriptedPolicy:
    """Replies with a fixed list of assistant messages (str, dict or AssistantMessage, or an exception to
    raise), then with empty replies. Records every request it saw."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def _next(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.requests.append((messages, tools))
        reply = self.replies.pop(0) if self.replies else AssistantMessage()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return self._next(messages, tools)


class AsyncScriptedPolicy(ScriptedPolicy):
    """The same, with ``async def respond`` that yields to the event loop before answering."""

    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return self._next(messages, tools)


class FakeClock:
    """Deterministic clock: every call advances by ``tick`` seconds."""

    def __init__(self, start: float = 1_767_225_600.0, tick: float = 0.001) -> None:
        self.t = start
        self.tick = tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def tags(think: str = "", calls: list[dict[str, Any]] | None = None, response: str = "") -> str:
    """A tag-protocol reply text."""
    parts = []
    if think:
        parts.append(f"<think>{think}</think>")
    if calls is not None:
        parts.append(f"<tool_call>{json.dumps(calls)}</tool_call>")
    if response:
        parts.append(f"<response>{response}</response>")
    return "\n".join(parts)
