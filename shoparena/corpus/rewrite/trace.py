"""What a rewrite keeps of an axis-B trace: its real tool calls, their real observations and its recommendation.

:func:`plan_rewrite` reads a :class:`~shoparena.corpus.types.Trajectory` into a :class:`RewritePlan` — the head
(system / user turns, verbatim), the ordered non-final tool calls each with the tool message that answered it
(arguments and observation kept as the exact strings of the trace), the recommendation (the trace's last
``recommend_product``) and the closing ``terminate`` — or into a counted :class:`~shoparena.corpus.types.Rejection`.

Where the calls come from:

- the trace's own ``tool_calls`` (the normal case: a sub-task agent records every call it made as a step), checked
  against the gateway's call log when the row has one — the log, not the agent's own record, is the ground truth
  (``call_log_mismatch`` when the trace's search calls or their result ids disagree with it);
- the call log's search records when the trace holds no tool call at all. The log keeps arguments and result ids
  but not the observation text, so an ``observe`` callable must produce it (:func:`catalog_observer` re-runs the
  exact call against the catalog and the plan checks the ids against the log); without one such a row is
  rejected (``missing_observation``) — an observation is never invented.

Rejection reasons (``stage="rewrite"``): ``not_axis_b``, ``no_query``, ``no_calls``, ``missing_observation``,
``call_log_mismatch``, ``no_recommendation``, ``bad_recommendation``, ``recommend_unseen``, ``unknown_tools``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoparena.corpus.types import Rejection, Trajectory
from shoparena.env.records import decode_content, dumps
from shoparena.env.tools import (
    ANSWER_TOOLS,
    PROFILES,
    SEARCH_TOOLS,
    ArgError,
    ToolContext,
    Toolset,
    arg_ids,
    get_toolset,
    normalize_tool_specs,
)

__all__ = [
    "FINAL_TOOLS", "SEARCH_TOOLS", "Observer", "RealCall", "RewritePlan", "catalog_observer", "plan_rewrite",
    "result_ids",
]

STAGE = "rewrite"
FINAL_TOOLS: frozenset[str] = ANSWER_TOOLS
"""Tools that are one gateway search request each (compared one to one with the call log)."""

Observer = Callable[[str, dict[str, Any]], str | None]
"""``(tool name, arguments) -> observation text`` (the tool message content), or None when it cannot tell."""


@dataclass(frozen=True, slots=True)
class RealCall:
    """One tool call exactly as it happened: the call id, the name, the argument JSON string and the observation
    (the tool message content) — all verbatim from the trace (or from the call log + observer)."""

    id: str
    name: str
    arguments: str
    observation: str

    def args(self) -> dict[str, Any]:
        """The decoded arguments ({} when they are not a JSON object)."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def result(self) -> Any:
        """The decoded observation (JSON when it parses, else the text)."""
        return decode_content(self.observation)


@dataclass(frozen=True, slots=True)
class RewritePlan:
    """Everything the rewritten trace is built from; only the reasoning between the calls is left to write."""

    head: list[dict[str, Any]]
    """The leading system turn (when the trace has one) and the user turn, verbatim."""
    query: str
    calls: list[RealCall]
    """The non-final calls, in order."""
    recommend: RealCall
    recommended_ids: list[str]
    terminate: RealCall | None
    """None when the trace's tools have no ``terminate``."""
    tools: list[dict[str, Any]]
    """Nested OpenAI specs of the toolset the calls belong to."""
    calls_from: str
    """``trace`` or ``call_log``."""

    def steps(self) -> list[RealCall]:
        """Every call of the rewritten trace, in order: the searches, the recommendation, the terminate."""
        return [*self.calls, self.recommend, *([self.terminate] if self.terminate else [])]


def _reject(t: Trajectory, reason: str, message: str) -> Rejection:
    return Rejection(stage=STAGE, reason=reason, message=message, where=t.traj_id, traj_id=t.traj_id)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else dumps(content)


def _call_id(name: str, arguments: str, seq: int) -> str:
    return "call_" + hashlib.sha256(f"{seq}\x1f{name}\x1f{arguments}".encode()).hexdigest()[:12]


def result_ids(observation: Any) -> list[str] | None:
    """The ``product_id`` of each item of a list observation, in order; None when it is not such a list."""
    if not isinstance(observation, list) or not all(isinstance(p, dict) for p in observation):
        return None
    return [str(p.get("product_id")) for p in observation]


