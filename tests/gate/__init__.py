"""Tests of the submission gate. Helpers: the real banks (tests/data) indexed once, and tiny agent builders."""

from __future__ import annotations

import textwrap
from functools import lru_cache
from pathlib import Path

from shoparena.arena.gate import GateReport, PhraseIndex, check_submission
from shoparena.tasks.loader import load_problems
from shoparena.tasks.types import Problem

SAMPLES = Path(__file__).resolve().parent / "samples"
DATA = Path(__file__).resolve().parents[1] / "data"
BANK_DIRS = (DATA / "shoppingbench", DATA / "oro_suites")
BUILTIN_AGENTS = Path(__file__).resolve().parents[2] / "shoparena" / "agents"


@lru_cache(maxsize=1)
def bank_problems() -> tuple[Problem, ...]:
    """Every real problem of the test banks (upstream test files and ORO suites v1–v3)."""
    files = sorted(f for d in BANK_DIRS for f in d.iterdir() if f.suffix in (".jsonl", ".json"))
    return tuple(p for f in files for p in load_problems(f))


@lru_cache(maxsize=1)
def bank_index() -> PhraseIndex:
    return PhraseIndex.from_problems(bank_problems())


def problem(bucket: str, n: int = 0) -> Problem:
    return [p for p in bank_problems() if p.bucket == bucket][n]


def agent(body: str) -> str:
    """A minimal agent file: ``body`` at module level, then ``agent_main``."""
    return textwrap.dedent(body).strip() + "\n\n\ndef agent_main(problem_data):\n    return []\n"


def check(body: str, *, bank: bool = False, **kw: object) -> GateReport:
    return check_submission(agent(body), phrases=bank_index() if bank else None, **kw)


def rules(report: GateReport) -> set[str]:
    return {v.rule for v in report.violations}
