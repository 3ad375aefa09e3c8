"""Reading what a trajectory recommended (docs/shoppingbench.md §6.1, §6.2, §7.1).

A trajectory is a list of step records; an ORO ``output.jsonl`` envelope wraps one in ``dialogue``. The
recommendation is the ``product_ids`` of the **last** ``recommend_product`` call over all steps (a later call
overrides an earlier one even when its ids are empty, as upstream).

Id splitting (§7.1, §9.1):

- ``upstream``: split the comma string on ``","``; no stripping, duplicates kept (``"a, b"`` → ``["a", " b"]``).
- ``strict``: strip each id, drop empty ones, de-duplicate keeping the first occurrence.

Accepted ``product_ids`` shapes: a comma string (upstream's only form); by default also a JSON array of ids
(each element is one id, never split) and a lone ``product_id`` parameter (§4.4). ``ParityFlags.ids_string_only``
restores upstream's "not a string ⇒ no recommendation".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from shoparena.scoring.format import step_tool_calls
from shoparena.scoring.types import ParityFlags
from shoparena.types import Mode


class Unwrapped(NamedTuple):
    """What the scorer needs from a step list or an ORO envelope (:class:`~shoparena.env.types.Envelope`,
    read tolerantly here: a stored line may miss keys): the steps, and the envelope's id, status and error."""

    steps: list[Any]
    problem_id: str | None
    status: str | None
    error: str | None


def is_envelope(obj: Any) -> bool:
    """An ORO envelope is an object with a ``dialogue`` or ``status`` key (a trajectory is a list)."""
    return isinstance(obj, Mapping) and ("dialogue" in obj or "status" in obj)


def unwrap(obj: Any) -> Unwrapped:
    """Steps plus envelope metadata from a step list or an ORO envelope (``dialogue: null`` ⇒ no steps)."""
    if isinstance(obj, Mapping):
        dialogue = obj.get("dialogue")
        steps = list(dialogue) if isinstance(dialogue, list) else []
        pid = obj.get("problem_id")
        return Unwrapped(steps, str(pid) if pid is not None else None,
                        str(obj["status"]) if obj.get("status") is not None else None,
                        render_error(obj.get("error")))
    return Unwrapped(list(obj) if isinstance(obj, list | tuple) else [], None, None, None)


def render_error(error: Any) -> str | None:
    """ORO's ``{type, message}`` error object as ``"type: message"``."""
    if error is None:
        return None
    if isinstance(error, Mapping):
        kind, msg = error.get("type"), error.get("message")
        return ": ".join(str(x) for x in (kind, msg) if x) or None
    return str(error)


def last_recommendation(steps: Sequence[Any], parity: ParityFlags | None = None) -> str | list[str] | None:
    """The raw ``product_ids`` of the last ``recommend_product`` call: a str, a list of str, or None (no
    call, or an unusable argument)."""
    parity = parity or ParityFlags()
    found: str | list[str] | None = None
    for step in steps:
        for call in step_tool_calls(step):
            if call.get("name") != "recommend_product":
                continue
            params = call.get("parameters")
            params = params if isinstance(params, Mapping) else {}
            raw = params.get("product_ids", "")
            if parity.ids_string_only:
                found = raw if isinstance(raw, str) else None
                continue
            if "product_ids" not in params and "product_id" in params:
                raw = params["product_id"]
            if isinstance(raw, int) and not isinstance(raw, bool):
                raw = str(raw)
            if isinstance(raw, list):
                found = [str(x) for x in raw if isinstance(x, str | int) and not isinstance(x, bool)]
            else:
                found = raw if isinstance(raw, str) else None
    return found


def split_ids(product_ids: str | Sequence[str] | None, mode: Mode) -> list[str]:
    """The recommended id list under ``mode`` (module docstring). ``""`` and None give ``[]`` in strict and
    ``[""]``/``[]`` in upstream (an empty string splits to one empty id, which never resolves)."""
    if product_ids is None:
        return []
    ids = product_ids.split(",") if isinstance(product_ids, str) else [str(x) for x in product_ids]
    if mode == "upstream":
        return ids
    seen: dict[str, None] = {}
    for pid in ids:
        pid = pid.strip()
        if pid and pid not in seen:
            seen[pid] = None
    return list(seen)


def first_step_value(steps: Sequence[Any], key: str) -> Any:
    """``extra_info[key]`` of the first step that has it (``query``, ``problem_id``), else None."""
    for step in steps:
        extra = step.get("extra_info") if isinstance(step, Mapping) else None
        if isinstance(extra, Mapping) and extra.get(key) is not None:
            return extra[key]
    return None
