"""Rollout files and their join to problems (docs/shoppingbench.md §6.1, §6.2, §7.5).

One JSON value per line, either form (mixed files are fine):

- an upstream trajectory: a JSON list of step records (``data/{config}_{task}_{model}.jsonl``);
- an ORO ``output.jsonl`` envelope: ``{problem_id, status, error, dialogue: [steps] | null, …}``.

Bad lines are counted in the :class:`RolloutLoadReport` with their line numbers and a reason code, and skipped;
loading never raises on data. Codes: ``bad_json`` (invalid JSON or UTF-8), ``bad_rollout`` (another JSON type, a
non-list ``dialogue``), and for steps that are not step records the agent-output codes of
:func:`shoparena.env.output.validate_steps` (the check the validator applies to live agent output).

Join (:func:`match_rollouts`): by ``problem_id`` (the envelope's, else the first step's
``extra_info.problem_id``) when it names a known problem, else by exact query text (the first step's
``extra_info.query``, as upstream). Several rollouts for one problem are kept in file order as samples
(n samples ⇒ pass@k); upstream keeps only the last one per query.

Upstream's ``load_rollout_outputs`` stops after 501 lines (§9.4); ``max_lines=501``
(``ParityFlags.max_rollout_lines``) reproduces it, the default reads everything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from shoparena._io import iter_lines
from shoparena.env.output import OutputDefect, validate_steps
from shoparena.errors import NotFoundError
from shoparena.scoring.steps import first_step_value, is_envelope, render_error
from shoparena.tasks.types import Problem


class RolloutDefect(ValueError):
    """Why a decoded line is not a rollout: a reason code (see the module docstring) and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.detail = message


class Rollout(BaseModel):
    """One trajectory read from a rollout file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    """1-based line number in the file (0 when built in memory)."""
    kind: Literal["steps", "envelope"]
    steps: list[dict[str, Any]]
    problem_id: str | None = None
    """The envelope's ``problem_id`` or the first step's ``extra_info.problem_id``."""
    query: str | None = None
    """The first step's ``extra_info.query``."""
    status: str | None = None
    error: str | None = None


@dataclass
class RolloutLoadReport:
    """What loading and joining saw; filled in place."""

    lines_read: int = 0
    records: int = 0
    malformed: list[tuple[int, str]] = field(default_factory=list)
    """(line number, ``"<code>: <message>"``) for every skipped line."""
    codes: dict[str, int] = field(default_factory=dict)
    """Skipped lines per reason code."""
    truncated_at: int | None = None
    """Set when ``max_lines`` stopped reading before the end of the file."""
    unmatched: list[int] = field(default_factory=list)
    """Line numbers of rollouts that matched no problem."""
    matched_by_id: int = 0
    matched_by_query: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read, "records": self.records,
            "malformed": [{"line": n, "code": r.split(":", 1)[0], "reason": r} for n, r in self.malformed],
            "rejects_by_code": dict(sorted(self.codes.items())),
            "truncated_at": self.truncated_at, "unmatched_lines": list(self.unmatched),
            "matched_by_id": self.matched_by_id, "matched_by_query": self.matched_by_query,
        }

    def reject(self, line: int, code: str, message: str) -> None:
        """Count one skipped line."""
        self.malformed.append((line, f"{code}: {message}"))
        self.codes[code] = self.codes.get(code, 0) + 1


def parse_rollout(obj: Any, line: int = 0) -> Rollout:
    """A :class:`Rollout` from one decoded line; :class:`RolloutDefect` (a ``ValueError``) with a reason code
    when it is neither form or its steps are not step records."""
    if is_envelope(obj):
        dialogue = obj.get("dialogue")
        if dialogue is not None and not isinstance(dialogue, list):
            raise RolloutDefect("bad_rollout", "envelope 'dialogue' is neither a list nor null")
        steps = dialogue or []
        kind: Literal["steps", "envelope"] = "envelope"
        pid = obj.get("problem_id")
        status = obj.get("status")
        error = render_error(obj.get("error"))
    elif isinstance(obj, list):
        steps, kind, pid, status, error = obj, "steps", None, None, None
    else:
        raise RolloutDefect("bad_rollout", f"expected a list of steps or an ORO envelope, got {type(obj).__name__}")
    checked = validate_steps(steps)
    if isinstance(checked, OutputDefect):
        raise RolloutDefect(checked.code, f"{checked.message} (at {checked.path})")
    if pid is None:
        pid = first_step_value(steps, "problem_id")
    query = first_step_value(steps, "query")
    return Rollout(
        line=line, kind=kind, steps=steps, problem_id=str(pid) if pid is not None else None,
        query=query if isinstance(query, str) else None,
        status=str(status) if status is not None else None, error=error,
    )


def load_rollouts(
    path: str | os.PathLike[str],
    report: RolloutLoadReport | None = None,
    *,
    max_lines: int | None = None,
) -> list[Rollout]:
    """Read a rollout file (``.gz`` aware). ``max_lines`` stops after that many non-empty lines."""
    if not os.path.exists(path):
        raise NotFoundError(f"no rollout file {os.fspath(path)!r}", hint="pass the rollout JSONL path")
    report = report if report is not None else RolloutLoadReport()
    out: list[Rollout] = []
    for n, raw in iter_lines(path):
        if max_lines is not None and report.lines_read >= max_lines:
            report.truncated_at = n
            break
        report.lines_read += 1
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            report.reject(n, "bad_json", f"invalid JSON: {exc}")
            continue
        try:
            out.append(parse_rollout(obj, n))
        except RolloutDefect as exc:
            report.reject(n, exc.code, exc.detail)
            continue
        report.records += 1
    return out


def match_rollouts(
    problems: Sequence[Problem],
    rollouts: Iterable[Rollout],
    report: RolloutLoadReport | None = None,
) -> dict[str, list[Rollout]]:
    """``problem_id`` → its rollouts in file order (problems without one are absent)."""
    report = report if report is not None else RolloutLoadReport()
    by_id = {p.problem_id: p for p in problems}
    by_query: dict[str, str] = {}
    for p in problems:
        by_query.setdefault(p.query, p.problem_id)
    out: dict[str, list[Rollout]] = {}
    for r in rollouts:
        if r.problem_id is not None and r.problem_id in by_id:
            pid = r.problem_id
            report.matched_by_id += 1
        elif r.query is not None and r.query in by_query:
            pid = by_query[r.query]
            report.matched_by_query += 1
        else:
            report.unmatched.append(r.line)
            continue
        out.setdefault(pid, []).append(r)
    return out
