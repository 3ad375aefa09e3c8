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

__all__ = ["FORMAT", "EvalConfig", "ModelEntry", "evaluate_models", "parse_models", "per_bucket", "split_problems", "summarise"]
