"""A training run travels: the paths its manifest and ``stage.json`` record are relative to the run, so a copy is
resumed from any working directory against its *own* weights (a corrupt copy is trained again, saying so), and a
stage resumed from its last checkpoint never trains past its ``max_steps``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shoparena.train.checkpoint import checkpoint_sha256
from shoparena.train.recipe import load_recipe, run_recipe
from tests.train.conftest import TrainWorld


def _recipe() -> tuple[object, str]:
    recipe, text = load_recipe("tiny")
    return recipe.model_copy(update={"sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1})}), text


def _corrupt(weights: Path) -> None:
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))


def test_a_copied_run_is_checked_against_its_own_weights(train_world: TrainWorld, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    recipe, text = _recipe()
    original = tmp_path / "a"
    first = run_recipe(recipe, train_world.corpus, original, stages=["sft"], recipe_text=text)  # type: ignore[arg-type]
    stage = json.loads((original / "sft" / "stage.json").read_text())
    manifest = json.loads((original / "manifest.json").read_text())
    assert stage["model_dir"] == "model" and manifest["final_model"] == "sft/model"
    assert not Path(manifest["corpus"]).is_absolute()
    kept = (original / "sft" / "model" / "model.safetensors").read_bytes()

    copy = tmp_path / "moved" / "b"
    shutil.copytree(original, copy)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    intact = run_recipe(recipe, train_world.corpus, copy, stages=["sft"], resume=True,  # type: ignore[arg-type]
                        recipe_text=text)
    assert intact.skipped == ["sft"] and intact.redone == []
    assert Path(intact.final_model or "") == (copy / "sft" / "model").resolve()  # the copy's, not the original's

    _corrupt(copy / "sft" / "model" / "model.safetensors")
    again = run_recipe(recipe, train_world.corpus, copy, stages=["sft"], resume=True,  # type: ignore[arg-type]
                       recipe_text=text)
    assert again.skipped == [] and again.redone == ["sft"]
    assert again.stages[0].steps == 2  # retrained up to max_steps, never past it
    assert checkpoint_sha256(copy / "sft" / "model") == again.stages[0].checkpoint_sha256
    assert json.loads((copy / "manifest.json").read_text())["redone"] == ["sft"]
    assert (original / "sft" / "model" / "model.safetensors").read_bytes() == kept  # the original is untouched
    assert first.stages[0].checkpoint_sha256 == checkpoint_sha256(original / "sft" / "model")


def test_a_stage_resumed_at_its_last_checkpoint_stops_at_max_steps(train_world: TrainWorld, tmp_path: Path) -> None:
    """A stage interrupted after its last checkpoint (``stage.json`` never written) resumes from an earlier one, so
    it ends at ``max_steps``, however often it is resumed."""
    recipe, text = _recipe()
    out = tmp_path / "run"
    run_recipe(recipe, train_world.corpus, out, stages=["sft"], recipe_text=text)  # type: ignore[arg-type]
    assert (out / "sft" / "checkpoints" / "checkpoint-2").is_dir()
    for _ in range(2):
        (out / "sft" / "stage.json").unlink()
        resumed = run_recipe(recipe, train_world.corpus, out, stages=["sft"], resume=True,  # type: ignore[arg-type]
                             recipe_text=text)
        assert resumed.stages[0].steps == 2 and resumed.stages[0].resumed_from is not None
        assert resumed.stages[0].resumed_from.endswith("checkpoint-1")
        stage = json.loads((out / "sft" / "stage.json").read_text())
        assert stage["resumed_from"] == "checkpoints/checkpoint-1"  # inside the stage directory, relative to it
        log = [json.loads(line)["step"] for line in (out / "sft" / "log.jsonl").read_text().splitlines()]
        assert max(log) == 2


def test_a_stage_file_of_an_older_run_with_an_absolute_path_is_read_in_place(train_world: TrainWorld,
                                                                             tmp_path: Path) -> None:
    """Older runs recorded absolute paths: in a copy they are taken to mean the copy's own ``model/``."""
    recipe, text = _recipe()
    original = tmp_path / "a"
    run_recipe(recipe, train_world.corpus, original, stages=["sft"], recipe_text=text)  # type: ignore[arg-type]
    stage_file = original / "sft" / "stage.json"
    body = json.loads(stage_file.read_text())
    stage_file.write_text(json.dumps({**body, "model_dir": str((original / "sft" / "model").resolve())}))
    copy = tmp_path / "b"
    shutil.copytree(original, copy)
    _corrupt(copy / "sft" / "model" / "model.safetensors")
    again = run_recipe(recipe, train_world.corpus, copy, stages=["sft"], resume=True,  # type: ignore[arg-type]
                       recipe_text=text)
    assert again.redone == ["sft"] and again.skipped == []
