"""``scripts/stop_turns.py``: what a run's think-then-stop turns open with and which ids their decision names,
read from a call log the way the evaluation's diagnostics read it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.scripts import load_script

stop_turns = load_script("stop_turns")


def _turn(pid: str, sample: int, reasoning: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "inference", "problem_id": pid, "sample": sample, "status": 200, "tool_calls": [],
            "content": "", "reasoning_content": reasoning, "parse_notes": None, "truncated": False, **extra}


def _search(pid: str, sample: int, ids: list[str]) -> dict[str, Any]:
    return {"kind": "search", "problem_id": pid, "sample": sample, "result_product_ids": ids}


def _write(run: Path, calls: list[dict[str, Any]]) -> Path:
    run.mkdir(parents=True)
    (run / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return run


CALLS = [
    _search("p1", 0, ["1234567", "7654321"]),
    _turn("p1", 0, "Recommending 1234567. It matches the price."),                   # a returned id
    _turn("p1", 0, "Recommending 200. 'kettle': 200 kettle.", truncated=True),        # no id, cut
    _turn("p1", 1, "I will recommend 1234567 now."),    # another episode: its searches returned nothing yet
    _search("p1", 1, ["1234567"]),
    _turn("p1", 1, "Recommending 1080-5945. Then 1234567 is listed."),  # the decision's sentence names no id
    _turn("p1", 0, "Recommending 1234567.", tool_calls=[{"name": "recommend_product"}]),  # a call: not counted
    _turn("p1", 0, "Recommending 1234567.", parse_notes=["unclosed <tool_call> block"]),  # an attempt: not counted
    _turn("p1", 0, "Let me search again."),                                             # no decision: not counted
    {"kind": "inference", "problem_id": "p1", "sample": 0, "status": 500, "error": "boom"},  # unanswered
]


def test_counts_openers_and_the_ids_the_decision_names(tmp_path: Path) -> None:
    run = _write(tmp_path / "run", CALLS)
    got = stop_turns.stop_turns(run)
    assert got == {"answered_turns": 7, "think_then_stop": 4, "cut": 1, "opens_recommending": 3,
                   "names_returned_id": 1, "names_unreturned_ids": 1, "names_no_id": 2,
                   "episodes_think_then_stop": 2}


def test_an_evaluation_directory_gives_each_model_and_reads_only(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev"
    _write(ev / "models" / "a", CALLS)
    _write(ev / "models" / "b", CALLS[:2])
    before = {p: p.stat().st_mtime_ns for p in ev.rglob("*")}
    assert stop_turns.main([str(ev), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {str(ev / "models" / "a"), str(ev / "models" / "b")}
    assert body[str(ev / "models" / "b")]["names_returned_id"] == 1
    assert {p: p.stat().st_mtime_ns for p in ev.rglob("*")} == before
    assert stop_turns.main([str(ev / "models" / "a")]) == 0
    assert "4 think-then-stop turns of 7 answered, in 2 episodes, 1 cut" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["missing", "no-log", "not-json", "not-object"])
def test_bad_input_is_one_error_line_and_a_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                case: str) -> None:
    target = tmp_path / "run"
    if case != "missing":
        target.mkdir()
    if case == "not-json":
        (target / "calls.jsonl").write_text(json.dumps(CALLS[0]) + "\n{not json\n")
    if case == "not-object":
        (target / "calls.jsonl").write_text("[1, 2]\n")
    code = stop_turns.main([str(target)])
    err = capsys.readouterr().err.splitlines()
    assert code == (3 if case in ("not-json", "not-object") else 4)
    assert err[0].startswith("error: ") and err[1].startswith("hint: ") and len(err) == 2
    assert "Traceback" not in "".join(err) and os.listdir(tmp_path) == ([] if case == "missing" else ["run"])
