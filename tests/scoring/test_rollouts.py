"""Rollout files (docs/shoppingbench.md §6.1, §6.2, §7.5): both formats, bad lines, the 501-line quirk, the join."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import NotFoundError
from shoparena.scoring.rollouts import RolloutLoadReport, load_rollouts, match_rollouts, parse_rollout
from shoparena.scoring.types import UPSTREAM_MAX_ROLLOUT_LINES, ParityFlags
from shoparena.tasks.types import Problem
from tests.scoring._scoring_helpers import recommend, terminate


def write(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
                    encoding="utf-8")
    return path


def trajectory(query: str | None = None, problem_id: str | None = None, ids: str = "1") -> list[dict]:
    return [recommend(ids, query=query, problem_id=problem_id), terminate(query=query, problem_id=problem_id)]


def test_reads_step_lists_and_envelopes_shoppingbench_6_1_6_2(tmp_path: Path) -> None:
    env = {"problem_id": "P9", "status": "FAILED", "error": {"type": "Crash", "message": "boom"},
           "dialogue": trajectory("q1")}
    path = write(tmp_path / "r.jsonl", [trajectory("q0"), env, {"problem_id": "P8", "status": "TIMED_OUT",
                                                                 "dialogue": None}])
    report = RolloutLoadReport()
    rs = load_rollouts(path, report)
    assert [r.kind for r in rs] == ["steps", "envelope", "envelope"]
    assert rs[0].query == "q0" and rs[0].problem_id is None and rs[0].line == 1
    assert (rs[1].problem_id, rs[1].status, rs[1].error, rs[1].query) == ("P9", "FAILED", "Crash: boom", "q1")
    assert rs[2].steps == [] and rs[2].status == "TIMED_OUT"
    assert (report.lines_read, report.records, report.malformed) == (3, 3, [])


def test_malformed_lines_counted_with_line_numbers_never_raise_shoppingbench_7_5(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [
        trajectory("q0"),            # 1 ok
        "{not json",                 # 2
        "42",                        # 3 wrong type
        "",                          # 4 blank: skipped silently
        "[1, 2]",                    # 5 steps that are not objects
        {"dialogue": "x"},           # 6 dialogue neither list nor null
        trajectory("q1"),            # 7 ok
    ])
    report = RolloutLoadReport()
    rs = load_rollouts(path, report)
    assert [r.line for r in rs] == [1, 7]
    assert [n for n, _ in report.malformed] == [2, 3, 5, 6]
    assert report.lines_read == 6 and report.records == 2
    assert "invalid JSON" in report.malformed[0][1]


def test_invalid_utf8_line_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(json.dumps(trajectory("q0")).encode() + b"\n\xff\xfe[]\n")
    report = RolloutLoadReport()
    assert len(load_rollouts(path, report)) == 1
    assert [n for n, _ in report.malformed] == [2]


def test_max_lines_reproduces_upstream_501_limit_shoppingbench_9_4(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [trajectory(f"q{i}") for i in range(503)])
    assert len(load_rollouts(path)) == 503  # fixed by default
    report = RolloutLoadReport()
    rs = load_rollouts(path, report, max_lines=ParityFlags.exact().max_rollout_lines)
    assert len(rs) == UPSTREAM_MAX_ROLLOUT_LINES == 501
    assert report.truncated_at == 502


def test_gzip_and_missing_file(tmp_path: Path) -> None:
    gz = tmp_path / "r.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(trajectory("q0")) + "\n")
    assert len(load_rollouts(gz)) == 1
    with pytest.raises(NotFoundError):
        load_rollouts(tmp_path / "missing.jsonl")


def test_parse_rollout_rejects_other_shapes() -> None:
    with pytest.raises(ValueError):
        parse_rollout("text")
    assert parse_rollout([]).steps == []


def _problems() -> list[Problem]:
    return [Problem(problem_id=f"P{i}", bucket="knowledge", query=f"query {i}") for i in range(3)]


def test_join_by_problem_id_then_exact_query_shoppingbench_3_6() -> None:
    rs = [
        parse_rollout({"problem_id": "P0", "status": "SUCCESS", "dialogue": trajectory("other text")}, 1),
        parse_rollout(trajectory(problem_id="P1"), 2),                  # extra_info.problem_id
        parse_rollout(trajectory("query 2"), 3),                        # exact query
        parse_rollout(trajectory("query 2 "), 4),                       # not exact: unmatched
        parse_rollout({"problem_id": "zzz", "dialogue": trajectory("query 1")}, 5),  # unknown id → query
        parse_rollout([], 6),
    ]
    report = RolloutLoadReport()
    matched = match_rollouts(_problems(), rs, report)
    assert {k: [r.line for r in v] for k, v in matched.items()} == {"P0": [1], "P1": [2, 5], "P2": [3]}
    assert report.unmatched == [4, 6]
    assert (report.matched_by_id, report.matched_by_query) == (2, 2)


def test_duplicate_rollouts_kept_as_samples_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [trajectory("query 0", ids=str(i)) for i in range(3)])
    matched = match_rollouts(_problems(), load_rollouts(path))
    assert [r.line for r in matched["P0"]] == [1, 2, 3]
