"""Turns cut at the token cap in the diagnostics (evaluate/diagnostics.py ``turns_cut``, ``think_then_stop_cut``):
counted from hand-written call logs with the call record's ``truncated`` field, unknown (None, not 0) for a log
written before it, and shown by the report and the CLI table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.cli.evaluate import _print_diagnostics
from shoparena.evaluate.diagnostics import run_diagnostics
from shoparena.evaluate.report.document import Document
from shoparena.evaluate.report.render import to_markdown
from shoparena.evaluate.report.sections import _diagnostics
from shoparena.tasks.types import Problem, RewardItem

PROBLEMS = [Problem(problem_id="p1", bucket="product", query="a red dress",
                    reward=[RewardItem(product_id="G1", title=["red dress"])])]
RUNS = [{"problem_id": "p1", "sample": s, "status": "SUCCESS", "error": None, "steps": 0, "success": False}
        for s in range(2)]


def _turn(sample: int, *, cut: bool | None, reasoning: str = "", tools: list[str] = (), status: int = 200,
          notes: list[str] | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "kind": "inference", "problem_id": "p1", "sample": sample, "status": status, "content": "",
        "reasoning_content": reasoning, "parse_notes": notes,
        "tool_calls": [{"name": t, "arguments": {}, "id": f"c{i}"} for i, t in enumerate(tools)] or None}
    if cut is not None:
        line["truncated"] = cut
    return line


# Episode 0: a cut think-then-stop turn, a think-then-stop turn that ended by itself, a cut turn that made its call.
# Episode 1: a turn cut inside its <tool_call> (a parse note: an attempt, not think-then-stop), a refused call (no
# turn: says nothing about cuts), a plain turn without a call, not cut.
CALLS = [
    _turn(0, cut=True, reasoning="Recommending G1. 'red dress' fits."),
    _turn(0, cut=False, reasoning="I will recommend G1."),
    _turn(0, cut=True, reasoning="Search first.", tools=["find_product"]),
    _turn(1, cut=True, reasoning="I will recommend G1.", notes=["unclosed <tool_call> block dropped: …"]),
    {**_turn(1, cut=None), "status": 502},
    _turn(1, cut=False, reasoning="Hmm, let me think."),
    {"kind": "search", "problem_id": "p1", "sample": 1, "status": 200, "result_product_ids": ["G1"]},
]


def _run(tmp: Path, calls: list[dict[str, Any]]) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, rows in (("runs", RUNS), ("calls", calls)):
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return tmp


def test_cut_turns_are_counted_from_the_call_log(tmp_path: Path) -> None:
    d = run_diagnostics(_run(tmp_path / "new", CALLS), PROBLEMS)
    assert d["totals"]["turns"] == 5 and d["think_then_stop"] == 2 and d["turns_without_tool_call"] == 4
    assert d["turns_cut"] == 3
    assert d["think_then_stop_cut"] == 1
    assert d["turns_cut_in_call"] == 1  # episode 1's: the cap fell inside its <tool_call>
    # a turn that ended by itself with a malformed call is not cut inside it
    uncut = [*CALLS[:3], {**CALLS[3], "truncated": False}, *CALLS[4:]]
    assert run_diagnostics(_run(tmp_path / "uncut", uncut), PROBLEMS)["turns_cut_in_call"] == 0


def test_a_log_from_before_the_field_says_unknown_not_zero(tmp_path: Path) -> None:
    old = [{k: v for k, v in c.items() if k != "truncated"} for c in CALLS]
    d = run_diagnostics(_run(tmp_path / "old", old), PROBLEMS)
    assert d["think_then_stop"] == 2  # every other figure as before
    assert d["turns_cut"] is None and d["think_then_stop_cut"] is None and d["turns_cut_in_call"] is None
    # one answered turn without the field makes the counts unknown: a partial count would read as a low one
    mixed = [CALLS[0], {k: v for k, v in CALLS[1].items() if k != "truncated"}, *CALLS[2:]]
    assert run_diagnostics(_run(tmp_path / "mixed", mixed), PROBLEMS)["turns_cut"] is None
    # no call log at all: unknown as well; a log with no answered turn: nothing was cut
    (tmp_path / "old" / "calls.jsonl").unlink()
    assert run_diagnostics(tmp_path / "old", PROBLEMS)["turns_cut"] is None
    none = run_diagnostics(_run(tmp_path / "refused", [CALLS[4]]), PROBLEMS)
    assert (none["turns_cut"], none["think_then_stop_cut"]) == (0, 0)


def test_the_report_and_the_cli_table_show_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = run_diagnostics(_run(tmp_path / "new", CALLS), PROBLEMS)
    old = run_diagnostics(_run(tmp_path / "old", [{k: v for k, v in c.items() if k != "truncated"}
                                                  for c in CALLS]), PROBLEMS)
    body = {"models": {"new": {"diagnostics": new}, "old": {"diagnostics": old}}}
    doc = Document("evaluation")
    _diagnostics(doc, body)
    text = to_markdown(doc)
    assert "| Turns cut at the cap | Think-then-stop turns cut |" in text
    new_row = next(line for line in text.splitlines() if line.startswith("| new | ") and "/" in line)
    old_row = next(line for line in text.splitlines() if line.startswith("| old | ") and "/" in line)
    # turns without a call 4, think-then-stop turns 2, both in episode 0 (1 episode), no repeated call, GT 1 / 0,
    # cut 3, of them t-t-s 1
    assert new_row.endswith("| 4 | 2 | 1 | 0 (0) | 1 / 0 | 3 | 1 |")
    assert old_row.endswith("| 4 | 2 | 1 | 0 (0) | 1 / 0 | – | – |")
    _print_diagnostics(body)
    printed = capsys.readouterr().out
    assert "t-t-s cut" in printed
    rows = {line.split()[0]: line.split() for line in printed.splitlines() if line.split()[:1] in (["new"], ["old"])}
    assert rows["new"][-2:] == ["3", "1"] and rows["old"][-2:] == ["–", "–"]
    assert "2/1" in rows["new"]  # think-then-stop turns / episodes with one
