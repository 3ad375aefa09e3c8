"""The tag text protocol (docs/shoppingbench.md §5.1): tool-call ids, output parsing, history rendering.

Every step sends two messages: the system prompt and ``"# Dialogue Records History\\n"`` + all prior
turns joined by blank lines. A turn is ``<user>…</user>`` or the assistant parts in fixed order
``<think>``, ``<tool_call>``, ``<obs>``, ``<response>``.

Two renderings exist in the wild. ``upstream`` (ShoppingBench ``Message.to_string``): one block per
assistant turn (parts joined by ``\\n``), ``ujson`` JSON (compact, ASCII, ``\\/``), ``tool_call`` entries carry
``tool_call_id``. ``oro`` (ORO ``agent.py``): one block per part, ``json.dumps`` defaults, no ids in
``tool_call`` entries.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import regex as re

from shoparena.env.types import AssistantMessage
from shoparena.types import Flavor

HISTORY_HEADER = "# Dialogue Records History\n"
OUTPUT_TAGS: tuple[str, ...] = ("think", "tool_call", "response")
_TAG_RE = {tag: re.compile(f"<{tag}>(.+?)</{tag}>", re.DOTALL) for tag in OUTPUT_TAGS}



def tool_call_id(name: str, parameters: Any, length: int = 8) -> str:
    """Upstream id: MD5 of ``name + "\\n" + str(parameters)`` (Python repr), url-safe base64 with
    ``=``, ``+``, ``/`` removed, first ``length`` characters (§5.1)."""
    digest = hashlib.md5(f"{name}\n{parameters}".encode(), usedforsecurity=False).digest()
    text = base64.urlsafe_b64encode(digest).decode()
    return text.replace("=", "").replace("+", "").replace("/", "")[:length]


def ujson_dumps(obj: Any) -> str:
    """JSON as upstream's ``ujson.dumps`` writes it: compact, ASCII-only, forward slashes escaped."""
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).replace("/", "\\/")


def oro_dumps(obj: Any) -> str:
    """JSON as ORO's ``json.dumps`` writes it (``", "`` / ``": "`` separators, ASCII-only)."""
    return json.dumps(obj)


@dataclass(slots=True)
class Parsed:
    """One parsed assistant reply, protocol-independent."""

    think: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """``{"name", "parameters", "tool_call_id"}`` for each call to a known tool, in order."""
    response: str = ""
    errors: list[str] = field(default_factory=list)
    content: str = ""
    """Tag text stored in the step record (raw for the tag protocol, re-rendered for native)."""
    reasoning_content: str = ""

    @property
    def empty(self) -> bool:
        """Upstream's "completely empty" test: no think, no tool call, no response."""
        return not self.think and not self.calls and not self.response


def make_call(name: str, parameters: dict[str, Any], call_id: str = "") -> dict[str, Any]:
    return {"name": name, "parameters": parameters, "tool_call_id": call_id or tool_call_id(name, parameters)}


def accept_calls(
    items: Iterable[Any],
    known: frozenset[str] | None,
    errors: list[str],
    *,
    key: str = "parameters",
    ids: bool = False,
) -> list[dict[str, Any]]:
    """Turn decoded ``{"name", "parameters"}`` items (``key="arguments"`` for native calls; the other
    spelling is accepted as an alias) into calls. Non-dict items, missing names and non-object parameters
    are skipped; unknown tool names are skipped (§5.1); every skip is noted in ``errors``. With ``ids``,
    an item's own ``id`` is kept; otherwise the upstream MD5 id is derived."""
    calls: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            errors.append(f"tool call without a string name skipped: {str(item)[:200]}")
            continue
        name = item["name"]
        params = item.get(key, item.get("arguments" if key == "parameters" else "parameters", {}))
        if isinstance(params, str):
            try:
                params = json.loads(params) if params.strip() else {}
            except ValueError:
                pass
        if params is None:
            params = {}
        if not isinstance(params, dict):
            errors.append(f"tool call {name!r} skipped: parameters are not a JSON object")
            continue
        if known is not None and name not in known:
            errors.append(f"unknown tool {name!r} skipped")
            continue
        calls.append(make_call(name, params, str(item.get("id") or "") if ids else ""))
    return calls


def strip_think_tags(text: str) -> str:
    return text.replace("<think>", "").replace("</think>", "").strip()


