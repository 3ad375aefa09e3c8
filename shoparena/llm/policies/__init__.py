"""Built-in offline policy models, ``policy:<name>``: ``random``, ``novice``, ``careful``, ``expert``.

They read only the conversation (messages + tools, never a problem record or its rewards) and write what a
model would: a ``<think>`` rationale grounded in the observations and tool calls, in the tag protocol or the
native one, with the ``upstream4`` or ``oro7`` tools. ``Sampling.temperature`` drives their choices
(softmax over heuristic scores, probabilistic skipping) and ``Sampling.seed`` makes them repeatable. They also
answer the axis-B sub-task prompts (``shoparena.llm.subtasks``).

Modules: ``parse``/``phrases`` (query understanding), ``state`` (reading both protocols), ``knowledge``
(observations, matching), ``engine``/``flows``/``vouchers`` (the strategies), ``levels`` (what differs per
level), ``decide`` (seeded sampling), ``render`` (replies), ``subtasks``, ``backend`` (the chat backend).

``policy:judge-<style>[-<seed>]`` (``strict``, ``standard``, ``lenient``, ``noisy``) are offline *judge* models
instead: they answer the reasoning judge's prompt with a verdict (``judge.py``), for ``llm:policy:judge-…`` panels.
"""

from __future__ import annotations

from shoparena.errors import ConfigError, closest
from shoparena.llm.policies.backend import PolicyBackend
from shoparena.llm.policies.judge import JudgePolicy, judge_policy_names, parse_name
from shoparena.llm.policies.levels import LEVELS, Skill
from shoparena.llm.policies.parse import Request, VoucherSpec, parse_request

__all__ = ["LEVELS", "JudgePolicy", "PolicyBackend", "Request", "Skill", "VoucherSpec", "get_policy", "parse_request",
           "policy_names"]

_INSTANCES: dict[str, PolicyBackend] = {}


def policy_names() -> list[str]:
    """The registered levels, weakest first."""
    return list(LEVELS)


def get_policy(name: str) -> PolicyBackend | JudgePolicy:
    """The shared backend of level ``name`` (one instance per level, so its replay cache is shared), or the judge
    model a ``judge-<style>[-<seed>]`` name gives."""
    key = name.strip().lower()
    if key.startswith("judge"):
        judge = parse_name(key)
        if judge is not None:
            return judge
    if key not in LEVELS:
        known = list(LEVELS) + judge_policy_names()
        near = closest(key, known)
        raise ConfigError(f"unknown offline policy {name!r}",
                          hint=(f"did you mean policy:{near}? " if near else "") + f"choose one of {known}")
    if key not in _INSTANCES:
        _INSTANCES[key] = PolicyBackend(LEVELS[key])
    return _INSTANCES[key]
