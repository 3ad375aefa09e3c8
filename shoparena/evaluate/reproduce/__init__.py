"""Reproduce the paper's tables from nothing with one call, and check a run against the expected figures.

:func:`run_table1` runs the whole pipeline (arena → corpus → base → the recipe's stages → evaluation of base /
stage 1 / the chain's output / the teacher on both held-out partitions → ``results.json`` / ``results.md``) in
resumable steps; :func:`check_results` compares a finished run with the versioned matrix
(``table1.yaml`` beside this module). ``docs/reproduce.md`` describes both.
"""

from shoparena.evaluate.reproduce.matrix import (
    ROLES,
    Condition,
    Deviation,
    Matrix,
    Profile,
    check_results,
    figure_value,
    get_profile,
    load_matrix,
)
from shoparena.evaluate.reproduce.pipeline import (
    STEPS,
    StepRecord,
    Table1Config,
    preflight,
    read_results,
    run_table1,
)
from shoparena.evaluate.reproduce.results import RESULTS_FORMAT, render_results

__all__ = [
    "RESULTS_FORMAT", "ROLES", "STEPS", "Condition", "Deviation", "Matrix", "Profile", "StepRecord", "Table1Config",
    "check_results", "figure_value", "get_profile", "load_matrix", "preflight", "read_results", "render_results",
    "run_table1",
]
