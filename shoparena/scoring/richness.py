"""Agentic richness of one trajectory: how much of the work the LLM itself chose (paper §9, ``docs/incentives.md``).

A pure function of what a validator stores: the gateway's call log (ground truth of who issued every search and
which tool calls each completion emitted) and the trace (the step records the agent returned). Nothing the agent
*writes* about itself counts: a Python pipeline that logs its searches as assistant tool calls gets 0 on every
component, because no completion in the call log emitted them.

Components, each in [0, 1] (``S`` = searches the gateway answered 200; ``E`` = tool calls the model emitted, i.e.
the ``tool_calls`` of inference records answered 200, in log order):

- ``emitted`` (e)  = |{s ∈ S : axis(s) = A}| / |S|; 0 when there is no search. The axis-A share of the searches.
- ``reformulation`` (r) = min(1, (Q − 1) / 2), Q = distinct model-emitted catalog queries: the ``(q, price,
  service, shop_id)`` of the axis-A ``find_product`` searches (lower-cased, whitespace-collapsed). 0 for Q ≤ 1.
- ``verification`` (v) = min(1, V / 2), V = emitted calls that inspect or check a candidate before the
  recommendation: ``view_product_information``, ``check_product_match``, ``calculate_voucher``.
- ``tools`` (t)  = min(1, T / 3), T = distinct *working* tools emitted (every tool but ``recommend_product`` and
  ``terminate``, which every trajectory ends with).
- ``depth`` (d)  = min(1, D / 4), D = trace steps that are model decisions: steps whose tool-call names are exactly
  the names one emitted completion asked for (aligned in order, each completion used once), not counting steps
  that only recommend or terminate.

``richness = 0.4·e + 0.15·r + 0.15·v + 0.15·t + 0.15·d`` (rounded to 4 places). The caps (2, 2, 3, 4) are where an
ordinary careful agentic episode saturates: more calls beyond them earn nothing, so padding a trace does not pay.
Worked examples are in ``tests/scoring/test_richness.py`` and ``docs/incentives.md``.

The arena's scoring option (:func:`fold`) with weight ``W`` ∈ [0, 1]::

    final_W = round(success_rate · coeff(q) · ((1 − W) + W · R̄), 4)

where ``R̄`` is the mean richness of the run's *successful* trajectories (0 when none succeeded): a share ``W`` of
what a successful trajectory earns depends on whether the LLM chose the calls, and a rich trajectory that fails
earns nothing. ``W = 0`` is ORO's ``final = round(success_rate · coeff(q), 4)`` exactly (the same expression). A
pipeline with ``W > 0`` is named in the records' pipeline version by :func:`scorer_id`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["CAPS", "MAX_WEIGHT", "VERIFY_TOOLS", "WEIGHTS", "Richness", "check_weight", "fold", "mean_richness",
           "richness", "richness_of_record", "scorer_id"]

WEIGHTS: dict[str, float] = {"emitted": 0.4, "reformulation": 0.15, "verification": 0.15, "tools": 0.15,
                             "depth": 0.15}
"""Weights of the components in the total (they sum to 1)."""
CAPS: dict[str, int] = {"reformulation": 2, "verification": 2, "tools": 3, "depth": 4}
"""Counts at which a component reaches 1."""
VERIFY_TOOLS = frozenset({"view_product_information", "check_product_match", "calculate_voucher"})
TERMINAL_TOOLS = frozenset({"recommend_product", "terminate"})
_QUERY_KEYS = ("q", "price", "service", "shop_id")
_SPACE = re.compile(r"\s+")


class Richness(BaseModel):
    """One trajectory's richness: the total and its components with the counts behind them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float
    """``Σ WEIGHTS[c]·component[c]`` in [0, 1], rounded to 4 places."""
    emitted: float
    reformulation: float
    verification: float
    tools: float
    depth: float
    searches: int
    """Searches answered 200 (|S|)."""
    searches_a: int
    """Of those, emitted by the model (axis A)."""
    queries: int
    """Distinct model-emitted catalog queries (Q)."""
    verifications: int
    """Emitted verification calls (V)."""
    distinct_tools: int
    """Distinct working tools emitted (T)."""
    decisions: int
    """Trace steps that are model decisions (D)."""


