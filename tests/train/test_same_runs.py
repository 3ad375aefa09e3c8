"""``scripts/same_runs.py``: two finished training runs of the same inputs compare the same stage by stage, a run
with another seed is told apart by its checkpoint and its losses, a damaged run is refused rather than compared, and
the comparison writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shoparena.train.recipe import load_recipe, run_recipe
from tests.scripts import load_script
from tests.train.conftest import TrainWorld


def _script() -> ModuleType:
    return load_script("same_runs")


def _train(world: TrainWorld, out: Path, seed: int = 3) -> None:
    recipe, text = load_recipe("tiny")
    sft = recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1, "seed": seed})
    run_recipe(recipe.model_copy(update={"sft": sft}), world.corpus, out, stages=["sft"],  # type: ignore[arg-type]
               recipe_text=text)


def _listing(root: Path) -> dict[str, Any]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def runs(train_world: TrainWorld, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("same-runs")
    made = {"a": root / "a", "b": root / "b", "other": root / "other"}
    _train(train_world, made["a"])
    _train(train_world, made["b"])
    _train(train_world, made["other"], seed=4)
    return made


def test_the_same_inputs_compare_the_same_and_nothing_is_written(runs: dict[str, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = {k: _listing(p) for k, p in runs.items()}
    assert _script().main([str(runs["a"]), str(runs["b"])]) == 0
    printed = capsys.readouterr().out
    assert "sft: checkpoint same" in printed and "sft: losses same (2 / 2 steps)" in printed
    assert printed.strip().endswith("SAME")
    assert {k: _listing(p) for k, p in runs.items()} == before


def test_another_seed_differs_in_its_checkpoint_and_losses(runs: dict[str, Path],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main([str(runs["a"]), str(runs["other"]), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    sft = body["stages"]["sft"]
    assert body["same"] is False and sft["checkpoint"] == "different" and sft["sha256"][0] != sft["sha256"][1]
    assert sft["losses"] == "different" and sft["losses_note"].startswith("first at step ")
    assert any("seeds" in note for note in body["notes"])


def test_a_moved_copy_compares_the_same(runs: dict[str, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "elsewhere" / "a"
    shutil.copytree(runs["a"], copy)
    assert _script().main([str(copy), str(runs["b"])]) == 0
    assert capsys.readouterr().out.strip().endswith("SAME")


def test_damaged_weights_are_refused_not_compared(runs: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "a"
    shutil.copytree(runs["a"], copy)
    weights = copy / "sft" / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert _script().main([str(copy), str(runs["b"])]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "records" in err and "hint:" in err and len(err.strip().split("\n")) == 2


def test_bad_input_is_one_error_line(runs: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    assert script.main([str(tmp_path / "nowhere"), str(runs["b"])]) == 4
    assert "not a training run" in capsys.readouterr().err
    assert script.main([str(runs["a"]), str(runs["a"])]) == 2
    assert "same directory" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text('{"format": "shoparena-corpus/1"}')
    assert script.main([str(bad), str(runs["b"])]) == 3
    assert "not a training manifest" in capsys.readouterr().err
    (bad / "manifest.json").write_text("{not json")
    assert script.main([str(bad), str(runs["b"])]) == 3
    assert capsys.readouterr().err.startswith("error: ")


def test_a_damaged_step_log_is_refused(runs: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "a"
    shutil.copytree(runs["a"], copy)
    with (copy / "sft" / "log.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    assert _script().main([str(copy), str(runs["b"])]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a step log" in err and "hint:" in err


def test_an_unfinished_stage_is_not_called_the_same(runs: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "a"
    shutil.copytree(runs["a"], copy)
    (copy / "sft" / "stage.json").unlink()
    assert _script().main([str(copy), str(runs["b"])]) == 1
    printed = capsys.readouterr().out
    assert "not compared (unfinished in one run or both): sft" in printed and printed.strip().endswith("DIFFERENT")
