"""Agent output is untrusted: the one check that turns whatever an agent returned into step records or a defect.

:func:`validate_steps` takes any value (what ``agent_main`` returned, a rollout line, an envelope's ``dialogue``)
and returns :class:`ValidSteps` (the step list, now safe for :mod:`shoparena.env.records`, the scorer, the judge
and the store) or an :class:`OutputDefect`: ONE stable reason code (:data:`REASON_CODES`), a message, and the
path of the offending element (``steps[3].completion.message.tool_call[0]``). It never raises and never
recurses, whatever the input. Used by the validator core (``validate`` and ``run``), ``shoparena score``'s
rollout loader and the corpus normaliser.

The format checked is the upstream/ORO step record (docs/shoppingbench.md §6.1, :class:`~shoparena.env.types.StepRecord`):
``{prompt?, completion: {reasoning_content?, content?, message: {think?, tool_call?, obs?, response?}},
extra_info: {step: int, query: str, …}}``; every ``tool_call[]`` entry has a string ``name`` of a known tool, an
object ``parameters`` and a string ``tool_call_id``; every ``obs[]`` entry names one of its step's calls.

Fatal versus scored (a deliberate split):

- **Fatal** (the record is ``FAILED`` and its outcome's error reads ``INVALID_OUTPUT:<code>: …``, the judge does
  not run): anything that is not the step format: the wrong JSON type anywhere, missing keys, unknown keys,
  calls without an id, calls to tools no profile has, ``obs`` naming no call, values JSON cannot hold (NaN,
  ±Infinity, lone surrogates, objects, integers past 64 bits), and output past the bounds below.
- **Scored** (a valid trajectory that simply fails): an empty step list, no ``recommend_product`` call, a
  recommendation of product ids that do not exist or an unusable ``product_ids`` argument, tool arguments that
  do not fit the tool's schema. The rule scorer keeps its upstream semantics for these (a wrong answer scores 0).

Bounds (one place; the sandbox's own ``output_mb`` cap, 16 MB by default, stops bigger envelopes earlier):
:data:`MAX_STEPS`, :data:`MAX_BYTES` (counted as the characters of strings and keys plus a few per value, a lower
bound of the JSON size), :data:`MAX_DEPTH` (containers inside the step list, the list itself at depth 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shoparena.env.types import ExtraInfo, StepRecord

MAX_STEPS = 500
"""Steps in one trajectory (upstream stops at 30, ORO at 25; agents that run their own loop get ample room)."""
MAX_BYTES = 8 << 20
"""Approximate JSON size of one trajectory (8 MiB; full tool outputs of a long episode stay well below)."""
MAX_DEPTH = 64
"""Nesting depth of containers (a step record with product search results is about a dozen deep)."""

PREFIX = "INVALID_OUTPUT"
"""What a fatal defect's reason starts with in a record's outcome (``INVALID_OUTPUT:<code>``)."""

REASON_CODES: dict[str, str] = {
    "not_a_list": "the output is not a list of steps",
    "not_json": "a value JSON cannot hold (an object, a non-string key, a circular reference)",
    "too_many_steps": f"more than {MAX_STEPS} steps",
    "too_large": f"more than about {MAX_BYTES >> 20} MiB of output",
    "too_deep": f"containers nested more than {MAX_DEPTH} deep",
    "non_finite_number": "NaN or ±Infinity",
    "number_out_of_range": "an integer outside the 64-bit range (the store's JSON cannot hold it)",
    "invalid_utf8": "a string that is not valid UTF-8 (a lone surrogate)",
    "step_not_object": "a step that is not an object",
    "missing_completion": "a step without 'completion'",
    "missing_message": "a completion without 'message'",
    "missing_extra_info": "a step without 'extra_info'",
    "missing_key": "a required key is absent (extra_info.step, extra_info.query, obs[].tool_call_id)",
    "unknown_key": "a key the step format does not have",
    "wrong_type": "a field of the wrong type",
    "tool_call_not_object": "a tool_call entry that is not an object",
    "tool_call_missing_name": "a tool call without a string 'name'",
    "tool_call_missing_id": "a tool call without a string 'tool_call_id'",
    "bad_arguments": "tool call 'parameters' missing or not an object",
    "unknown_tool": "a call to a tool no profile has",
    "unknown_call_id": "an obs entry naming no tool call of its step",
    "bad_step": "not a step record (anything else StepRecord refuses)",
}
"""Every reason code, with what it means. Stable: records, score reports and corpus rejections carry them."""

_PATH_CAP = 200
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1
"""What orjson (the store's canonical JSON) encodes."""
_STEP_KEYS = frozenset(("prompt", "completion", "extra_info"))
_COMPLETION_KEYS = frozenset(("reasoning_content", "content", "message"))
_MESSAGE_KEYS = frozenset(("think", "tool_call", "obs", "response"))
_CALL_KEYS = frozenset(("name", "parameters", "tool_call_id", "result"))
_OBS_KEYS = frozenset(("tool_call_id", "results"))
_EXTRA_KEYS = frozenset(ExtraInfo.model_fields)


@dataclass(frozen=True)
class OutputDefect:
    """Why an output is not a trajectory: one reason code, a message, where."""

    code: str
    message: str
    path: str = "steps"

    def __post_init__(self) -> None:
        if len(self.path) > _PATH_CAP:  # 200-deep nesting makes a long path: keep its two ends
            object.__setattr__(self, "path", self.path[:80] + "…" + self.path[-80:])

    @property
    def reason(self) -> str:
        """``INVALID_OUTPUT:<code>`` (the error type a record's envelope carries)."""
        return f"{PREFIX}:{self.code}"

    def describe(self) -> str:
        """``INVALID_OUTPUT:<code>: <message> (at <path>)``."""
        return f"{self.reason}: {self.message} (at {self.path})"


@dataclass(frozen=True)
class ValidSteps:
    """A checked trajectory: step dicts that satisfy :class:`~shoparena.env.types.StepRecord`."""

    steps: list[dict[str, Any]]


def known_tools() -> frozenset[str]:
    """Every tool name of the registry (all profiles and optional tools)."""
    from shoparena.env.tools import TOOLS, get_toolset

    get_toolset("upstream4")  # loads the registry
    return frozenset(TOOLS)


def parse_reason(error: str | None) -> str | None:
    """The reason code in a rendered error (``INVALID_OUTPUT:<code>: …``), or None."""
    if not isinstance(error, str) or not error.startswith(PREFIX + ":"):
        return None
    code = error[len(PREFIX) + 1:].split(":", 1)[0].strip()
    return code if code in REASON_CODES else None


def validate_steps(raw: object, *, tools: Iterable[str] | None = None, max_steps: int = MAX_STEPS,
                   max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> ValidSteps | OutputDefect:
    """``raw`` checked as a step list (module docstring): the steps, or the first defect found. ``tools``: the
    tool names allowed in calls (default: the whole registry). Never raises."""
    try:
        return _validate(raw, frozenset(tools) if tools is not None else known_tools(), max_steps, max_bytes,
                         max_depth)
    except RecursionError:  # pragma: no cover - the walks are iterative; a last guard
        return OutputDefect("too_deep", "the output is nested too deep to check")


def _validate(raw: object, tools: frozenset[str], max_steps: int, max_bytes: int,
              max_depth: int) -> ValidSteps | OutputDefect:
    if not isinstance(raw, list):
        return OutputDefect("not_a_list", f"expected a list of steps, got {_kind(raw)}")
    if len(raw) > max_steps:
        return OutputDefect("too_many_steps", f"{len(raw)} steps; at most {max_steps}")
    defect = _scan(raw, max_bytes, max_depth)
    if defect is not None:
        return defect
    for i, step in enumerate(raw):
        defect = _check_step(step, f"steps[{i}]", tools)
        if defect is not None:
            return defect
    for i, step in enumerate(raw):
        try:
            StepRecord.model_validate(step)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in err["loc"])
            return OutputDefect("bad_step", str(err["msg"])[:300], f"steps[{i}]{where}")
    return ValidSteps(list(raw))


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _scan(raw: list[Any], max_bytes: int, max_depth: int) -> OutputDefect | None:
    """One iterative pass over every value: JSON types only, finite numbers, valid strings, size and depth."""
    size = 0
    stack: list[tuple[Any, str, int]] = [(raw, "steps", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            size += len(value) + 2
            if not _utf8(value):
                return OutputDefect("invalid_utf8", "a string holds a lone surrogate (not valid UTF-8)", path)
        elif isinstance(value, bool) or value is None:
            size += 4
        elif isinstance(value, int):
            size += 8
            if not _INT_MIN <= value <= _INT_MAX:
                return OutputDefect("number_out_of_range", "an integer outside the 64-bit range", path)
        elif isinstance(value, float):
            size += 8
            if not math.isfinite(value):
                return OutputDefect("non_finite_number", f"{value!r} is not a JSON number", path)
        elif isinstance(value, list | dict):
            if depth > max_depth:
                return OutputDefect("too_deep", f"containers nested more than {max_depth} deep", path)
            size += 2
            if isinstance(value, list):
                for i in range(len(value) - 1, -1, -1):
                    stack.append((value[i], f"{path}[{i}]", depth + 1))
            else:
                for key in reversed(list(value)):
                    if not isinstance(key, str):
                        return OutputDefect("not_json", f"a key of type {type(key).__name__}", path)
                    if not _utf8(key):
                        return OutputDefect("invalid_utf8", "a key holds a lone surrogate", path)
                    size += len(key) + 3
                    stack.append((value[key], f"{path}.{key[:40]}", depth + 1))
        else:
            return OutputDefect("not_json", f"{_kind(value)} is not a JSON value", path)
        if size > max_bytes:
            return OutputDefect("too_large", f"more than {max_bytes} bytes of output", path)
    return None


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unknown(obj: dict[str, Any], allowed: frozenset[str], path: str) -> OutputDefect | None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        return OutputDefect("unknown_key", f"unknown key {extra[0][:40]!r} (allowed: {', '.join(sorted(allowed))})",
                            f"{path}.{extra[0][:40]}")
    return None


def _typed(obj: dict[str, Any], key: str, types: type | tuple[type, ...], path: str, what: str
           ) -> OutputDefect | None:
    if key not in obj:
        return None
    value = obj[key]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        return OutputDefect("wrong_type", f"{key} must be {what}, got {_kind(obj[key])}", f"{path}.{key}")
    return None


def _check_step(step: Any, path: str, tools: frozenset[str]) -> OutputDefect | None:
    if not isinstance(step, dict):
        return OutputDefect("step_not_object", f"a step is an object, got {_kind(step)}", path)
    for check in (lambda: _unknown(step, _STEP_KEYS, path),
                  lambda: None if "completion" in step else OutputDefect(
                      "missing_completion", "the step has no 'completion'", path),
                  lambda: None if "extra_info" in step else OutputDefect(
                      "missing_extra_info", "the step has no 'extra_info'", path),
                  lambda: _typed(step, "prompt", (list, type(None)), path, "a list of messages or null"),
                  lambda: _check_completion(step["completion"], f"{path}.completion", tools),
                  lambda: _check_extra(step["extra_info"], f"{path}.extra_info")):
        defect = check()
        if defect is not None:
            return defect
    return None


def _check_completion(comp: Any, path: str, tools: frozenset[str]) -> OutputDefect | None:
    if not isinstance(comp, dict):
        return OutputDefect("wrong_type", f"completion must be an object, got {_kind(comp)}", path)
    defect = (_unknown(comp, _COMPLETION_KEYS, path)
              or (None if "message" in comp else OutputDefect("missing_message", "the completion has no 'message'",
                                                              path))
              or _typed(comp, "content", str, path, "a string")
              or _typed(comp, "reasoning_content", (str, type(None)), path, "a string or null"))
    if defect is not None:
        return defect
    msg, mpath = comp["message"], f"{path}.message"
    if not isinstance(msg, dict):
        return OutputDefect("wrong_type", f"message must be an object, got {_kind(msg)}", mpath)
    defect = (_unknown(msg, _MESSAGE_KEYS, mpath) or _typed(msg, "think", str, mpath, "a string")
              or _typed(msg, "response", str, mpath, "a string")
              or _typed(msg, "tool_call", list, mpath, "a list") or _typed(msg, "obs", list, mpath, "a list"))
    if defect is not None:
        return defect
    ids: set[str] = set()
    for k, call in enumerate(msg.get("tool_call") or ()):
        cpath = f"{mpath}.tool_call[{k}]"
        if not isinstance(call, dict):
            return OutputDefect("tool_call_not_object", f"a tool call is an object, got {_kind(call)}", cpath)
        defect = _unknown(call, _CALL_KEYS, cpath)
        if defect is not None:
            return defect
        if not isinstance(call.get("name"), str):
            return OutputDefect("tool_call_missing_name", "the tool call has no string 'name'", cpath)
        if not isinstance(call.get("parameters"), dict):
            got = "none" if "parameters" not in call else _kind(call["parameters"])
            return OutputDefect("bad_arguments", f"parameters must be an object, got {got}", f"{cpath}.parameters")
        if not isinstance(call.get("tool_call_id"), str):
            return OutputDefect("tool_call_missing_id", "the tool call has no string 'tool_call_id'", cpath)
        if call["name"] not in tools:
            return OutputDefect("unknown_tool", f"no tool is named {call['name'][:60]!r}", f"{cpath}.name")
        ids.add(call["tool_call_id"])
    for k, obs in enumerate(msg.get("obs") or ()):
        opath = f"{mpath}.obs[{k}]"
        if not isinstance(obs, dict):
            return OutputDefect("wrong_type", f"an obs entry is an object, got {_kind(obs)}", opath)
        defect = _unknown(obs, _OBS_KEYS, opath)
        if defect is not None:
            return defect
        if not isinstance(obs.get("tool_call_id"), str):
            return OutputDefect("missing_key", "the obs entry has no string 'tool_call_id'", opath)
        if obs["tool_call_id"] not in ids:
            return OutputDefect("unknown_call_id", f"tool_call_id {obs['tool_call_id'][:60]!r} names no call of "
                                                   "this step", opath)
    return None


def _check_extra(extra: Any, path: str) -> OutputDefect | None:
    if not isinstance(extra, dict):
        return OutputDefect("wrong_type", f"extra_info must be an object, got {_kind(extra)}", path)
    defect = _unknown(extra, _EXTRA_KEYS, path)
    if defect is not None:
        return defect
    for key in ("step", "query"):
        if key not in extra:
            return OutputDefect("missing_key", f"extra_info has no '{key}'", path)
    return _typed(extra, "step", int, path, "an integer") or _typed(extra, "query", str, path, "a string")
