"""The evaluate command's diagnostics tables fit a 100-column terminal: every header is printed whole and a model
without diagnostics gets a dash in every column."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from shoparena.cli import evaluate as cli


def _diag() -> dict:
    return {"episodes": 8, "finished": 5, "timed_out": 3, "timed_out_after_recommending": 2, "failed": 0,
            "failed_by_reason": {}, "per_episode": {"inference_calls": 4.5, "turns": 4.5, "tool_calls": 3.25},
            "turns_without_tool_call": 7, "think_then_stop": 4, "episodes_think_then_stop": 3,
            "repeated_tool_calls": 6, "episodes_repeating": 2, "gt_retrieved": 5, "gt_recommended": 4,
            "parse_notes": {"notes": 1}, "turns_cut": 2, "think_then_stop_cut": 1}


def test_tables_fit_100_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=buf, width=100, color_system=None))
    cli._print_diagnostics({"models": {"sft": {"diagnostics": _diag()}, "old": {"diagnostics": None}}})
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 100
    for header in ("finished", "timeout", "t/o after rec", "calls/ep", "tools/ep", "no call", "t-t-stop",
                   "repeats", "GT ret", "GT rec", "t-t-s cut"):
        assert header in text, header
    sft = [line.split() for line in text.splitlines() if line.strip().startswith("sft")]
    assert sft[0][1:] == ["8", "5", "3", "2", "0", "4.5", "4.5", "3.2"]
    assert sft[1][1:] == ["7", "4/3", "6/2", "5", "4", "1", "2", "1"]
    old = [line.split() for line in text.splitlines() if line.strip().startswith("old")]
    assert len(old) == 2 and all(set(row[1:]) == {"–"} for row in old)
