"""The per-step teacher tool-match reward of stage 5 (``docs/training.md`` §3.1) and its blend with the outcome.

Pure functions, no torch, no TRL: :func:`tool_match` scores one predicted step's tool calls against the teacher's
calls of the same step, :func:`mean_step_match` averages it over an episode aligned to the teacher trajectory,
:func:`blended_reward` mixes the episode's outcome with that mean, and :func:`penalised_reward` takes the stop
penalty off an episode that never called ``recommend_product``.

Semantics follow upstream ShoppingBench's ToolRL correctness reward
(``src/rl/verl/utils/reward_score/shoppingbench_toolrl.py``), rescaled from [−3, 3] to [0, 1]
(``(correctness + 3) / 6``):

- exact equality of the two parsed call lists (names and argument values, in order) → 1.0;
- otherwise ``score / (1 + Σ_teacher (1 + #params))`` where ``score`` = frequency-aware Jaccard of the two name
  lists (:func:`match_score`) + for each teacher call, the best *unused* predicted call of the same name's
  (Jaccard of the argument key lists + Σ over the teacher's arguments of :func:`value_match`);
- unparseable prediction (``pred_calls is None`` or a call whose arguments are not a JSON object) → 0.0
  (correctness −3);
- a teacher step without a tool call → :data:`NEUTRAL` = 0.5 (correctness 0, upstream's "no reference call"),
  whatever the prediction.

Values: strings compare as token lists split on commas and whitespace (frequency-aware Jaccard of the two lists, so
``"a,b"`` vs ``"b, a"`` is 1.0 and ``"a,b"`` vs ``"a"`` is 0.5); integers need exact equality with an integer
(``True`` is not ``1``); anything else (floats, lists, objects) needs exact equality.

Callless turns in an episode (a predicted step ``[]``: a think or text turn with no tool call, no call attempted) are
the shape a policy learns when it states its decision in its reasoning and ends the turn without making the call
("think-then-stop"). Aligned by position they are not neutral: such a turn takes the teacher's step at its position
(:data:`NEUTRAL` where that teacher step made no call) and pushes every later turn one teacher step on, which can
line a later ``recommend_product`` up with the teacher's. :func:`mean_step_match` with ``callless="skipped"`` scores
each callless turn 0 and leaves it out of the alignment while it still counts as a turn, so adding one can only lower
the match. :func:`penalised_reward` is the other half of that guard: an episode that ends without a
``recommend_product`` call (it stopped, ran out of turns or tokens, or terminated) loses a fixed penalty.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from shoparena.errors import ConfigError

__all__ = ["CALLLESS", "NEUTRAL", "Callless", "blended_reward", "check_callless", "check_stop_penalty", "match_score",
           "mean_step_match", "normalize_calls", "penalised_reward", "tool_match", "value_match"]

NEUTRAL = 0.5
"""The score of a step whose teacher made no tool call (correctness 0 on the [−3, 3] scale)."""

Callless = Literal["skipped", "aligned"]
CALLLESS: tuple[str, ...] = get_args(Callless)
"""How :func:`mean_step_match` treats callless turns (module docstring): ``skipped`` — scored 0, out of the
alignment; ``aligned`` — compared by position like any other turn."""


def check_callless(callless: str) -> None:
    """A :class:`ConfigError` unless ``callless`` is one of :data:`CALLLESS`."""
    if callless not in CALLLESS:
        raise ConfigError(f"callless={callless!r} is not one of {', '.join(CALLLESS)}",
                          hint="skipped: a turn without a tool call scores 0 and takes no teacher step")


def check_stop_penalty(stop_penalty: float) -> None:
    """A :class:`ConfigError` unless the stop penalty lies in [0, 1]."""
    if not 0.0 <= stop_penalty <= 1.0:
        raise ConfigError(f"stop penalty {stop_penalty} is outside [0, 1]", hint="the recipe uses 0.5")


_SPLIT = re.compile(r"[,\s]+")


class _Unparseable(ValueError):
    pass


def match_score(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Frequency-aware Jaccard of two lists: equal lists → 1, either empty (not both) → 0, else
    ``|a ∩ b| / (|a| + |b| − |a ∩ b|)`` with multiset intersection."""
    if list(a) == list(b):
        return 1.0
    if not a or not b:
        return 0.0
    ca, cb = Counter(a), Counter(b)
    inter = sum(min(ca[k], cb[k]) for k in ca.keys() & cb.keys())
    return inter / (len(a) + len(b) - inter)


def _tokens(value: str) -> list[str]:
    return [t for t in _SPLIT.split(value) if t]


