"""Step-record sources → rows: upstream rollout files (:func:`iter_rollouts`) and ORO ``output.jsonl`` envelopes
(:func:`iter_envelopes`), docs/shoppingbench.md §6.1–§6.3.

Steps become canonical messages with :func:`shoparena.env.records.steps_to_messages` (in the flavour of the
first step that has calls); what the messages do not say (``extra_info``, raw tag ``content``, ``prompt``) goes
to ``extras["step_meta"]``, and an envelope's own fields to ``extras["envelope"]``. Every import is checked to
convert back to exactly its steps; when the canonical form cannot reproduce them (non-canonical input such as
``obs`` listed out of call order), the original steps are kept in ``extras["raw_steps"]`` and given back while
the messages are unchanged — never silently lost.

No system message is added: an upstream step's ``prompt`` is the tag-protocol prompt, which is not the prompt of
the native conversation; it stays in ``step_meta``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from shoparena.corpus.normalize._common import (
    call_names,
    fingerprint,
    infer_tools,
    json_lines,
    reject,
    scan_messages,
)
from shoparena.corpus.normalize.axis import text_axis
from shoparena.corpus.types import Rejection, SourceKind, Trajectory, trajectory_id
from shoparena.env.output import OutputDefect, validate_steps
from shoparena.env.records import messages_to_steps, read_envelope, step_flavor, steps_to_messages
from shoparena.errors import DataError
from shoparena.scoring.rollouts import RolloutDefect, parse_rollout
from shoparena.scoring.steps import first_step_value
from shoparena.tasks.types import Problem

__all__ = ["from_steps", "iter_envelopes", "iter_rollouts"]

_CONVERT_ERRORS = (KeyError, TypeError, ValueError, AttributeError, DataError)


class _Problems:
    """``problems`` looked up by id, then by exact query text (as upstream joins rollouts)."""

    __slots__ = ("by_id", "by_query")

    def __init__(self, problems: Mapping[str, Problem]) -> None:
        self.by_id = problems
        self.by_query: dict[str, Problem] = {}
        for p in problems.values():
            self.by_query.setdefault(p.query, p)

    def match(self, problem_id: str | None, query: str | None) -> Problem | None:
        hit = self.by_id.get(problem_id) if problem_id is not None else None
        if hit is None and query is not None:
            hit = self.by_query.get(query)
        return hit


def from_steps(steps: list[Any], *, where: str, source: SourceKind = "rollout", problem_id: str | None = None,
               problems: _Problems | None = None, envelope: dict[str, Any] | None = None,
               validate: bool = True, provenance: dict[str, Any] | None = None) -> Trajectory | Rejection:
    """One trace given as step records (upstream or ORO flavour) as a row. ``envelope`` is the ORO envelope the
    steps came in (its other fields are kept for :func:`~shoparena.corpus.normalize.to_envelope`)."""
    if validate:
        checked = validate_steps(steps)
        if isinstance(checked, OutputDefect):  # the validator's reason code (shoparena.env.output)
            return reject(checked.code, f"{checked.message} (at {checked.path})", where)
    if not steps:
        return reject("empty_trace", "no steps: nothing to train on", where)
    pid = problem_id if problem_id is not None else first_step_value(steps, "problem_id")
    pid = str(pid) if pid is not None else None
    query = first_step_value(steps, "query")
    problem = None
    if problems is not None:
        problem = problems.match(pid, query if isinstance(query, str) else None)
        if problem is None:
            return reject("unknown_problem", f"problem id {pid!r} / query {str(query)[:80]!r} matches no given "
                                             "problem", where)
    flavor = next((fl for s in steps if (fl := step_flavor(s["completion"]["message"])) is not None), "upstream")
    try:
        with_meta = steps_to_messages(steps, flavor=flavor)
    except _CONVERT_ERRORS as exc:
        return reject("bad_step", f"steps cannot be converted to messages: {exc!r}", where)
    extras: dict[str, Any] = {}
    messages, bad = scan_messages(with_meta, extras)
    if bad is not None:
        return reject(bad[0], bad[1], where)
    if flavor != "upstream":
        extras["flavor"] = flavor
    try:
        exact = messages_to_steps(with_meta, flavor=flavor) == steps
    except _CONVERT_ERRORS:
        exact = False
    if not exact:
        extras["raw_steps"] = steps
        extras["raw_fp"] = fingerprint(messages)
    if envelope is not None:
        extras["envelope"] = envelope
    toolset, tools = infer_tools(call_names(messages))
    extras["toolset"] = toolset
    if problem is not None:
        pid = problem.problem_id
    return Trajectory(
        traj_id=trajectory_id(messages, tools, pid), source=source, messages=messages, tools=tools,
        problem_id=pid, bucket=problem.bucket if problem else None,
        cluster_id=problem.cluster_id if problem else None, suite=problem.suite if problem else None,
        axis=text_axis(messages), axis_source="text", provenance=provenance or {}, extras=extras,
    )


def _envelope_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "dialogue"}
    if "dialogue" in obj and obj["dialogue"] is None:
        out["dialogue_null"] = True
    return out


def iter_rollouts(path: str | os.PathLike[str], problems: Mapping[str, Problem] | None = None,
                  ) -> Iterator[Trajectory | Rejection]:
    """Rows from an upstream ShoppingBench rollout JSONL (``.gz`` aware): one line = a JSON list of step records,
    or an object form :func:`shoparena.scoring.rollouts.parse_rollout` accepts (an ORO envelope → source
    ``oro_envelope``). With ``problems`` (id → problem) each row is joined by ``problem_id``, else by the first
    step's query; the row takes the problem's id, bucket, cluster and suite.

    Rejections (where = ``file:line``): ``bad_json``, ``bad_rollout`` (neither form, a non-list dialogue), the
    agent-output codes of :func:`shoparena.env.output.validate_steps` for steps that are not step records
    (``step_not_object``, ``tool_call_missing_id``, …), ``empty_trace``, ``unknown_problem`` (only with
    ``problems``)."""
    index = _Problems(problems) if problems is not None else None
    name = os.fspath(path)
    for n, where, obj in json_lines(path, "rollout JSONL"):
        if isinstance(obj, Rejection):
            yield obj
            continue
        try:
            rollout = parse_rollout(obj, n)  # checks the steps with validate_steps
        except RolloutDefect as exc:
            yield reject(exc.code, exc.detail, where)
            continue
        env = _envelope_fields(obj) if rollout.kind == "envelope" else None
        yield from_steps(rollout.steps, where=where, source="oro_envelope" if env is not None else "rollout",
                         problem_id=rollout.problem_id, problems=index, envelope=env, validate=False,
                         provenance={"file": name, "line": n})


def iter_envelopes(path: str | os.PathLike[str], problems: Mapping[str, Problem] | None = None,
                   ) -> Iterator[Trajectory | Rejection]:
    """Rows from an ORO ``output.jsonl`` (one envelope per line, checked by
    :func:`shoparena.env.records.read_envelope`). Rejections: ``bad_json``, ``not_object``, ``bad_envelope``
    (keys, status, error shape), the agent-output codes of :func:`shoparena.env.output.validate_steps` for a
    dialogue that is not a step list, ``empty_trace`` (``dialogue`` null or empty), ``unknown_problem`` (only with
    ``problems``)."""
    index = _Problems(problems) if problems is not None else None
    name = os.fspath(path)
    for n, where, obj in json_lines(path, "ORO output.jsonl"):
        if isinstance(obj, Rejection):
            yield obj
            continue
        if not isinstance(obj, dict):
            yield reject("not_object", f"an envelope is a JSON object, got {type(obj).__name__}", where)
            continue
        dialogue = obj.get("dialogue")
        if dialogue is not None and not isinstance(dialogue, list):
            yield reject("bad_envelope", f"'dialogue' is a {type(dialogue).__name__}, not a list or null", where)
            continue
        try:
            read_envelope(obj, check_steps=False)
        except DataError as exc:
            yield reject("bad_envelope", exc.message, where)
            continue
        yield from_steps(dialogue or [], where=where, source="oro_envelope", problem_id=str(obj["problem_id"]),
                         problems=index, envelope=_envelope_fields(obj),
                         provenance={"file": name, "line": n})
