"""``scripts/stage_kl.py``: how far each stage moved the model, as per-token KL on held-out assistant tokens and the
weights' relative distance; bad input is one ``error:`` line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script
from tests.train.conftest import TrainWorld


def _script() -> ModuleType:
    return load_script("stage_kl")


def test_the_same_checkpoint_is_zero_apart_and_another_is_not(tiny_model: Path, train_world: TrainWorld,
                                                             tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.llm.tiny import build_tiny_qwen3

    run = tmp_path / "run"
    shutil.copytree(tiny_model, run / "a" / "model")
    shutil.copytree(tiny_model, run / "same" / "model")
    build_tiny_qwen3(run / "other" / "model", seed=1)
    code = _script().main([str(run), "--rows", str(train_world.corpus / "sft_eval.jsonl"), "--stages",
                           "a,same,other", "--rows-max", "2", "--max-tokens", "100000", "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0 and body["rows"] >= 1 and body["assistant_tokens"] > 0
    pairs = {(p["a"], p["b"]): p for p in body["pairs"]}
    assert set(pairs) == {("a", "same"), ("a", "other"), ("same", "other")}
    assert pairs[("a", "same")]["kl_per_token"] == 0.0 and pairs[("a", "same")]["weights_rel_l2"] == 0.0
    assert pairs[("a", "other")]["kl_per_token"] > 0 and pairs[("a", "other")]["weights_rel_l2"] > 0.1
    assert pairs[("a", "other")] == {**pairs[("same", "other")], "a": "a"}


def test_bad_input_is_one_error_line(tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    run = tmp_path / "run"
    shutil.copytree(tiny_model, run / "a" / "model")
    shutil.copytree(tiny_model, run / "b" / "model")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1, 2]\n")
    cases = [
        ([str(run), "--rows", str(bad), "--stages", "a"], "need two stages"),
        ([str(run), "--rows", str(bad), "--stages", "a,c"], "no checkpoint"),
        ([str(run), "--rows", str(tmp_path / "none.jsonl"), "--stages", "a,b"], "cannot read"),
        ([str(run), "--rows", str(bad), "--stages", "a,b"], "not an SFT row"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exc:
            script.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith("error: ") and message in err and "\nhint: " in err
