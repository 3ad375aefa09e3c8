"""The reasoning judge (docs/arena.md §7): judges behind one interface, chosen by a spec string.

- ``rubric`` — :class:`RubricJudge`, the deterministic offline judge (the embedded default);
- ``llm:<model-uri>[,<model-uri>…]`` — :class:`LLMJudge` over a pool of chat models (any URI ``get_backend``
  resolves: ``openai:…``, ``hf:…``, ``policy:…``); a bare model URI (``openai:http://…/model``) means the same.

Every judge has ``name``, ``prompt_version`` and ``async judge(query, steps, calls) -> Verdict``; verdicts cite
their evidence as spans of :func:`render_trace`'s text. ``@judge("kind")`` registers another kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoparena.errors import ConfigError
from shoparena.registry import Registry
from shoparena.validator.judge.llm import LLMJudge, LLMJudgeConfig
from shoparena.validator.judge.render import RenderedTrace, render_trace, span_errors
from shoparena.validator.judge.rubric import RubricJudge
from shoparena.validator.judge.types import (
    GATE_SCORES,
    PASS_SCORE,
    SCORES,
    CitedSpan,
    Judge,
    JudgeFailure,
    Verdict,
    coefficient,
    final_score,
    mean_quality,
)

__all__ = [
    "GATE_SCORES", "JUDGES", "PASS_SCORE", "SCORES", "CitedSpan", "Judge", "JudgeFailure", "LLMJudge",
    "LLMJudgeConfig", "RenderedTrace", "RubricJudge", "Verdict", "coefficient", "final_score", "get_judge",
    "judge", "judge_kinds", "mean_quality", "render_trace", "span_errors",
]

JUDGES: Registry[Callable[[str, Any], Judge]] = Registry(
    "judge", error=ConfigError, usage="use rubric, llm:<model-uri>[,<model-uri>…] or a model URI")
"""Judge kind → factory ``(rest_of_spec, config) -> Judge``."""


def judge(kind: str) -> Callable[[Callable[[str, Any], Judge]], Callable[[str, Any], Judge]]:
    """Register a factory ``(rest_of_spec, config) -> Judge`` for specs ``kind`` / ``kind:rest``."""
    return JUDGES.register(kind)


@judge("rubric")
def _rubric(rest: str, config: Any) -> Judge:
    if rest:
        raise ConfigError(f"the rubric judge takes no argument (got {rest!r})", hint="use --judge rubric")
    return RubricJudge()


@judge("llm")
def _llm(rest: str, config: Any) -> Judge:
    models = [m.strip() for m in rest.split(",") if m.strip()]
    if not models:
        raise ConfigError("llm judge without a model", hint="use llm:<model-uri>[,<model-uri>…]")
    return LLMJudge(models, config if isinstance(config, LLMJudgeConfig) else None)


def judge_kinds() -> list[str]:
    return JUDGES.names()


def get_judge(spec: str = "rubric", config: LLMJudgeConfig | None = None) -> Judge:
    """The judge a spec names (module docstring); ``config`` tunes an LLM judge's call policy."""
    kind, sep, rest = spec.strip().partition(":")
    if kind in JUDGES:
        return JUDGES.get(kind)(rest if sep else "", config)
    from shoparena.llm.types import backend_schemes

    if sep and kind in backend_schemes():  # a bare model URI (or several, comma-separated)
        return JUDGES.get("llm")(spec.strip(), config)
    raise JUDGES.unknown(kind, also=backend_schemes(), shown=spec)