def value_match(teacher: Any, pred: Any) -> float:
    """How well one predicted argument value matches the teacher's, in [0, 1] (module docstring)."""
    if isinstance(teacher, str):
        return match_score(_tokens(teacher), _tokens(pred)) if isinstance(pred, str) else 0.0
    if isinstance(teacher, bool) or isinstance(pred, bool):
        return 1.0 if type(teacher) is type(pred) and teacher == pred else 0.0
    if isinstance(teacher, int):
        return 1.0 if isinstance(pred, int) and pred == teacher else 0.0
    return 1.0 if pred == teacher else 0.0


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = call.get("arguments", call.get("parameters", {}))
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise _Unparseable(str(exc)) from None
    if not isinstance(raw, Mapping):
        raise _Unparseable("arguments are not an object")
    return dict(raw)


def normalize_calls(calls: Sequence[Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, arguments)]`` from calls given as ``{"name", "arguments"}`` (dict or JSON string),
    ``{"name", "parameters"}``, OpenAI ``{"function": {...}}`` or objects with ``.name`` / ``.arguments``.
    Raises ``ValueError`` for a call that cannot be read (an unparseable prediction)."""
    out = []
    for call in calls:
        if not isinstance(call, Mapping):
            call = {"name": getattr(call, "name", None), "arguments": getattr(call, "arguments", None)}
        fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise _Unparseable("a call without a name")
        out.append((name, _arguments(fn)))
    return out


def tool_match(pred_calls: Sequence[Any] | None, teacher_calls: Sequence[Any]) -> float:
    """The per-step tool-match reward in [0, 1] (module docstring; ``docs/training.md`` §3.1). ``pred_calls=None``
    means the model's output could not be parsed."""
    teacher = normalize_calls(teacher_calls)
    if not teacher:
        return NEUTRAL
    if pred_calls is None:
        return 0.0
    try:
        pred = normalize_calls(pred_calls)
    except ValueError:
        return 0.0
    if pred == teacher:
        return 1.0
    score = match_score([n for n, _ in teacher], [n for n, _ in pred])
    max_score = 1.0
    used: set[int] = set()
    for name, params in teacher:
        max_score += 1.0 + len(params)
        best, best_i = 0.0, -1
        for i, (p_name, p_params) in enumerate(pred):
            if i in used or p_name != name:
                continue
            s = match_score(list(params), list(p_params))
            s += sum(value_match(v, p_params[k]) for k, v in params.items() if k in p_params)
            if s > best:
                best, best_i = s, i
        if best_i >= 0:
            used.add(best_i)
            score += best
    return score / max_score


def mean_step_match(pred_steps: Sequence[Sequence[Any] | None], teacher_steps: Sequence[Sequence[Any]],
                    callless: Callless = "aligned") -> float:
    """:func:`tool_match` averaged over an episode, aligned **by position**: the episode's i-th assistant turn is
    compared with the teacher's i-th turn. The mean runs over ``max(len(pred_steps), len(teacher_steps))``
    positions: a turn the episode did not take (shorter than the teacher) and a turn beyond the teacher's last
    (longer than the teacher) both score 0, so wandering and stopping early cost the same. No steps on either side
    → 0.

    ``callless="skipped"``: the episode's callless turns (``[]``; an unparseable turn, ``None``, is an attempted
    call and stays aligned) score 0 and are taken out before aligning, while the mean still runs over all the
    episode's turns, so a callless turn never raises the match (module docstring). An episode without callless
    turns gets the same float either way."""
    check_callless(callless)
    n = max(len(pred_steps), len(teacher_steps))
    if n == 0:
        return 0.0
    if callless == "skipped":
        pred_steps = [s for s in pred_steps if s is None or len(s) > 0]
    total = sum(tool_match(pred_steps[i], teacher_steps[i])
                for i in range(min(len(pred_steps), len(teacher_steps))))
    return total / n


def blended_reward(outcome: float, match: float, w: float = 0.5) -> float:
    """Stage 5's reward ``(1 − w)·outcome + w·match`` (``docs/training.md`` §3, w = 0.5 in the recipe)."""
    if not 0.0 <= w <= 1.0:
        raise ConfigError(f"blend weight w={w} is outside [0, 1]", hint="the recipe uses w = 0.5")
    return (1.0 - w) * outcome + w * match


def penalised_reward(reward: float, called_recommend: bool, stop_penalty: float) -> float:
    """An episode's reward after the stop penalty: ``reward − stop_penalty`` when the episode never called
    ``recommend_product`` (module docstring), else ``reward``; a penalty of 0 returns ``reward`` itself."""
    check_stop_penalty(stop_penalty)
    if called_recommend or stop_penalty == 0.0:
        return reward
    return reward - stop_penalty
