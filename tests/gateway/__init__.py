"""Shared helpers for the gateway and SDK tests: small real chat backends whose output the test controls.

``DirectiveBackend`` answers with whatever the last user message dictates (a JSON object
``{"reply": {content, reasoning_content, tool_calls, usage}}``, or ``{"reply": {"text": …}}``: a raw Qwen3
completion parsed as the local backends parse theirs), so a test decides exactly which tool calls a completion
emits. ``MiniReactBackend`` is a tiny deterministic shopping policy (search, view the first hit,
recommend it, terminate) that speaks native tool calls, Qwen3 text or the tag protocol, for end-to-end runs.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.clock import Clock
from shoparena.env.types import AssistantMessage, ToolCall, Usage
from shoparena.llm.gateway import Gateway, Limits
from shoparena.llm.hf_backend import completion_to_message
from shoparena.llm.types import Sampling

DIRECTIVE = "test:directive"
REACT = "test:react"
_IDS = re.compile(r'product_id\\?"\s*:\s*\\?"(\d+)')


def directive(content: str = "", tool_calls: list[dict[str, Any]] | None = None, reasoning: str | None = None,
              usage: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Messages telling :class:`DirectiveBackend` what to answer."""
    reply = {"content": content, "reasoning_content": reasoning, "tool_calls": tool_calls or [], "usage": usage}
    return [{"role": "user", "content": json.dumps({"reply": reply})}]


class DirectiveBackend:
    """A real ChatBackend: the reply is read from the last user message; records the sampling it saw."""

    name = DIRECTIVE

    def __init__(self) -> None:
        self.samplings: list[Sampling | None] = []

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        await asyncio.sleep(0)
        self.samplings.append(sampling)
        last = next(m for m in reversed(messages) if m.get("role") == "user")
        try:
            reply = json.loads(last["content"])["reply"]
        except (ValueError, KeyError, TypeError):
            return AssistantMessage(content="ok", usage=Usage(prompt_tokens=3, completion_tokens=1, total_tokens=4))
        if reply.get("content") == "RAISE":
            raise RuntimeError("backend exploded")
        if "text" in reply:  # a raw Qwen3 completion, through the local backends' parser
            return completion_to_message(reply["text"], 7, 5)
        return AssistantMessage(
            content=reply.get("content") or "", reasoning_content=reply.get("reasoning_content"),
            tool_calls=[ToolCall(**c) for c in reply.get("tool_calls") or []],
            usage=Usage(**reply["usage"]) if reply.get("usage") else None)


class MiniReactBackend:
    """Search the query, view the first hit, recommend it and terminate. ``style``: ``native`` (API tool calls),
    ``qwen3`` (Qwen3 text) or, when no tools are offered, the tag protocol."""

    name = REACT

    def __init__(self, style: str = "native") -> None:
        self.style = style

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        if tools:
            query = next(m["content"] for m in messages if m["role"] == "user")
            results = [m["content"] for m in messages if m["role"] == "tool"]
        else:  # tag protocol: everything is in the history text
            history = messages[-1]["content"]
            query = re.search(r"<user>(.*?)</user>", history, re.S).group(1)
            results = re.findall(r"<obs>(.*?)</obs>", history, re.S)
        calls = self._next(query, results)
        usage = Usage(prompt_tokens=50, completion_tokens=10, total_tokens=60)
        think = f"Step {len(results) + 1} for: {query[:40]}"
        if not tools:
            body = json.dumps([{"name": n, "parameters": a} for n, a in calls])
            return AssistantMessage(content=f"<think>{think}</think>\n<tool_call>{body}</tool_call>", usage=usage)
        if self.style == "qwen3":
            blocks = "".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>'
                             for n, a in calls)
            return AssistantMessage(content=f"<think>{think}</think>\n{blocks}", usage=usage)
        return AssistantMessage(content="", reasoning_content=think, usage=usage,
                                tool_calls=[ToolCall(name=n, arguments=a) for n, a in calls])

    @staticmethod
    def _next(query: str, results: list[str]) -> list[tuple[str, dict[str, Any]]]:
        words = " ".join(re.sub(r"[^\w ]", " ", query).split()[:4])
        if not results:
            return [("find_product", {"q": words, "page": 1})]
        first = _IDS.findall(results[0])
        if len(results) == 1 and first:
            return [("view_product_information", {"product_ids": first[0]})]
        pick = first[0] if first else "0"
        return [("recommend_product", {"product_ids": pick}), ("terminate", {"status": "success"})]


def make_service(products: list[Any], tmp_path: Any) -> SearchService:
    return SearchService(SearchIndex.build(products, tmp_path / "idx"))


def make_gateway(service: SearchService, *, limits: Limits | None = None, style: str = "native",
                 clock: Clock | None = None) -> Gateway:
    """A gateway over ``service`` with the two test backends (allowlist = their names); ``clock`` drives its
    rate limiter (a :class:`~shoparena.clock.ManualClock` lets a test step time instead of sleeping)."""
    backends = {DIRECTIVE: DirectiveBackend(), REACT: MiniReactBackend(style)}
    return Gateway(service, backends, limits=limits or Limits.unlimited(), clock=clock)