def parse_tags(content: str, reasoning_content: str | None = None, known: frozenset[str] | None = None) -> Parsed:
    """Parse a tag-protocol reply like upstream ``Message.from_string``: the first ``<tag>(.+?)</tag>``
    of each output tag, stripped. No ``<think>`` ⇒ the API ``reasoning_content`` is the think. A single
    object in ``<tool_call>`` is wrapped in a list. Malformed JSON ⇒ no calls (noted in ``errors``)."""
    content = content or ""
    out = Parsed(content=content, reasoning_content=reasoning_content or "")
    m = _TAG_RE["think"].search(content)
    if m:
        out.think = m.group(1).strip()
    elif reasoning_content:
        out.think = strip_think_tags(reasoning_content)
    m = _TAG_RE["tool_call"].search(content)
    if m:
        try:
            decoded = json.loads(m.group(1))
        except ValueError as exc:
            out.errors.append(f"malformed <tool_call> JSON: {exc}")
        else:
            items = [decoded] if isinstance(decoded, dict) else decoded if isinstance(decoded, list) else None
            if items is None:
                out.errors.append("<tool_call> is neither a JSON array nor an object")
            else:
                out.calls = accept_calls(items, known, out.errors)
    m = _TAG_RE["response"].search(content)
    if m:
        out.response = m.group(1).strip()
    return out


def parse_reply_tags(reply: AssistantMessage, known: frozenset[str] | None = None) -> Parsed:
    """Tag-protocol parse of a policy reply; API-side ``tool_calls`` are ignored (upstream never sends
    tools), which is noted when present."""
    parsed = parse_tags(reply.content, reply.reasoning_content, known)
    if reply.tool_calls:
        parsed.errors.append(f"{len(reply.tool_calls)} API tool_calls ignored by the tag protocol")
    return parsed


def render_content(think: str, calls: list[dict[str, Any]], response: str) -> str:
    """Tag text re-rendered from parsed parts, as ORO ``format_content`` does:
    ``<think>..</think>\\n<tool_call>[{"name", "parameters"}]</tool_call>\\n<response>..</response>``,
    empty parts left out. ``format_reward`` accepts it whenever the parts are non-empty."""
    parts = []
    if think:
        parts.append(f"<think>{think}</think>")
    if calls:
        body = json.dumps([{"name": c["name"], "parameters": c["parameters"]} for c in calls])
        parts.append(f"<tool_call>{body}</tool_call>")
    if response:
        parts.append(f"<response>{response}</response>")
    return "\n".join(parts)


class TagHistory:
    """The growing ``# Dialogue Records History`` of one episode (appended per step, never re-rendered)."""

    __slots__ = ("_blocks", "_dumps", "flavor")

    def __init__(self, query: str, flavor: Flavor = "upstream") -> None:
        self.flavor = flavor
        self._dumps = ujson_dumps if flavor == "upstream" else oro_dumps
        self._blocks: list[str] = [f"<user>{query}</user>"] if query else []

    def add_turn(self, think: str, calls: list[dict[str, Any]], obs: list[dict[str, Any]], response: str) -> None:
        """Append one assistant turn: ``think``, ``tool_call`` (name, parameters[, tool_call_id]),
        ``obs`` (``{tool_call_id, results}``, raw and untruncated), ``response``; empty parts left out."""
        parts: list[str] = []
        if think:
            parts.append(f"<think>{think}</think>")
        if calls:
            entries = calls if self.flavor == "upstream" else [
                {"name": c["name"], "parameters": c["parameters"]} for c in calls
            ]
            parts.append(f"<tool_call>{self._dumps(entries)}</tool_call>")
        if obs:
            parts.append(f"<obs>{self._dumps(obs)}</obs>")
        if response:
            parts.append(f"<response>{response}</response>")
        if not parts:
            return
        if self.flavor == "upstream":
            self._blocks.append("\n".join(parts))
        else:
            self._blocks.extend(parts)

    def render(self) -> str:
        return HISTORY_HEADER + "\n\n".join(self._blocks)

    def messages(self, system_prompt: str) -> list[dict[str, Any]]:
        """The two messages every tag-protocol step sends."""
        return [{"role": "system", "content": system_prompt}, {"role": "user", "content": self.render()}]