def _trace_calls(messages: list[dict[str, Any]]) -> tuple[list[RealCall], list[str]]:
    """Every assistant tool call paired with the tool message that answers it; plus the names of unanswered ones."""
    pending: list[tuple[int, dict[str, Any]]] = []
    answered: dict[int, str] = {}
    order: list[tuple[int, dict[str, Any]]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                if isinstance(call, dict):
                    key = len(order)
                    order.append((key, call))
                    pending.append((key, call))
        elif role == "tool":
            cid = m.get("tool_call_id")
            for i, (key, call) in enumerate(pending):
                if call.get("id") == cid or (not cid and i == 0):
                    answered[key] = _text(m.get("content"))
                    del pending[i]
                    break
    calls, missing = [], []
    for key, call in order:
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        name = str(fn.get("name") or "")
        args = fn.get("arguments")
        args_s = args if isinstance(args, str) else dumps(args if args is not None else {})
        if key not in answered:
            missing.append(name or "?")
            continue
        calls.append(RealCall(id=str(call.get("id") or _call_id(name, args_s, key)), name=name, arguments=args_s,
                              observation=answered[key]))
    return calls, missing


def _log_searches(t: Trajectory) -> list[dict[str, Any]]:
    """The call log's own search requests (not those a composite tool issued), in ``seq`` order."""
    out = [r for r in (t.call_log or ()) if isinstance(r, dict) and r.get("kind") == "search" and not r.get("via")]
    return sorted(out, key=lambda r: r.get("seq") if isinstance(r.get("seq"), int) else 0)


def _tool_name(record: dict[str, Any]) -> str:
    return str(record.get("path") or "").rstrip("/").rsplit("/", 1)[-1]


def _as_query(args: dict[str, Any]) -> dict[str, str]:
    """Arguments as the gateway logs them: query-string values (strings), absent values dropped."""
    return {str(k): (v if isinstance(v, str) else json.dumps(v) if isinstance(v, bool) else str(v))
            for k, v in args.items() if v is not None}


def _check_log(t: Trajectory, calls: list[RealCall]) -> str | None:
    """Why the trace's search calls disagree with the call log, or None when they agree."""
    logged = [r for r in _log_searches(t) if _tool_name(r) in SEARCH_TOOLS]
    traced = [c for c in calls if c.name in SEARCH_TOOLS]
    if len(logged) != len(traced):
        return f"the trace has {len(traced)} search calls, the call log {len(logged)}"
    for i, (c, r) in enumerate(zip(traced, logged, strict=True)):
        if c.name != _tool_name(r) or _as_query(c.args()) != _as_query(r.get("params") or {}):
            return f"search call {i + 1}: trace {c.name} {c.arguments} ≠ log {_tool_name(r)} {r.get('params')}"
        ids = result_ids(c.result())
        if r.get("status") == 200 and ids is not None and r.get("result_product_ids") is not None \
                and ids != [str(x) for x in r["result_product_ids"]]:
            return f"search call {i + 1} ({c.name}): observed ids differ from the call log's result ids"
    return None


def _toolset_for(t: Trajectory, names: set[str]) -> tuple[list[dict[str, Any]], frozenset[str]] | None:
    if t.tools:
        specs = normalize_tool_specs(t.tools)
        have = frozenset(str(s["function"].get("name")) for s in specs)
        if names <= have:
            return specs, have
    for profile in ("upstream4", "oro7"):
        if names <= set(PROFILES[profile]):
            ts = get_toolset(profile)
            return ts.specs(), ts.names
    return None


def _execute(name: str, args: dict[str, Any], profile: str = "upstream4") -> str:
    """A final tool's real observation (recommend_product / terminate need no catalog)."""
    return _text(get_toolset(profile).execute(name, args, ToolContext(None)))


def plan_rewrite(t: Trajectory, *, observe: Observer | None = None, verify_call_log: bool = True
                 ) -> RewritePlan | Rejection:
    """The :class:`RewritePlan` of an axis-B (or mixed) row, or why it cannot be rewritten (module docstring)."""
    if t.axis not in ("B", "mixed"):
        return _reject(t, "not_axis_b", f"axis {t.axis!r}: only axis-B (or mixed) traces are rewritten")
    messages = [m for m in t.messages if isinstance(m, dict)]
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None or not isinstance(messages[first_user].get("content"), str):
        return _reject(t, "no_query", "the trace has no user turn with a text query")
    head = [{k: v for k, v in m.items() if k != "step_meta"} for m in messages[:first_user + 1]
            if m.get("role") in ("system", "user")]
    query = str(messages[first_user]["content"])

    traced, missing = _trace_calls(messages[first_user + 1:])
    if missing:
        return _reject(t, "missing_observation", f"tool call(s) without a tool response: {', '.join(missing)}")
    work = [c for c in traced if c.name not in FINAL_TOOLS]
    calls_from = "trace"
    if work:
        if verify_call_log and _log_searches(t):
            why = _check_log(t, work)
            if why:
                return _reject(t, "call_log_mismatch", why)
    else:
        logged = [r for r in _log_searches(t) if r.get("status") == 200]
        if not logged:
            return _reject(t, "no_calls", "no tool call in the trace and no search in the call log")
        if observe is None:
            return _reject(t, "missing_observation", "the calls are only in the call log, which keeps no "
                                                      "observation text (pass an observer, e.g. catalog_observer)")
        calls_from = "call_log"
        for r in logged:
            name, params = _tool_name(r), dict(r.get("params") or {})
            args_s = dumps(params)
            obs = observe(name, params)
            if obs is None:
                return _reject(t, "missing_observation", f"no observation for the logged {name} {args_s}")
            ids = result_ids(decode_content(obs))
            if r.get("result_product_ids") is not None and ids != [str(x) for x in r["result_product_ids"]]:
                return _reject(t, "call_log_mismatch", f"re-running {name} {args_s} does not give the logged ids")
            work.append(RealCall(id=_call_id(name, args_s, len(work)), name=name, arguments=args_s, observation=obs))

    recs = [c for c in traced if c.name == "recommend_product"]
    if recs:
        recommend = recs[-1]
    else:
        ids_out = (t.outcome or {}).get("recommended_ids")
        if not (isinstance(ids_out, list) and ids_out and all(isinstance(i, str | int) for i in ids_out)):
            return _reject(t, "no_recommendation", "the trace makes no recommend_product call")
        args = {"product_ids": ",".join(str(i) for i in ids_out)}
        args_s = dumps(args)
        recommend = RealCall(id=_call_id("recommend_product", args_s, len(work)), name="recommend_product",
                             arguments=args_s, observation=_execute("recommend_product", args))
    try:
        raw = json.loads(recommend.arguments)
        ids_s = arg_ids(raw) if isinstance(raw, dict) else None
    except (ValueError, ArgError):
        ids_s = None
    rec_ids = [i.strip() for i in (ids_s or "").split(",") if i.strip()]
    if not rec_ids:
        return _reject(t, "bad_recommendation", f"recommend_product arguments carry no ids: {recommend.arguments}")
    seen = {str(p) for c in work for p in _observed_ids(c)}
    unseen = [i for i in rec_ids if i not in seen]
    if unseen:
        return _reject(t, "recommend_unseen", f"recommended id(s) never observed: {', '.join(unseen)}")

    names = {c.name for c in work} | {"recommend_product"}
    found = _toolset_for(t, names)
    if found is None:
        return _reject(t, "unknown_tools", f"no toolset holds every tool called: {sorted(names)}")
    tools, have = found
    terminate = None
    if "terminate" in have:
        terms = [c for c in traced if c.name == "terminate"]
        if terms:
            terminate = terms[-1]
        else:
            args_s = dumps({"status": "success"})
            terminate = RealCall(id=_call_id("terminate", args_s, len(work) + 1), name="terminate", arguments=args_s,
                                 observation=_execute("terminate", {"status": "success"}))
    return RewritePlan(head=head, query=query, calls=work, recommend=recommend, recommended_ids=rec_ids,
                       terminate=terminate, tools=tools, calls_from=calls_from)


def _observed_ids(call: RealCall) -> list[str]:
    result = call.result()
    items = result if isinstance(result, list) else [result]
    return [str(p["product_id"]) for p in items if isinstance(p, dict) and p.get("product_id") is not None]


def catalog_observer(catalog: str | Path, *, profile: str = "upstream4", flavor: str = "oro") -> Observer:
    """An :data:`Observer` that re-runs a call against a catalog directory (what the gateway searched; the
    validator serves the ``oro`` flavour). Only for rows whose calls live in the call log alone; the plan checks
    the ids it gives against the log's ``result_product_ids``."""
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService

    toolset: Toolset = get_toolset(profile)
    ctx = ToolContext(SearchService(SearchIndex.open(index_path(catalog)), flavor=flavor))  # type: ignore[arg-type]

    def observe(name: str, args: dict[str, Any]) -> str | None:
        if name not in toolset.names:
            return None
        return _text(toolset.execute(name, args, ctx))

    return observe
