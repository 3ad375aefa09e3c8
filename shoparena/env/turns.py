"""What an assistant turn did, in one place: whether it made a tool call, whether it stated a recommendation decision,
and the *think-then-stop* shape that joins the two — a turn that states the decision in its reasoning or text
("Recommending 5365307451 …") and ends without making the call. Evaluation counts that shape in served episodes
(:func:`shoparena.evaluate.diagnostics.is_think_then_stop`), the corpus filter rejects traces that end on a callless
turn (:class:`shoparena.corpus.filter.gates.FormatGate`), and the row-trained stages keep such turns out of their
training targets (:mod:`shoparena.train.format`, ``callless_turns``; docs/training.md).

A message is the OpenAI form rows and the gateway's call log use: ``role``, ``content``, ``reasoning_content`` and a
``tool_calls`` list. A ``<tool_call>`` block written in ``content`` counts as a call too when the harness's native
parser would execute it (:func:`shoparena.env.protocol_native.parse_qwen3`: a complete block holding a JSON object
with a string ``name``): a row that teaches that text teaches the model to emit a call the served episode runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DECISION", "TERMINATE", "call_names", "callless", "content_calls", "has_call", "open_callless_turns",
           "states_decision", "think_then_stop", "turn_text"]

DECISION = re.compile(
    r"\brecommending\b"
    r"|\b(?:i|we)\s*(?:will|shall|would|am going to|are going to|'ll|’ll|'m going to|’m going to)\s+"
    r"(?:now\s+|then\s+|just\s+)?recommend\b"
    r"|\b(?:let me|let's|let’s|i now|i can now)\s+recommend\b"
    r"|\bi\s+recommend\b"
    r"|\bmy\s+(?:final\s+)?recommendation\b"
    r"|\brecommend_product\b",
    re.IGNORECASE,
)
"""A stated recommendation decision: "Recommending …", "I will / I'll / I'm going to / we will recommend",
"let me recommend", "I recommend", "my (final) recommendation", or the name of the tool ``recommend_product``
written as text."""

TERMINATE = "terminate"
"""The tool that ends an episode: the harness asks for no turn after it."""


def states_decision(text: str) -> bool:
    """Whether ``text`` states a recommendation decision (:data:`DECISION`)."""
    return bool(DECISION.search(text))


def turn_text(message: Mapping[str, Any]) -> str:
    """A turn's reasoning and text, one after the other (where a decision is stated)."""
    return "\n".join(str(message.get(k) or "") for k in ("reasoning_content", "content"))


def content_calls(message: Mapping[str, Any]) -> list[str]:
    """The names of the calls written as ``<tool_call>`` blocks in the message's ``content`` that the harness's
    native parser executes (module docstring); ``[]`` when there are none or the content is not text."""
    content = message.get("content")
    if not isinstance(content, str) or "<tool_call>" not in content:
        return []
    from shoparena.env.protocol_native import parse_qwen3

    return [c["name"] for c in parse_qwen3(content).calls]


def has_call(message: Mapping[str, Any], *, parse_content: bool = True) -> bool:
    """Whether the turn makes a tool call: a non-empty ``tool_calls``, or (``parse_content``) a call written in its
    ``content`` (:func:`content_calls`). ``parse_content=False`` reads ``tool_calls`` alone: the form of records
    whose content was already parsed into ``tool_calls`` (the gateway's call log, canonical corpus traces)."""
    if message.get("tool_calls"):
        return True
    return parse_content and bool(content_calls(message))


def callless(message: Mapping[str, Any], *, parse_content: bool = True) -> bool:
    """An assistant turn that makes no tool call (:func:`has_call`): a think or text turn."""
    return message.get("role", "assistant") == "assistant" and not has_call(message, parse_content=parse_content)


def think_then_stop(message: Mapping[str, Any], *, parse_content: bool = True) -> bool:
    """A think-then-stop turn: callless (:func:`callless`) while its reasoning or text states a recommendation
    decision (:func:`states_decision`). The decision is made in words and never made: the turn ends, no
    ``recommend_product`` is called."""
    return callless(message, parse_content=parse_content) and states_decision(turn_text(message))


def call_names(message: Mapping[str, Any]) -> list[str]:
    """The names of the tools the turn calls, in order: its ``tool_calls``, then the calls written in its content
    (:func:`content_calls`)."""
    names = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if isinstance(name, str):
            names.append(name)
    return names + content_calls(message)


def open_callless_turns(messages: Sequence[Any]) -> list[int]:
    """The assistant turns of a conversation that end a thought without its call: callless turns
    (:func:`callless`) while the episode is still open, by index among the assistant turns (0 = the first
    assistant turn). A callless turn after a turn that called ``terminate`` is not one of them: the episode is
    over there, no call is due, and the harness never asks for that turn (the corpus filter lets such a closing
    text turn through for the same reason). Items that are not assistant messages are skipped."""
    out: list[int] = []
    k = 0
    terminated = False
    for m in messages:
        if not isinstance(m, Mapping) or m.get("role") != "assistant":
            continue
        if callless(m):
            if not terminated:
                out.append(k)
        elif TERMINATE in call_names(m):
            terminated = True
        k += 1
    return out