def _emitted(calls: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Per inference completion answered 200 that emitted tool calls: their names, in log order."""
    out: list[list[str]] = []
    for c in sorted(calls, key=lambda c: int(c.get("seq") or 0)):
        if c.get("kind") != "inference" or c.get("status") != 200:
            continue
        names = [str(tc.get("name") or "") for tc in (c.get("tool_calls") or []) if isinstance(tc, Mapping)]
        if names:
            out.append(names)
    return out


def _step_names(step: Mapping[str, Any]) -> list[str]:
    completion = step.get("completion") if isinstance(step, Mapping) else None
    message = completion.get("message") if isinstance(completion, Mapping) else None
    calls = message.get("tool_call") if isinstance(message, Mapping) else None
    return [str(c.get("name") or "") for c in (calls or []) if isinstance(c, Mapping)]


def _query(params: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(_SPACE.sub(" ", str(params.get(k) or "")).strip().lower() for k in _QUERY_KEYS)


def _decisions(steps: Sequence[Mapping[str, Any]], completions: list[list[str]]) -> int:
    """Steps matched, in order, to an emitted completion with the same tool names (greedy: each step looks ahead
    for the next unused completion with its names), not counting recommend/terminate-only steps."""
    n, j = 0, 0
    for step in steps:
        names = _step_names(step)
        if not names:
            continue
        k = next((i for i in range(j, len(completions)) if completions[i] == names), None)
        if k is None:
            continue
        j = k + 1
        if not set(names) <= TERMINAL_TOOLS:
            n += 1
    return n


def richness(calls: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]] = ()) -> Richness:
    """The richness of one trajectory from its gateway call log (``CallRecord`` dumps) and its trace (module
    docstring for the formula)."""
    searches = [c for c in calls if c.get("kind") == "search" and c.get("status") == 200]
    agentic = [c for c in searches if c.get("axis") == "A"]
    queries = {_query(c.get("params") or {}) for c in agentic if str(c.get("path", "")).endswith("/find_product")}
    completions = _emitted(calls)
    names = [n for names in completions for n in names]
    verifications = sum(1 for n in names if n in VERIFY_TOOLS)
    tools = {n for n in names if n and n not in TERMINAL_TOOLS}
    decisions = _decisions(steps, completions)
    comp = {
        "emitted": len(agentic) / len(searches) if searches else 0.0,
        "reformulation": min(1.0, max(0, len(queries) - 1) / CAPS["reformulation"]),
        "verification": min(1.0, verifications / CAPS["verification"]),
        "tools": min(1.0, len(tools) / CAPS["tools"]),
        "depth": min(1.0, decisions / CAPS["depth"]),
    }
    score = round(sum(WEIGHTS[k] * v for k, v in comp.items()), 4)
    return Richness(score=score, **{k: round(v, 4) for k, v in comp.items()}, searches=len(searches),
                    searches_a=len(agentic), queries=len(queries), verifications=verifications,
                    distinct_tools=len(tools), decisions=decisions)


def richness_of_record(record: Any) -> Richness:
    """The richness of a stored trajectory record (anything with ``call_log`` and ``steps``: a
    :class:`~shoparena.store.types.TrajectoryRecord` or its JSON body)."""
    if isinstance(record, Mapping):
        return richness(record.get("call_log") or [], record.get("steps") or [])
    return richness(record.call_log, record.steps)


def mean_richness(values: Sequence[float]) -> float | None:
    """The mean of per-trajectory richness scores (None for none), rounded to 4 places."""
    return round(sum(values) / len(values), 4) if values else None


MAX_WEIGHT = 1.0


def check_weight(weight: float) -> float:
    """``weight`` if it is a finite number in [0, 1]; ValueError otherwise (the one range check of the option)."""
    w = float(weight)
    if not 0.0 <= w <= MAX_WEIGHT:  # also refuses NaN
        raise ValueError(f"richness weight must be in [0, {MAX_WEIGHT:g}], got {weight!r}")
    return w


def fold(success_rate: float, coeff: float | None, successful_richness: Sequence[float], weight: float
         ) -> float | None:
    """The run's final score under richness weight ``weight`` (module docstring): ``coeff`` is the run's reasoning
    coefficient (None when nothing was judged: the result is None, as ORO's), ``successful_richness`` the richness
    of each successful trajectory. At weight 0 this is ``round(success_rate · coeff, 4)``, ORO's final score.

    With nothing judged and nothing successful (every problem failed or timed out before the judge), the score is
    0.0: ``0 · coeff`` is 0 for every coefficient in [0.3, 1], so an unknown q changes nothing."""
    if coeff is None:
        return 0.0 if success_rate == 0 else None
    w = check_weight(weight)
    if w == 0:
        return round(success_rate * coeff, 4)
    r = sum(successful_richness) / len(successful_richness) if successful_richness else 0.0
    return round(success_rate * coeff * ((1.0 - w) + w * r), 4)


def scorer_id(base: str, weight: float) -> str:
    """The pipeline's scorer id: ``base`` unchanged at weight 0 (today's pipeline version, byte for byte), else
    ``base+richness=<W>`` so records scored under another incentive never share a pipeline version."""
    w = check_weight(weight)
    return base if w == 0 else f"{base}+richness={w:g}"
