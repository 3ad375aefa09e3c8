"""What happened in a model's episodes, beside how often they succeeded: a pure function of its stored run.

Read from the files :func:`shoparena.validator.run.run_agents` writes (``runs.jsonl``, ``rollouts.jsonl``,
``calls.jsonl``, ``scores.jsonl``; the readers of :mod:`shoparena.validator.run`), nothing re-run, so an existing
evaluation's figures can be recomputed (docs/evaluate.md, "Diagnostics"):

- **episodes** (``runs.jsonl``): ``finished`` (the agent call ended, envelope ``SUCCESS``: the task may still have
  failed), ``timed_out`` (``TIMED_OUT``) and ``failed`` (``FAILED``), the failures counted by the error type the
  run recorded (``BackendError`` when the model backend failed the agent's inference calls, ``AgentError``,
  ``SandboxError``, …);
- **inference calls** (``calls.jsonl``): every request the episode made to the model through the gateway,
  answered or not (``inference_failed``: those not answered 200);
- **turns**: the completions the gateway answered (status 200), one per turn of the agent: the gateway's log is
  the ground truth of a run and, unlike the rollout, keeps the turns of an episode that timed out;
- **tool calls**: the tool calls those completions emitted (native, tag protocol or Qwen3 text, as the gateway
  parsed them); **steps recorded**: the steps the episode's rollout kept (``rollouts.jsonl``; none for an episode
  that produced no steps: a timed-out episode's partial dialogue is not kept);
- **turns without a tool call**, and among them **think-then-stop turns** (:func:`is_think_then_stop`): the
  completion states the decision in its text or reasoning and makes no call; and the **episodes with a
  think-then-stop turn** (``episodes_think_then_stop``). The turn count grows with how many turns an episode gets
  before its clock ends, so the same model counts more of them on a faster (or quieter) machine; the episode count
  does not, and is the one to compare between runs made under different load;
- **repeated tool calls** (``repeated_tool_calls``): tool calls with the same name and arguments as one the
  same episode already emitted — a loop, which the teacher's traces never make — and the **episodes with one**
  (``episodes_repeating``); **timed out after recommending** (``timed_out_after_recommending``): episodes that
  called ``recommend_product`` and still ran out of time instead of ending;
- **cut turns** (``turns_cut``): the completions the backend cut at its token cap (the call record's ``truncated``),
  and **cut think-then-stop turns** (``think_then_stop_cut``): the think-then-stop turns among them, whose
  ``<tool_call>`` may have been lost to the cap rather than never written, and **turns cut inside their call**
  (``turns_cut_in_call``): cut turns whose parser dropped an unclosed ``<tool_call>`` block — the cap fell in the
  call itself (a view call listing many product ids), not in the reasoning before it; all three ``None`` for a log
  written before backends reported it (an answered turn without ``truncated``);
- **ground truth retrieved** (a ground-truth product among the ids the episode's own searches returned) and
  **recommended** (among the recommended ids), as :mod:`shoparena.evaluate.choice` decides them;
- **parse notes**: what the backend's text parser dropped from a completion (a malformed or unclosed
  ``<tool_call>`` block), counted by kind (:func:`note_kind`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shoparena.env.protocol_native import UNCLOSED_CALL_NOTE
from shoparena.env.turns import DECISION, states_decision, think_then_stop
from shoparena.errors import DataError
from shoparena.evaluate.choice import episode_choice, searched_ids
from shoparena.tasks.types import Problem
from shoparena.validator.run import read_run_file, run_records

__all__ = ["DECISION", "is_think_then_stop", "note_kind", "run_diagnostics", "states_decision"]


def is_think_then_stop(completion: Mapping[str, Any]) -> bool:
    """A think-then-stop turn: a completion (a ``calls.jsonl`` inference record answered 200) that emitted no tool
    call, and lost none to the parser (no ``parse_notes``: a malformed call is an attempt, counted under parse
    notes), while its reasoning or text states a recommendation decision (:func:`states_decision`). The decision is
    made in words and never made: the turn ends, no ``recommend_product`` is called. The turn predicate is
    :func:`shoparena.env.turns.think_then_stop`, reading the record's ``tool_calls`` as the gateway parsed them."""
    return (completion.get("status") == 200 and not completion.get("parse_notes")
            and think_then_stop(completion, parse_content=False))


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")


