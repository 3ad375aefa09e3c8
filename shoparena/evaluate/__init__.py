"""Held-out evaluation: several models through the evaluation core, figures with bootstrap intervals, paired
comparisons, and the Table-1 report."""

from shoparena.evaluate.core import (
    FORMAT,
    EvalConfig,
    ModelEntry,
    evaluate_models,
    parse_models,
    per_bucket,
    split_problems,
    summarise,
)
from shoparena.evaluate.judging import JudgeEntry, judge_run, judge_summary, parse_judges

__all__ = [
    "FORMAT", "EvalConfig", "JudgeEntry", "ModelEntry", "evaluate_models", "judge_run", "judge_summary",
    "parse_judges", "parse_models", "per_bucket", "split_problems", "summarise",
]
