"""ORO SFT rows (docs/training.md §2.1–§2.3, docs/shoppingbench.md §4.3, §5.2) ↔ rows: :func:`iter_oro_sft`,
:func:`from_oro_sft`, :func:`to_oro_sft`.

An ORO row is ``{"messages", "tools", …}`` with flat tools (``{type, name, description, parameters}``). Assistant
turns are Qwen3-native text — ``<think>…</think>`` then ``<tool_call>\\n{"name", "arguments"}\\n</tool_call>``
blocks — or already structured (``content`` / ``reasoning_content`` / ``tool_calls``). Tool results come as
``role: "tool"`` messages or as user messages made of ``<tool_response>…</tool_response>`` blocks; both become
``role: "tool"`` messages (a wrapped user message would count as a real user query to the Qwen3 template and
strip every earlier turn's reasoning, docs/training.md §2.3).

Tool calls parsed from text get ids ``call_<upstream id>`` (unique within the row); a following ``role: "tool"``
message that carries its own ``tool_call_id`` lends it to the call instead. Results pair with the calls of the
assistant turn before them, in order; results after a turn without calls (or before any) are kept with an empty
``tool_call_id`` (Python-issued observations: :func:`text_axis` reads them as axis B).

Lossless: :func:`to_oro_sft` renders canonical messages back in the row's own forms (tool-result form, whether
tool messages carry ids, grouping of wrapped results, the row's other keys and its exact tool list); any original
message that rendering would not reproduce byte for byte is kept in ``extras["oro"]["overrides"]`` with the
fingerprint of the canonical messages it became, and used only while those messages are unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson
import regex as re

from shoparena.corpus.normalize._common import call_names, fingerprint, infer_tools, json_lines, reject
from shoparena.corpus.normalize.axis import text_axis
from shoparena.corpus.types import Rejection, Trajectory, trajectory_id
from shoparena.env.protocol_native import parse_qwen3, split_think
from shoparena.env.protocol_tags import tool_call_id
from shoparena.env.records import dumps
from shoparena.env.tools import normalize_tool_specs

__all__ = ["from_oro_sft", "iter_oro_sft", "qwen3_text", "to_oro_sft"]

_RESPONSE_RE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_OPEN = "<tool_response>"


class _Bad(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _strip_nl(text: str) -> str:
    """One wrapping newline off each side (what the Qwen3 template puts around a tool response)."""
    if text.startswith("\n"):
        text = text[1:]
    return text[:-1] if text.endswith("\n") else text


def _wrapped_results(content: str, i: int) -> list[str] | None:
    """The tool results of a user message made of ``<tool_response>`` blocks; None for a real user message."""
    if not content.lstrip().startswith(_OPEN):
        return None
    blocks = _RESPONSE_RE.findall(content)
    if _RESPONSE_RE.sub("", content).strip():
        raise _Bad("bad_tool_response", f"message {i} (user): text outside <tool_response> blocks, or an unclosed "
                                        "block")
    return [_strip_nl(b) for b in blocks]


def qwen3_text(message: dict[str, Any]) -> str:
    """A canonical assistant message as Qwen3-native text, as the Qwen3 chat template renders it:
    ``<think>\\n…\\n</think>\\n\\n`` (when there is reasoning), the content, then one
    ``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>`` block per call (newline-separated)."""
    think = message.get("reasoning_content") or ""
    content = message.get("content") or ""
    out = f"<think>\n{think}\n</think>\n\n{content}" if think else content
    for k, tc in enumerate(message.get("tool_calls") or ()):
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = dumps(args if args is not None else {})
        if content or k:
            out += "\n"
        out += '<tool_call>\n{"name": ' + dumps(fn.get("name")) + ', "arguments": ' + args + "}\n</tool_call>"
    return out


class _Row:
    """One pass over a row's messages: canonical messages, groups (canonical messages per original message)."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.groups: list[int] = []
        self.pending: list[dict[str, Any]] = []
        self.generated: set[str] = set()
        self.had_calls = False
        self.ids: set[str] = set()
        self.tool_form: str | None = None
        self.tool_ids: bool | None = None

    def _new_id(self, name: str, params: dict[str, Any]) -> str:
        base = f"call_{tool_call_id(name, params)}"
        cid, n = base, 1
        while cid in self.ids:
            cid, n = f"{base}_{n}", n + 1
        self.ids.add(cid)
        self.generated.add(cid)
        return cid

    def assistant(self, m: dict[str, Any], i: int) -> None:
        content = m.get("content")
        content = "" if content is None else content
        if not isinstance(content, str):
            raise _Bad("bad_message", f"message {i} (assistant): content is {type(content).__name__}, not a string")
        rc = m.get("reasoning_content")
        rc = rc if isinstance(rc, str) else ""
        calls: list[tuple[str, str, str | None]] = []  # (name, arguments JSON, id)
        tcs = m.get("tool_calls")
        if tcs:
            if not isinstance(tcs, list):
                raise _Bad("bad_tool_call", f"message {i} (assistant): tool_calls is not a list")
            for k, tc in enumerate(tcs):
                fn = (tc.get("function") or tc) if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise _Bad("bad_tool_call", f"message {i} tool call {k}: no function name")
                args = fn.get("arguments")
                params: Any = args
                if isinstance(args, str):
                    try:
                        params = orjson.loads(args) if args.strip() else {}
                    except orjson.JSONDecodeError as exc:
                        raise _Bad("bad_tool_call", f"message {i} tool call {k}: arguments are not JSON: {exc}") \
                            from None
                elif args is None:
                    params = {}
                if not isinstance(params, dict):
                    raise _Bad("bad_tool_call", f"message {i} tool call {k}: arguments are not a JSON object")
                text = args if isinstance(args, str) and args.strip() else dumps(params)
                cid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
                calls.append((fn["name"], text, cid) if cid else (fn["name"], text, self._new_id(fn["name"], params)))
                if cid:
                    self.ids.add(cid)
            if "<think>" in content or "</think>" in content:
                think, rest = split_think(content)
                response = rest.strip()
            else:
                think, response = "", content
            think = rc or think
        else:
            parsed = parse_qwen3(content, reasoning_content=rc or None)
            if parsed.errors:
                raise _Bad("bad_tool_call", f"message {i} (assistant): {parsed.errors[0]}")
            think, response = parsed.think, parsed.response
            calls = [(c["name"], dumps(c["parameters"]), self._new_id(c["name"], c["parameters"]))
                     for c in parsed.calls]
        msg: dict[str, Any] = {"role": "assistant", "content": response}
        if think:
            msg["reasoning_content"] = think
        if calls:
            msg["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": text}}
                                 for name, text, cid in calls]
        self.pending = list(msg.get("tool_calls") or ())
        self.had_calls = bool(calls)
        self.out.append(msg)
        self.groups.append(1)

    def _pair(self, tid: str | None, i: int) -> str:
        if tid is not None:
            hit = next((c for c in self.pending if c["id"] == tid), None)
            if hit is not None:
                self.pending.remove(hit)
                return tid
            if self.pending and self.pending[0]["id"] in self.generated:
                self.pending.pop(0)["id"] = tid  # a text call takes the id its result names
                return tid
            if self.had_calls:
                raise _Bad("unpaired_tool_call_id", f"message {i} (tool): tool_call_id {tid!r} names no call of "
                                                    "the preceding assistant turn")
            return tid
        if self.pending:
            return str(self.pending.pop(0)["id"])
        if self.had_calls:
            raise _Bad("extra_tool_result", f"message {i}: more tool results than the preceding assistant turn "
                                            "made calls")
        return ""

    def tool(self, m: dict[str, Any], i: int) -> None:
        content = m.get("content")
        if not isinstance(content, str):
            content = dumps(content)
        tid = m.get("tool_call_id")
        if tid is not None and not isinstance(tid, str):
            raise _Bad("bad_message", f"message {i} (tool): tool_call_id is not a string")
        if self.tool_form is None:
            self.tool_form, self.tool_ids = "tool", tid is not None
        self.out.append({"role": "tool", "tool_call_id": self._pair(tid, i), "content": content})
        self.groups.append(1)

    def user(self, m: dict[str, Any], i: int) -> None:
        content = m.get("content")
        content = "" if content is None else content
        if not isinstance(content, str):
            raise _Bad("bad_message", f"message {i} (user): content is {type(content).__name__}, not a string")
        results = _wrapped_results(content, i)
        if results is None:
            self.pending, self.had_calls = [], False
            self.out.append({"role": "user", "content": content})
            self.groups.append(1)
            return
        if self.tool_form is None:
            self.tool_form = "user"
        for text in results:
            self.out.append({"role": "tool", "tool_call_id": self._pair(None, i), "content": text})
        self.groups.append(len(results))


