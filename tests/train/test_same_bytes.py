"""``scripts/same_bytes.py``: the tiny model trained twice (the tiny recipe's SFT section, same rows and seed) gives
the same checkpoint bytes, and bad input is one ``error:`` line with the README's exit code."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script
from tests.train.conftest import TrainWorld


def _script() -> ModuleType:
    return load_script("same_bytes")


def test_two_runs_from_the_same_inputs_hash_the_same(tiny_model: Path, train_world: TrainWorld, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "same"
    code = _script().main(["--base", str(tiny_model), "--corpus", str(train_world.corpus), "--recipe", "tiny",
                           "--stage", "sft", "--max-steps", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    body = json.loads((out / "same_bytes.json").read_text())
    assert code == 0 and printed.strip().endswith("SAME"), printed
    a, b = body["runs"]["a"], body["runs"]["b"]
    assert a["sha256"] == b["sha256"] and len(a["sha256"]) == 64
    assert a["steps"] == b["steps"] == 2 and body["max_steps"] == 2 and body["train_rows"] > 0
    assert f"a: sha256 {a['sha256']}  steps 2" in printed and f"b: sha256 {b['sha256']}" in printed
    assert (out / "a" / "model" / "config.json").is_file() and (out / "b" / "model" / "config.json").is_file()


def test_bad_input_is_one_error_line(tiny_model: Path, train_world: TrainWorld, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    common = ["--base", str(tiny_model), "--recipe", "tiny", "--max-steps", "2"]
    assert script.main([*common, "--corpus", str(train_world.corpus), "--out", str(busy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out ") and "hint:" in err and not list((busy).glob("a"))
    assert script.main([*common, "--corpus", str(tmp_path), "--out", str(tmp_path / "o")]) == 4
    assert "no sft_train.jsonl" in capsys.readouterr().err
    assert script.main([*common[:-1], "0", "--corpus", str(train_world.corpus), "--out", str(tmp_path / "o")]) == 2