def note_kind(note: str) -> str:
    """A parse note without its particulars: the text before the first ``:``, quoted parts as ``…`` and numbers as
    ``N`` ("unknown tool 'x' skipped" → "unknown tool … skipped")."""
    head = _QUOTED.sub("…", str(note)).split(":", 1)[0]
    return " ".join(_NUMBER.sub("N", head).split())[:120] or "(empty)"


def _objects(rows: list[Any], path: Path) -> list[dict[str, Any]]:
    if not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: a line is not a JSON object")
    return rows


def _call_key(call: Any) -> str | None:
    """What makes two tool calls the same call: the tool's name and its arguments (canonical JSON)."""
    if not isinstance(call, dict):
        return None
    return json.dumps([call.get("name"), call.get("arguments")], sort_keys=True, default=str)


def _mean(total: int, n: int) -> float | None:
    return round(total / n, 4) if n else None


def run_diagnostics(run_dir: str | Path, problems: Sequence[Problem]) -> dict[str, Any] | None:
    """The diagnostics (module docstring) of the run at ``run_dir`` over its episodes of ``problems``; ``None``
    when the run has no ``runs.jsonl``. Figures that need the call log are ``None`` without a ``calls.jsonl``, and
    ``steps_recorded`` without a ``rollouts.jsonl``."""
    root = Path(run_dir)
    runs_file, rollouts_file, calls_file, scores_file = (root / f for f in (
        "runs.jsonl", "rollouts.jsonl", "calls.jsonl", "scores.jsonl"))
    if not runs_file.is_file():
        return None
    truth = {p.problem_id: {item.product_id for item in p.reward} for p in problems}
    runs = run_records(runs_file.read_bytes(), runs_file)
    rollouts = read_run_file(rollouts_file) if rollouts_file.is_file() else None
    if rollouts is not None and len(rollouts) != len(runs):
        raise DataError(f"{rollouts_file}: {len(rollouts)} episodes, runs.jsonl has {len(runs)}")
    calls = _objects(read_run_file(calls_file), calls_file) if calls_file.is_file() else None
    scores = _objects(read_run_file(scores_file), scores_file) if scores_file.is_file() else []
    recommended = {(s.get("problem_id"), s.get("sample")): s.get("recommended_ids") or [] for s in scores}
    by_episode: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for c in calls or []:
        by_episode.setdefault((c.get("problem_id"), c.get("sample")), []).append(c)
    found = searched_ids(calls or [])

    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    totals: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    episodes = 0
    for i, run in enumerate(runs):
        key = (run["problem_id"], run["sample"])
        if key[0] not in truth:
            continue
        episodes += 1
        status = str(run.get("status") or "UNKNOWN")
        statuses[status] += 1
        if status == "FAILED":
            err = run.get("error")
            reason = str(err.get("type") or "unknown")[:80] if isinstance(err, dict) else "unknown"
            reasons[reason] += 1
            if isinstance(err, dict) and err.get("message"):
                examples.setdefault(reason, " ".join(str(err["message"]).split())[:300])
        if rollouts is not None and run.get("steps"):  # steps 0: the placeholder of an episode with none
            steps = rollouts[i]
            totals["steps_recorded"] += len(steps) if isinstance(steps, list) else 0
        stopped_here = recommended_here = False
        made: set[str] = set()
        repeats = 0
        for c in by_episode.get(key, []):
            if c.get("kind") == "search":
                totals["search_calls"] += 1
            if c.get("kind") != "inference":
                continue
            totals["inference_calls"] += 1
            if c.get("status") != 200:
                totals["inference_failed"] += 1
                continue
            totals["turns"] += 1
            cut = c.get("truncated")
            if not isinstance(cut, bool):
                totals["turns_cut_unknown"] += 1
            totals["turns_cut"] += cut is True
            emitted = c.get("tool_calls") or []
            totals["tool_calls"] += len(emitted) if isinstance(emitted, list) else 0
            for call in emitted if isinstance(emitted, list) else []:
                made_key = _call_key(call)
                if made_key is None:
                    continue
                repeats += made_key in made
                made.add(made_key)
                recommended_here = recommended_here or call.get("name") == "recommend_product"
            if not emitted:
                totals["turns_without_tool_call"] += 1
                stopped = is_think_then_stop(c)
                totals["think_then_stop"] += stopped
                totals["think_then_stop_cut"] += stopped and cut is True
                stopped_here = stopped_here or stopped
            parsed = c.get("parse_notes") or []
            if isinstance(parsed, list) and parsed:
                totals["turns_with_parse_notes"] += 1
                notes.update(note_kind(n) for n in parsed)
                totals["turns_cut_in_call"] += cut is True and any(note_kind(n) == UNCLOSED_CALL_NOTE for n in parsed)
        totals["episodes_think_then_stop"] += stopped_here
        totals["repeated_tool_calls"] += repeats
        totals["episodes_repeating"] += repeats > 0
        totals["timed_out_after_recommending"] += recommended_here and status == "TIMED_OUT"
        rec = recommended.get(key, [])
        flags = episode_choice(truth[key[0]], found.get(key, set()), rec if isinstance(rec, list) else [])
        totals["gt_retrieved"] += flags["retrieved"]
        totals["gt_recommended"] += flags["chosen"]

    have_calls = calls is not None

    def count(name: str, *, needs_calls: bool = True) -> int | None:
        return totals[name] if have_calls or not needs_calls else None

    knows_cut = have_calls and not totals["turns_cut_unknown"]  # every answered turn says whether it was cut

    out: dict[str, Any] = {
        "episodes": episodes, "finished": statuses["SUCCESS"], "timed_out": statuses["TIMED_OUT"],
        "failed": statuses["FAILED"], "failed_by_reason": dict(sorted(reasons.items())),
        "failure_examples": dict(sorted(examples.items())),
        "other_status": {k: v for k, v in sorted(statuses.items()) if k not in ("SUCCESS", "TIMED_OUT", "FAILED")},
        "all_failed_on_backend": episodes > 0 and reasons["BackendError"] == episodes,
        "totals": {
            "inference_calls": count("inference_calls"), "inference_failed": count("inference_failed"),
            "turns": count("turns"), "tool_calls": count("tool_calls"), "search_calls": count("search_calls"),
            "steps_recorded": totals["steps_recorded"] if rollouts is not None else None,
        },
        "turns_without_tool_call": count("turns_without_tool_call"),
        "think_then_stop": count("think_then_stop"),
        "episodes_think_then_stop": count("episodes_think_then_stop"),
        "repeated_tool_calls": count("repeated_tool_calls"),
        "episodes_repeating": count("episodes_repeating"),
        "timed_out_after_recommending": count("timed_out_after_recommending"),
        "turns_cut": totals["turns_cut"] if knows_cut else None,
        "think_then_stop_cut": totals["think_then_stop_cut"] if knows_cut else None,
        "turns_cut_in_call": totals["turns_cut_in_call"] if knows_cut else None,
        "gt_retrieved": count("gt_retrieved"), "gt_recommended": totals["gt_recommended"],
        "parse_notes": None if not have_calls else {
            "turns": totals["turns_with_parse_notes"], "notes": sum(notes.values()),
            "by_kind": dict(sorted(notes.items(), key=lambda kv: (-kv[1], kv[0])))},
    }
    out["per_episode"] = {k: None if v is None else _mean(v, episodes) for k, v in out["totals"].items()
                          if k in ("inference_calls", "turns", "tool_calls", "steps_recorded")}
    return out
