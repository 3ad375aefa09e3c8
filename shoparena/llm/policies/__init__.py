"""Built-in offline policy models, ``policy:<name>``: ``random``, ``novice``, ``careful``, ``expert``.

They read only the conversation (messages + tools, never a problem record or its rewards) and write what a
model would: a ``<think>`` rationale grounded in the observations and tool calls, in the tag protocol or the
native one, with the ``upstream4`` or ``oro7`` tools. ``Sampling.temperature`` drives their choices
(softmax over heuristic scores, probabilistic skipping) and ``Sampling.seed`` makes them repeatable. They also
answer the axis-B sub-task prompts (``shoparena.llm.subtasks``).

Modules: ``parse``/``phrases`` (query understanding), ``state`` (reading both protocols), ``knowledge``
(observations, matching), ``engine``/``flows``/``vouchers`` (the strategies), ``levels`` (what differs per
level), ``decide`` (seeded sampling), ``render`` (replies), ``subtasks``, ``backend`` (the chat backend).

``policy:<name>?view=N`` is the level inspecting at most ``N`` candidates per item in one
``view_product_information`` call (``N`` under the level's own; ``0``: never looks). A teacher whose rows a student
trains on under observation compaction (``compact.max_items``) asks for no more products than the student will see
of the answer, so its view calls stay short enough for the student's turn cap.

``policy:judge-<style>[-<seed>]`` (``strict``, ``standard``, ``lenient``, ``noisy``) are offline *judge* models
instead: they answer the reasoning judge's prompt with a verdict (``judge.py``), for ``llm:policy:judge-…`` panels.
"""

from __future__ import annotations

import dataclasses

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
    key, sep, query = key.partition("?")
    if sep:
        return _with_options(key, query, name)
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


def _with_options(key: str, query: str, name: str) -> PolicyBackend:
    """``<level>?view=N``: the level with its per-item view count lowered to ``N`` (one shared instance per URI)."""
    from urllib.parse import parse_qsl

    base = get_policy(key)
    if not isinstance(base, PolicyBackend):
        raise ConfigError(f"policy:{name}: a judge model takes no options", hint=f"use policy:{key}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ConfigError(f"policy:{name}: malformed options {query!r}", hint="policy:expert?view=2") from None
    options = dict(pairs)
    if len(options) != len(pairs) or set(options) != {"view"}:
        raise ConfigError(f"policy:{name}: unknown or repeated option in {query!r}",
                          hint="the one option is view=N (candidates inspected per item), e.g. policy:expert?view=2")
    raw = options["view"]
    if not (raw.isascii() and raw.isdigit()) or int(raw) > base.skill.view:
        raise ConfigError(f"policy:{name}: view must be a whole number from 0 to {base.skill.view} "
                          f"(policy:{key} inspects at most {base.skill.view}), got {raw!r}")
    view = int(raw)
    canonical = f"{key}?view={view}"
    if canonical not in _INSTANCES:
        skill = dataclasses.replace(base.skill, view=view)
        backend = PolicyBackend(skill)
        backend.name = f"policy:{canonical}"
        _INSTANCES[canonical] = backend
    return _INSTANCES[canonical]
