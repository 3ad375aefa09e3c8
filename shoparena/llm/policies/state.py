"""Reading the conversation a policy receives, in both harness protocols (docs/shoppingbench.md §5).

- **tags**: ``[system, user]`` where the user message is ``# Dialogue Records History`` + ``<user>query</user>``
  + per turn ``<think>``, ``<tool_call>[…]</tool_call>`` and ``<obs>[{tool_call_id, results}]</obs>`` blocks
  (one block per turn upstream, one per part ORO); the tools are listed in the system prompt as text.
- **native**: OpenAI messages ``system, user(query), (assistant with tool_calls, tool…)*`` plus ``tools``.

:func:`read_conversation` is the cheap per-step reader: the query, the offered tools, the **last** turn
(parsed), and two fingerprints — of the whole conversation and of the conversation without its last turn —
which let the backend continue a cached episode instead of re-reading every observation.
:func:`all_turns` parses every turn (used when nothing is cached).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
import regex as re

from shoparena.env.tools import PROFILES

__all__ = ["Conversation", "Turn", "all_turns", "read_conversation"]

HISTORY_HEADER = "# Dialogue Records History"
_TAG = re.compile(r"<(think|tool_call|obs|response)>(.*?)</\1>", re.S)
_TOOL_NAME = re.compile(r"(?m)^\d+\.\s*Name:\s*(\S+)")
UPSTREAM4 = frozenset(PROFILES["upstream4"])


@dataclass(slots=True)
class Turn:
    """One assistant turn as recorded: its calls ``(name, parameters)`` and their observations (same order;
    None where no observation was recorded)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class Conversation:
    """What one request holds, read cheaply."""

    protocol: str
    query: str
    tools: frozenset[str]
    think: bool
    n_turns: int
    last: Turn | None
    key: int
    """Fingerprint of the whole conversation (with the sampling key added by the backend)."""
    prefix_key: int
    """Fingerprint of the conversation without its last turn (equals the previous request's ``key``)."""
    messages: list[dict[str, Any]]


@lru_cache(maxsize=256)
def _tags_tools(system: str) -> tuple[frozenset[str], bool]:
    names = frozenset(_TOOL_NAME.findall(system)) or UPSTREAM4
    react = "must only include `<tool_call>" in system
    return names, not react


def _spec_names(tools: list[dict[str, Any]] | None) -> frozenset[str]:
    names = set()
    for t in tools or []:
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names) or UPSTREAM4


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)  # orjson refuses a few things json accepts (NaN, lone surrogates)
        except ValueError:
            return text


def _is_tags(messages: list[dict[str, Any]]) -> bool:
    for m in messages:
        if m.get("role") == "user":
            return str(m.get("content") or "").startswith(HISTORY_HEADER)
    return False


def _system(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")


# ── tags ──────────────────────────────────────────────────────────────────────────────────────────────


def _tags_turns(text: str) -> list[Turn]:
    turns: list[Turn] = []
    cur: Turn | None = None
    has_obs = False
    for m in _TAG.finditer(text):
        tag, body = m.group(1), m.group(2)
        if tag == "think" or cur is None or (tag == "tool_call" and (cur.calls or has_obs)):
            cur, has_obs = Turn(), False
            turns.append(cur)
        if tag == "tool_call":
            items = _loads(body)
            items = [items] if isinstance(items, dict) else items if isinstance(items, list) else []
            for it in items:
                if isinstance(it, dict) and isinstance(it.get("name"), str):
                    params = it.get("parameters", it.get("arguments")) or {}
                    cur.calls.append((it["name"], params if isinstance(params, dict) else {}))
            cur.results = [None] * len(cur.calls)
        elif tag == "obs":
            has_obs = True
            obs = _loads(body)
            for i, o in enumerate(obs if isinstance(obs, list) else []):
                if i < len(cur.results):
                    cur.results[i] = o.get("results") if isinstance(o, dict) else o
    return turns


def _read_tags(messages: list[dict[str, Any]]) -> Conversation:
    system = _system(messages)
    text = next(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    tools, think = _tags_tools(system)
    a, b = text.find("<user>"), text.find("</user>")
    query = text[a + 6:b] if a >= 0 and b > a else ""
    body_start = b + 7 if b > 0 else len(HISTORY_HEADER)
    marker = "\n\n<think>" if think else "\n\n<tool_call>"
    cut = text.rfind(marker, body_start)
    n_turns = text.count(marker, body_start)
    last = _tags_turns(text[cut:])[-1] if cut >= 0 else None
    prefix = text[:cut] if cut >= 0 else text
    return Conversation("tags", query, tools, think, n_turns, last, hash((system, text)), hash((system, prefix)),
                        messages)


# ── native ────────────────────────────────────────────────────────────────────────────────────────────


def _msg_key(m: dict[str, Any]) -> tuple[Any, ...]:
    calls = m.get("tool_calls")
    ck: tuple[Any, ...] = ()
    if calls:
        ck = tuple((c.get("id"), str((c.get("function") or c).get("name")), str((c.get("function") or c).get("arguments")))
                   for c in calls if isinstance(c, dict))
    return (m.get("role"), m.get("content"), m.get("reasoning_content"), m.get("tool_call_id"), ck)


def _native_turn(messages: list[dict[str, Any]], start: int) -> Turn:
    asst = messages[start]
    turn = Turn()
    ids: list[str] = []
    for c in asst.get("tool_calls") or []:
        fn = c.get("function") or c
        args = _loads(fn.get("arguments"))
        turn.calls.append((str(fn.get("name")), args if isinstance(args, dict) else {}))
        ids.append(str(c.get("id") or ""))
    turn.results = [None] * len(turn.calls)
    k = 0
    for m in messages[start + 1:]:
        if m.get("role") != "tool":
            break
        tid = m.get("tool_call_id")
        idx = ids.index(tid) if tid in ids else k
        if idx < len(turn.results):
            turn.results[idx] = _loads(m.get("content"))
        k += 1
    return turn


def _read_native(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Conversation:
    query = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    starts = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    last = _native_turn(messages, starts[-1]) if starts else None
    keys = tuple(_msg_key(m) for m in messages)
    names = _spec_names(tools)
    tk = tuple(sorted(names))
    prefix = keys[:starts[-1]] if starts else keys
    return Conversation("native", query, names, True, len(starts), last, hash((tk, keys)), hash((tk, prefix)),
                        messages)


def read_conversation(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Conversation:
    """The cheap reader (module docstring). The protocol is told by the user message: a tag history starts
    with ``# Dialogue Records History``."""
    return _read_tags(messages) if _is_tags(messages) else _read_native(messages, tools)


def all_turns(conv: Conversation) -> list[Turn]:
    """Every recorded turn, in order."""
    messages = conv.messages
    if conv.protocol == "tags":
        text = next(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        b = text.find("</user>")
        return _tags_turns(text[b + 7:] if b >= 0 else text)
    return [_native_turn(messages, i) for i, m in enumerate(messages) if m.get("role") == "assistant"]
