"""Chat fixtures shared by the local-backend tests: one tool, a user turn with a system turn, an assistant turn that
calls the tool, and conversations built from them (OpenAI message form)."""

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
CONVERSATIONS: list[list[dict[str, Any]]] = [
    USER,
    [{"role": "user", "content": "hi"}],
    [*USER, CALL, {"role": "tool", "tool_call_id": "c1", "content": '[{"product_id": "1", "price": 650}]'}],
    [*USER, CALL, {"role": "tool", "tool_call_id": "c1", "content": "[]"}],
    [{"role": "user", "content": "violin bow, full size"}],
    [{"role": "user", "content": "wireless earbuds from an official store"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "rice cooker"}],
]
