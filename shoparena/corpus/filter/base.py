"""What every filter stage shares: the :class:`Stage` base (a name, a :class:`StageReport`, a rejection sink) and
the small, allocation-light helpers that read a canonical trace (tool-call names, parsed arguments, thinks).

Rows are :class:`~shoparena.corpus.types.Trajectory` dataclasses already validated at normalisation, so the
helpers use plain ``dict.get`` and never build models per row. They still never raise on an odd shape (a
non-dict call, arguments that are not JSON): that reads as "no name" / "no arguments" and the gates decide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from shoparena.corpus.types import Rejection, StageReport, Trajectory

__all__ = ["Stage", "call_args", "call_name", "has_think", "norm_query", "where"]

_NON_WORD = re.compile(r"[^0-9a-z]+")


def where(t: Trajectory) -> str:
    """Where a row came from, for a rejection: ``file:line`` for imports, else the trajectory id."""
    prov = t.provenance
    if prov and prov.get("file"):
        return f"{prov['file']}:{prov.get('line', '?')}"
    return t.traj_id


def call_name(call: Any) -> str:
    if isinstance(call, dict):
        fn = call.get("function")
        if isinstance(fn, dict):
            name = fn.get("name")
            return name if isinstance(name, str) else ""
    return ""


def call_args(call: Any) -> dict[str, Any] | None:
    """A tool call's arguments as a dict (parsed from the canonical JSON string, or already a dict); None when they
    are missing, not JSON, or not a JSON object."""
    if not isinstance(call, dict):
        return None
    fn = call.get("function")
    if not isinstance(fn, dict):
        return None
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return None
    return args if isinstance(args, dict) else None


def has_think(m: dict[str, Any]) -> bool:
    """Whether an assistant message carries reasoning: a non-blank ``reasoning_content``, or a non-empty
    ``<think>…</think>`` block in its content (Qwen3-native text)."""
    rc = m.get("reasoning_content")
    if isinstance(rc, str) and rc.strip():
        return True
    c = m.get("content")
    if isinstance(c, str):
        s = c.find("<think>")
        if s >= 0:
            e = c.find("</think>", s)
            return bool(c[s + 7:e if e >= 0 else len(c)].strip())
    return False


def norm_query(q: Any) -> str:
    """A search query normalised for counting reformulations: lower case, runs of non-alphanumerics → one space."""
    return _NON_WORD.sub(" ", str(q).lower()).strip()


class Stage:
    """A named filter stage. :meth:`run` streams the rows it keeps and records every decision in :attr:`report`;
    each dropped row is also appended to :attr:`sink` as a :class:`Rejection` (``stage`` = :attr:`name`)."""

    name: str = "stage"

    def __init__(self, sink: list[Rejection] | None = None) -> None:
        self.report = StageReport(stage=self.name)
        self.sink: list[Rejection] = sink if sink is not None else []

    def reject(self, t: Trajectory, reason: str, message: str) -> None:
        w = where(t)
        self.report.reject(reason, w)
        self.sink.append(Rejection(stage=self.name, reason=reason, message=message, where=w, traj_id=t.traj_id))

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:  # pragma: no cover - abstract
        raise NotImplementedError
