"""Shared pieces of the normaliser: rejections, message validation, ``step_meta`` ↔ extras, tool inference.

Owns nothing public: :mod:`shoparena.corpus.normalize` re-exports what callers need.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from shoparena._io import iter_lines
from shoparena.corpus.types import Rejection
from shoparena.env.records import META
from shoparena.errors import NotFoundError

STAGE = "normalize"
ROLES = frozenset(("system", "user", "assistant", "tool"))


def reject(reason: str, message: str, where: str, traj_id: str | None = None) -> Rejection:
    return Rejection(stage=STAGE, reason=reason, message=message, where=where, traj_id=traj_id)


def fingerprint(obj: Any) -> str:
    """A short content hash (sorted-key JSON, BLAKE2b-64): tells whether a message was changed after import."""
    return hashlib.blake2b(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS),
                           digest_size=8).hexdigest()


def assistant_fp(m: dict[str, Any]) -> str:
    """Fingerprint of what a trainer sees of an assistant message (content, reasoning, calls): CRC-32 of the
    parts. Cheap (the store path runs it per step); only used to notice that a message changed after import."""
    parts = [m.get("content") or "", m.get("reasoning_content") or ""]
    for tc in m.get("tool_calls") or ():
        fn = tc.get("function") or {}
        parts += (str(tc.get("id")), str(fn.get("name")), str(fn.get("arguments")))
    return format(zlib.crc32("\x00".join(parts).encode()), "08x")


_TEXT_META = ("content", "reasoning_content")
"""step_meta keys that describe the original text of a step: dropped on the way back when the message changed."""


def scan_messages(messages: list[Any], extras: dict[str, Any]) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
    """One pass over canonical messages (as :func:`shoparena.env.records.steps_to_messages` writes them): check
    them and take ``step_meta`` out. Returns ``(messages without step_meta, None)`` or ``([], (reason, message))``
    for the first problem: roles, string contents, tool-call shape (``id``, ``function.name``, ``arguments`` as a
    JSON string), every tool message naming a call of the assistant turn before it.

    The metas go to ``extras["step_meta"]`` (one per assistant message, ``{}`` where none); for metas that pin the
    step's raw text, the message's :func:`assistant_fp` goes to ``extras["step_fp"]`` (None elsewhere)."""
    out: list[dict[str, Any]] = []
    metas: list[dict[str, Any]] = []
    fps: list[str | None] = []
    any_meta = any_fp = False
    open_ids: list[str] = []
    for i, m in enumerate(messages):
        if type(m) is not dict:
            return [], ("bad_message", f"message {i} is a {type(m).__name__}, not an object")
        role = m.get("role")
        if type(m.get("content")) is not str:
            return [], ("bad_message", f"message {i} ({role}): content is {type(m.get('content')).__name__}, "
                                       "not a string")
        if role == "assistant":
            open_ids = []
            for k, tc in enumerate(m.get("tool_calls") or ()):
                fn = tc.get("function") if type(tc) is dict else None
                if not (type(fn) is dict and type(fn.get("name")) is str and type(fn.get("arguments")) is str
                        and type(tc.get("id")) is str):
                    return [], ("bad_tool_call", f"message {i} tool call {k}: expected {{id, type, function: "
                                                 f"{{name, arguments: JSON string}}}}")
                open_ids.append(tc["id"])
            md = m.get(META)
            if md is not None:
                m = {k: v for k, v in m.items() if k != META}
            if md:
                any_meta = True
                if "content" in md or "reasoning_content" in md:
                    fps.append(assistant_fp(m))
                    any_fp = True
                else:
                    fps.append(None)
                metas.append(md)
            else:
                metas.append({})
                fps.append(None)
        elif role == "tool":
            tid = m.get("tool_call_id")
            if type(tid) is not str:
                return [], ("bad_message", f"message {i} (tool): tool_call_id is missing")
            if tid not in open_ids:
                return [], ("unpaired_tool_call_id", f"message {i} (tool): tool_call_id {tid!r} names no call "
                                                     "of the preceding assistant turn")
            open_ids.remove(tid)
        elif role not in ROLES:
            return [], ("bad_message", f"message {i}: unknown role {role!r}")
        out.append(m)
    if any_meta:
        extras["step_meta"] = metas
        if any_fp:
            extras["step_fp"] = fps
    return out, None


def join_meta(messages: list[dict[str, Any]], extras: dict[str, Any]) -> list[dict[str, Any]]:
    """Messages with their ``step_meta`` back (by assistant position). A message changed since import (its
    fingerprint differs) keeps its timing/flavour meta but not the raw-text pins."""
    metas = extras.get("step_meta") or []
    if not metas:
        return messages
    fps = extras.get("step_fp") or []
    out: list[dict[str, Any]] = []
    k = 0
    for m in messages:
        if m.get("role") == "assistant":
            md = metas[k] if k < len(metas) else None
            if md:
                fp = fps[k] if k < len(fps) else None
                if fp is not None and fp != assistant_fp(m):
                    md = {x: v for x, v in md.items() if x not in _TEXT_META}
                m = {**m, META: md}
            k += 1
        out.append(m)
    return out


# ── tools ─────────────────────────────────────────────────────────────────────────────────────────────

_PROFILES = ("upstream4", "oro7", "oro_sft4")
_BY_SHA: dict[str, tuple[str, list[dict[str, Any]]]] | None = None
_BY_NAMES: dict[tuple[str, ...], tuple[str, list[dict[str, Any]]]] = {}


def _sha(specs: list[dict[str, Any]]) -> str:
    return hashlib.sha256(orjson.dumps(specs, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _candidates() -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """``tools_sha256`` (as the gateway logs it) → (label, specs JSON) of every profile × optional tools."""
    global _BY_SHA
    if _BY_SHA is None:
        from shoparena.env.tools import get_toolset

        table: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        for profile in _PROFILES:
            for ws in (False, True):
                for pe in (False, True):
                    specs = get_toolset(profile, web_search=ws, python_execute=pe).specs()
                    label = profile + ("+web_search" if ws else "") + ("+python_execute" if pe else "")
                    table.setdefault(_sha(specs), (label, specs))
        _BY_SHA = table
    return _BY_SHA


def infer_tools(names: Iterable[str], tools_sha256: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The nested tool specs a trace was run with, and how they were found. The list is new; the spec dicts are
    shared between rows (one copy per toolset in memory): treat them as read-only.

    The logged ``tools_sha256`` of an inference request, when it is one of the known profiles, decides. Otherwise
    the names (the request's ``tool_names``, else the names the trace called): the smallest profile that holds
    them all (``upstream4``, then ``oro7``) plus ``web_search`` / ``python_execute`` when used; names outside the
    registry get a bare spec (``{"type": "object"}`` parameters)."""
    if tools_sha256:
        hit = _candidates().get(tools_sha256)
        if hit is not None:
            return hit[0], list(hit[1])
    key = tuple(sorted(set(names)))
    hit = _BY_NAMES.get(key)
    if hit is None:
        hit = _by_names(key)
        _BY_NAMES[key] = hit
    return hit[0], list(hit[1])


