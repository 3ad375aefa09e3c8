"""The OpenAI chat-completions wire format, in one place: requests ↔ :class:`Sampling`, messages ↔
:class:`AssistantMessage`, responses and stream chunks.

Used by the ``openai:`` backend (client side), the ``serve`` app and the gateway's
``/inference/chat/completions`` (server side). On the wire, tool-call ``arguments`` are JSON *strings*; inside the
project they are decoded dicts. Reasoning travels as ``message.reasoning_content`` (vLLM / SGLang / DeepSeek; newer
vLLM also writes ``reasoning``, which is read too).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shoparena.env.protocol_tags import tool_call_id
from shoparena.env.types import AssistantMessage, ToolCall, Usage
from shoparena.errors import BackendError
from shoparena.llm.types import Sampling

__all__ = [
    "BackendError", "ChatRequest", "MessageError", "assistant_from_wire", "finish_reason", "request_to_sampling",
    "sampling_to_request", "text_messages", "to_openai_chunks", "to_openai_message", "to_openai_response",
    "validation_message",
]

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class MessageError(ValueError):
    """A request message this project cannot use; ``param`` names it (``messages[2].content[0]``)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def text_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each ``content`` given as a list of parts (OpenAI's ``[{"type": "text", "text": …}]``)
    joined into one string (parts separated by a newline, as vLLM does). Raises :class:`MessageError` for a
    missing or unknown ``role``, a ``content`` that is neither a string, a list of parts nor null, and a part that
    is not text (named by its type: images and audio cannot reach a text-only backend)."""
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise MessageError(f"messages[{i}].role must be one of {', '.join(ROLES)} (got {str(role)[:40]!r})",
                               f"messages[{i}].role")
        content = message.get("content")
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                if kind != "text" or not isinstance(part.get("text"), str):
                    what = f"a {str(kind)[:40]!r} part" if kind != "text" else "a text part without a string 'text'"
                    raise MessageError(f"messages[{i}].content[{j}] is {what}; only text parts are supported",
                                       f"messages[{i}].content[{j}]")
                texts.append(part["text"])
            message = {**message, "content": "\n".join(texts)}
        elif content is not None and not isinstance(content, str):
            raise MessageError(f"messages[{i}].content must be a string, a list of text parts or null",
                               f"messages[{i}].content")
        out.append(message)
    return out


class ChatRequest(BaseModel):
    """The fields of an OpenAI ``POST /chat/completions`` body this project acts on.

    Unknown fields are ignored rather than refused (``extra="ignore"``): OpenAI clients send many optional fields
    (``n``, ``logprobs``, ``tool_choice``, ``presence_penalty`` …) that a local backend has no use for."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str = ""
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int = Field(default=1, ge=1, le=1)
    chat_template_kwargs: dict[str, Any] | None = None
    enable_thinking: bool | None = None
    """Some clients put the switch at the top level (upstream ShoppingBench's ``extra_body``)."""


def request_to_sampling(body: Mapping[str, Any] | ChatRequest, *, max_tokens_cap: int | None = None) -> Sampling:
    """The :class:`Sampling` an OpenAI request body asks for. Omitted fields take :class:`Sampling`'s defaults
    (temperature 0: greedy, unlike OpenAI's 1.0); ``max_tokens_cap`` clamps (or supplies) ``max_tokens``.
    Raises ``pydantic.ValidationError`` (a ``ValueError``) on a malformed body."""
    req = body if isinstance(body, ChatRequest) else ChatRequest.model_validate(body)
    stop = [req.stop] if isinstance(req.stop, str) else req.stop
    thinking = (req.chat_template_kwargs or {}).get("enable_thinking", req.enable_thinking)
    max_tokens = req.max_tokens or req.max_completion_tokens
    if max_tokens_cap is not None:
        max_tokens = min(max_tokens or max_tokens_cap, max_tokens_cap)
    fields: dict[str, Any] = {
        "temperature": req.temperature, "top_p": req.top_p, "max_tokens": max_tokens,
        "seed": req.seed, "stop": stop or None, "enable_thinking": None if thinking is None else bool(thinking),
    }
    return Sampling(**{k: v for k, v in fields.items() if v is not None})


def sampling_to_request(sampling: Sampling) -> dict[str, Any]:
    """The request-body fields for ``sampling`` (``enable_thinking`` as vLLM/SGLang's ``chat_template_kwargs``;
    with ``client.chat.completions.create`` that key would travel in ``extra_body``)."""
    out: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.max_tokens is not None:
        out["max_tokens"] = sampling.max_tokens
    if sampling.seed is not None:
        out["seed"] = sampling.seed
    if sampling.stop:
        out["stop"] = list(sampling.stop)
    if sampling.enable_thinking is not None:
        out["chat_template_kwargs"] = {"enable_thinking": sampling.enable_thinking}
    return out


def assistant_from_wire(message: Mapping[str, Any], usage: Mapping[str, Any] | None = None,
                        finish: Any = None) -> tuple[AssistantMessage, list[str]]:
    """An OpenAI ``choices[0].message`` (+ ``usage``) as an :class:`AssistantMessage`, and notes on what was
    dropped: a tool call whose ``arguments`` are not a JSON object cannot be executed, so it is left out.
    ``finish``: the choice's ``finish_reason``; ``"length"`` (the server cut the completion at its token limit)
    marks the message ``truncated``, any other string marks it not cut, and a missing one leaves it unknown."""
    notes: list[str] = []
    calls: list[ToolCall] = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        name, args = fn.get("name"), fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError as exc:
                notes.append(f"tool call {name!r} dropped: arguments are not valid JSON ({exc}): {args[:200]!r}")
                continue
        args = {} if args is None else args
        if not isinstance(name, str) or not isinstance(args, dict):
            notes.append(f"tool call {name!r} dropped: no name or arguments not a JSON object")
            continue
        calls.append(ToolCall(id=str(tc.get("id") or ""), name=name, arguments=args))
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    counts = None
    if usage:
        counts = Usage(**{k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")})
    truncated = finish == "length" if isinstance(finish, str) else None
    return AssistantMessage(content=message.get("content") or "", reasoning_content=reasoning or None,
                            tool_calls=calls, usage=counts, truncated=truncated), notes


def finish_reason(message: AssistantMessage, max_tokens: int | None = None) -> str:
    """``tool_calls`` when the message asks for tools (as vLLM answers, also when generation then ran into the
    limit); ``length`` when the backend marked it cut at its token cap (``message.truncated``); ``stop`` when the
    backend says it ended by itself. A backend that does not say (``truncated`` None) gets a guess: ``length`` when
    its completion tokens reached ``max_tokens``, else ``stop``."""
    if message.tool_calls:
        return "tool_calls"
    if message.truncated is not None:
        return "length" if message.truncated else "stop"
    used = message.usage.completion_tokens if message.usage is not None else None
    if max_tokens is not None and used is not None and used >= max_tokens:
        return "length"
    return "stop"


def to_openai_message(message: AssistantMessage) -> dict[str, Any]:
    """``choices[0].message``: ``content`` is null when empty, ``arguments`` are JSON strings, a call without an
    id gets the upstream MD5 id (§5.1), so the same answer always has the same ids."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.reasoning_content is not None:
        out["reasoning_content"] = message.reasoning_content
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": tc.id or tool_call_id(tc.name, tc.arguments), "type": "function",
             "function": {"name": tc.name, "arguments": json.dumps(tc.arguments, ensure_ascii=False)}}
            for tc in message.tool_calls
        ]
    return out


def _usage(message: AssistantMessage) -> dict[str, int]:
    u = message.usage or Usage()
    prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": u.total_tokens if u.total_tokens is not None else prompt + completion}


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def to_openai_response(message: AssistantMessage, model: str, *, id: str | None = None, created: int | None = None,
                       max_tokens: int | None = None) -> dict[str, Any]:
    """A complete ``chat.completion`` object for one assistant message (``max_tokens``: the request's limit, for
    the ``length`` finish reason)."""
    return {
        "id": id or _new_id("chatcmpl-"), "object": "chat.completion", "created": created or int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": to_openai_message(message), "logprobs": None,
                     "finish_reason": finish_reason(message, max_tokens)}],
        "usage": _usage(message),
    }


def to_openai_chunks(message: AssistantMessage, model: str, *, id: str | None = None, created: int | None = None,
                     include_usage: bool = False, max_tokens: int | None = None) -> list[dict[str, Any]]:
    """The same answer as ``chat.completion.chunk`` objects: one delta with everything, one with the finish
    reason, and a usage chunk when asked (``stream_options.include_usage``)."""
    head = {"id": id or _new_id("chatcmpl-"), "object": "chat.completion.chunk",
            "created": created or int(time.time()), "model": model}
    delta = to_openai_message(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(delta["tool_calls"])]
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason(message, max_tokens)}]},
    ]
    if include_usage:
        chunks.append({**head, "choices": [], "usage": _usage(message)})
    return chunks


def validation_message(exc: ValidationError) -> str:
    """A one-line account of what is wrong with a request body."""
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors()[:5]]
    return "invalid request: " + "; ".join(parts)
