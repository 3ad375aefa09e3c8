"""Retrieval against choice (:mod:`shoparena.evaluate.choice`): exact counts from hand-written run files, and the
figures an evaluation stores beside its ASR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.errors import DataError
from shoparena.evaluate.choice import choice_summary
from shoparena.tasks.types import Problem, RewardItem
from shoparena.validator.run import read_run_file


def _problem(pid: str, *gt: str) -> Problem:
    return Problem(problem_id=pid, bucket="product", query="a mug",
                   reward=[RewardItem(product_id=g, title=[f"mug {g}"]) for g in gt])


def _write(d: Path, scores: list[dict], calls: list[dict]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores))
    (d / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return d


def _summary(d: Path, problems: list[Problem]) -> dict | None:
    """As :func:`shoparena.evaluate.core.summarise` calls it: the score rows it read, the run's call log."""
    return choice_summary(read_run_file(d / "scores.jsonl"), d / "calls.jsonl", problems)


def _search(pid: str, sample: int, ids: list[str], kind: str = "search") -> dict:
    return {"kind": kind, "problem_id": pid, "sample": sample, "result_product_ids": ids}


def test_counts_follow_each_episodes_own_searches(tmp_path: Path) -> None:
    problems = [_problem("p1", "g1"), _problem("p2", "g2", "g3")]
    scores = [
        {"problem_id": "p1", "sample": 0, "recommended_ids": ["g1"]},          # retrieved and chosen
        {"problem_id": "p1", "sample": 1, "recommended_ids": ["x"]},           # retrieved, passed over
        {"problem_id": "p2", "sample": 0, "recommended_ids": []},              # retrieved, nothing recommended
        {"problem_id": "p2", "sample": 1, "recommended_ids": ["g3"]},          # chosen without being retrieved
        {"problem_id": "other", "sample": 0, "recommended_ids": ["g1"]},       # not in the problem set
    ]
    calls = [_search("p1", 0, ["x", "g1"]), _search("p1", 1, ["g1"]), _search("p2", 0, ["y", "g2"]),
             _search("p2", 1, ["g1"]),                                         # another problem's answer
             {"kind": "inference", "problem_id": "p2", "sample": 1, "result_product_ids": None},
             _search("p2", 1, ["g2"], kind="other")]                           # refused paths do not count
    got = _summary(_write(tmp_path / "run", scores, calls), problems)
    assert got == {"episodes": 4, "recommended": 3, "retrieved": 3, "chosen": 2, "passed_over": 1,
                   "rates": {"recommended": 0.75, "retrieved": 0.75, "chosen": 0.5, "passed_over": 0.25}}


def test_no_call_log_no_figures_and_bad_files_refused(tmp_path: Path) -> None:
    problems = [_problem("p1", "g1")]
    d = tmp_path / "run"
    d.mkdir()
    (d / "scores.jsonl").write_text(json.dumps({"problem_id": "p1", "sample": 0, "recommended_ids": []}) + "\n")
    assert _summary(d, problems) is None
    (d / "calls.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match=r"calls\.jsonl"):
        _summary(d, problems)
    (d / "calls.jsonl").write_text("[]\n")
    with pytest.raises(DataError, match="not a JSON object"):
        _summary(d, problems)
    _write(d, [{"problem_id": "p1", "sample": 0, "recommended_ids": "g1"}], [])
    with pytest.raises(DataError, match="not a list"):
        _summary(d, problems)