def _by_names(names: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
    from shoparena.env.tools import OPTIONAL_TOOLS, PROFILES, TOOLS, get_toolset

    used = set(names)
    optional = used & set(OPTIONAL_TOOLS)
    core = used - optional
    for profile in ("upstream4", "oro7"):
        if core <= set(PROFILES[profile]):
            ts = get_toolset(profile, web_search="web_search" in optional,
                             python_execute="python_execute" in optional)
            label = profile + "".join(f"+{n}" for n in OPTIONAL_TOOLS if n in optional)
            return label, ts.specs()
    get_toolset("upstream4")  # loads the registry
    specs = [TOOLS[n].spec() if n in TOOLS else {"type": "function", "function": {
        "name": n, "description": "", "parameters": {"type": "object"}}} for n in names]
    return "names", specs


def call_names(messages: list[dict[str, Any]]) -> list[str]:
    return [str((tc.get("function") or {}).get("name")) for m in messages if m.get("role") == "assistant"
            for tc in (m.get("tool_calls") or ())]


def json_lines(path: str | os.PathLike[str], what: str) -> Iterator[tuple[int, str, Any]]:
    """``(line number, "file:line", decoded object or a bad_json Rejection)`` for each line of a JSONL file
    (``.gz`` aware). A missing file raises :class:`NotFoundError` (a usage error, not bad data)."""
    if not os.path.exists(path):
        raise NotFoundError(f"no such file {os.fspath(path)!r}", hint=f"pass the {what} path")
    name = os.fspath(path)
    for n, raw in iter_lines(path):
        where = f"{name}:{n}"
        try:
            yield n, where, orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield n, where, reject("bad_json", f"invalid JSON: {exc}", where)
