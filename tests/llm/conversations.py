"""Chat fixtures shared by the local-backend tests: one tool, a user turn with a system turn, and an assistant turn
that calls the tool (OpenAI message form)."""

from __future__ import annotations

from typing import Any

TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "find_product", "description": "Search the catalog",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
USER: list[dict[str, Any]] = [{"role": "system", "content": "You are a shopping assistant."},
                              {"role": "user", "content": "a red floral dress under 700"}]
CALL: dict[str, Any] = {"role": "assistant", "content": None, "reasoning_content": "search first",
                        "tool_calls": [{"id": "c1", "type": "function",
                                        "function": {"name": "find_product", "arguments": '{"q": "red dress"}'}}]}