# ── rendering back ────────────────────────────────────────────────────────────────────────────────────


def _default_groups(messages: list[dict[str, Any]], tool_form: str) -> list[int]:
    groups: list[int] = []
    prev_tool = False
    for m in messages:
        is_tool = m.get("role") == "tool"
        if is_tool and prev_tool and tool_form == "user":
            groups[-1] += 1
        else:
            groups.append(1)
        prev_tool = is_tool
    return groups


def _render(chunk: list[dict[str, Any]], tool_form: str, tool_ids: bool) -> dict[str, Any]:
    first = chunk[0]
    role = first.get("role")
    if role == "tool":
        if tool_form == "user" or len(chunk) > 1:
            return {"role": "user", "content": "\n".join(f"{_OPEN}\n{m.get('content', '')}\n</tool_response>"
                                                         for m in chunk)}
        out = {"role": "tool", "content": first.get("content", "")}
        if tool_ids:
            out["tool_call_id"] = first.get("tool_call_id", "")
        return out
    if role == "assistant":
        return {"role": "assistant", "content": qwen3_text(first)}
    return {"role": role, "content": first.get("content", "")}


def _flat(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", **(t.get("function") or {})} for t in tools]


def to_oro_sft(t: Trajectory) -> dict[str, Any]:
    """The row as an ORO SFT row: Qwen3-native assistant text, flat tools, tool results in the source row's form
    (``role: "tool"`` with ``tool_call_id`` by default). A row imported by :func:`iter_oro_sft` comes back equal
    to its source line while its messages and tools are unchanged."""
    oro = t.extras.get("oro") or {}
    tool_form = oro.get("tool_form", "tool")
    tool_ids = oro.get("tool_ids", True)
    groups = oro.get("groups")
    if groups is None or sum(groups) != len(t.messages):
        groups = _default_groups(t.messages, tool_form)
    overrides = oro.get("overrides") or {}
    messages: list[dict[str, Any]] = []
    pos = 0
    for gi, size in enumerate(groups):
        chunk = t.messages[pos:pos + size]
        pos += size
        ov = overrides.get(str(gi))
        if ov is not None and ov["fp"] == fingerprint(chunk):
            messages.append(ov["raw"])
        else:
            messages.append(_render(chunk, tool_form, tool_ids))
    raw_tools = oro.get("tools_raw")
    same_tools = raw_tools is not None and normalize_tool_specs(raw_tools) == t.tools
    row: dict[str, Any] = {}
    extra = oro.get("row") or {}
    for key in oro.get("keys") or ("messages", "tools"):
        if key == "messages":
            row["messages"] = messages
        elif key == "tools":
            row["tools"] = raw_tools if same_tools else _flat(t.tools)
        elif key in extra:
            row[key] = extra[key]
    if "tools" not in row and not (oro.get("tools_absent") and (same_tools or raw_tools is None)):
        row["tools"] = _flat(t.tools)
    return row


# ── reading ───────────────────────────────────────────────────────────────────────────────────────────


def _tools_ok(raw: Any) -> bool:
    if not isinstance(raw, list):
        return False
    for spec in raw:
        fn = spec.get("function") if isinstance(spec, dict) and "function" in spec else spec
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return False
    return True


def from_oro_sft(row: Any, where: str, provenance: dict[str, Any] | None = None) -> Trajectory | Rejection:
    """One ORO SFT row as a canonical row (source ``oro_sft``, axis from :func:`text_axis`). Rejections:
    ``not_object``, ``missing_keys`` (no ``messages``), ``bad_trace`` (``messages`` not a list), ``empty_trace``,
    ``bad_message``, ``bad_tools``, ``bad_tool_call`` (malformed ``<tool_call>`` block or arguments),
    ``bad_tool_response``, ``unpaired_tool_call_id``, ``extra_tool_result``."""
    if not isinstance(row, dict):
        return reject("not_object", f"an SFT row is a JSON object, got {type(row).__name__}", where)
    if "messages" not in row:
        return reject("missing_keys", "SFT row has no 'messages'", where)
    msgs = row["messages"]
    if not isinstance(msgs, list):
        return reject("bad_trace", f"'messages' is a {type(msgs).__name__}, not a list", where)
    if not msgs:
        return reject("empty_trace", "'messages' is empty", where)
    raw_tools = row.get("tools")
    if raw_tools is not None and not _tools_ok(raw_tools):
        return reject("bad_tools", "'tools' must be a list of function specs (flat or nested) with names", where)
    state = _Row()
    try:
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise _Bad("bad_message", f"message {i} is a {type(m).__name__}, not an object")
            role = m.get("role")
            if role == "assistant":
                state.assistant(m, i)
            elif role == "tool":
                state.tool(m, i)
            elif role == "user":
                state.user(m, i)
            elif role == "system":
                content = m.get("content")
                if not isinstance(content, str):
                    raise _Bad("bad_message", f"message {i} (system): content is not a string")
                state.out.append({"role": "system", "content": content})
                state.groups.append(1)
            else:
                raise _Bad("bad_message", f"message {i}: unknown role {role!r}")
    except _Bad as bad:
        return reject(bad.reason, bad.message, where)
    messages = state.out
    if raw_tools is None:
        toolset, tools = infer_tools(call_names(messages))
    else:
        toolset, tools = "row", normalize_tool_specs(raw_tools)
    oro: dict[str, Any] = {"keys": list(row)}
    other = {k: v for k, v in row.items() if k not in ("messages", "tools")}
    if other:
        oro["row"] = other
    if raw_tools is None:
        oro["tools_absent"] = True
    elif _flat(tools) != raw_tools:
        oro["tools_raw"] = raw_tools
    tool_form = state.tool_form or "tool"
    tool_ids = state.tool_ids if state.tool_ids is not None else True
    if tool_form != "tool":
        oro["tool_form"] = tool_form
    if not tool_ids:
        oro["tool_ids"] = False
    if state.groups != _default_groups(messages, tool_form):
        oro["groups"] = state.groups
    overrides: dict[str, Any] = {}
    pos = 0
    for gi, size in enumerate(state.groups):
        chunk = messages[pos:pos + size]
        pos += size
        if _render(chunk, tool_form, tool_ids) != msgs[gi]:
            overrides[str(gi)] = {"fp": fingerprint(chunk), "raw": msgs[gi]}
    if overrides:
        oro["overrides"] = overrides
    pid = row.get("problem_id") if isinstance(row.get("problem_id"), str) else None
    prov = dict(provenance or {})
    if isinstance(row.get("id"), str | int):
        prov["row_id"] = row["id"]
    return Trajectory(
        traj_id=trajectory_id(messages, tools, pid), source="oro_sft", messages=messages, tools=tools,
        problem_id=pid, axis=text_axis(messages), axis_source="text", provenance=prov,
        extras={"oro": oro, "toolset": toolset},
    )


def iter_oro_sft(path: str | os.PathLike[str]) -> Iterator[Trajectory | Rejection]:
    """Rows from an ORO SFT JSONL (``.gz`` aware), one per line; a line that is not JSON is ``bad_json``; other
    rejections as :func:`from_oro_sft` (where = ``file:line``)."""
    name = os.fspath(path)
    for n, where, row in json_lines(path, "ORO SFT JSONL"):
        yield row if isinstance(row, Rejection) else from_oro_sft(row, where, {"file": name, "line": n})
