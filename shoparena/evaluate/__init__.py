"""Held-out evaluation: several models through the evaluation core, figures with bootstrap intervals, what
happened in the episodes, paired comparisons against a baseline, and the Table-1 report
(:mod:`shoparena.evaluate.report`)."""

from shoparena.evaluate.core import (
    FORMAT,
    EvalConfig,
    ModelEntry,
    comparison_pairs,
    evaluate_models,
    parse_models,
    partition_problems,
    per_bucket,
    split_problems,
    summarise,
)
from shoparena.evaluate.diagnostics import is_think_then_stop, run_diagnostics
from shoparena.evaluate.judging import JudgeEntry, judge_run, judge_summary, parse_judges

__all__ = [
    "FORMAT", "EvalConfig", "JudgeEntry", "ModelEntry", "comparison_pairs", "evaluate_models", "is_think_then_stop",
    "judge_run", "judge_summary", "parse_judges", "parse_models", "partition_problems", "per_bucket",
    "run_diagnostics", "split_problems", "summarise",
]
