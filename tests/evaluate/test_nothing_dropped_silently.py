"""Nothing is dropped or counted silently: ``evaluate`` and ``run`` report the problem lines they skip (line number
and reason, on the console and in their JSON), refuse a problem file whose ids collide with other content (exit 3),
``run`` exits 5 when every episode failed on the model backend (as ``evaluate`` does), and ``train --stages`` that
names no stage, an empty one or an unknown one is exit 2 before anything is read."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worlds import small_world

USAGE, DATA_ERROR, BACKEND = 2, 3, 5


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dropped")
    catalog, _, problems_file = small_world(root, size=300, catalog_seed=3, n=2, problem_seed=5)
    return catalog, problems_file


def shoparena(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("SHOPARENA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "shoparena", *args], capture_output=True, text=True, timeout=300,
                          env=env, stdin=subprocess.DEVNULL)


def _with_bad_lines(problems: Path, dst: Path) -> Path:
    """The problems with an unparsable line 2 and a same-content duplicate of line 1 at the end."""
    lines = problems.read_text(encoding="utf-8").splitlines()
    dst.write_text("\n".join([lines[0], "{not json", *lines[1:], lines[0]]) + "\n", encoding="utf-8")
    return dst


def _with_conflicting_ids(problems: Path, dst: Path) -> Path:
    lines = problems.read_text(encoding="utf-8").splitlines()
    other = json.loads(lines[1])
    other["problem_id"] = json.loads(lines[0])["problem_id"]
    dst.write_text("\n".join([lines[0], json.dumps(other)]) + "\n", encoding="utf-8")
    return dst


def _skipped_said(stderr: str, n_lines: int) -> None:
    flat = " ".join(stderr.split())
    assert "skipped 2 bad records" in flat, stderr
    assert "line 2: invalid JSON" in flat and f"line {n_lines}: duplicate id" in flat, stderr


def test_evaluate_reports_skipped_lines_on_the_console_and_in_evaluation_json(world: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    catalog, problems = world
    bad = _with_bad_lines(problems, tmp_path / "problems.jsonl")
    out = tmp_path / "eval"
    result = shoparena("evaluate", "--model", "policy:careful", "--catalog", str(catalog), "--problems", str(bad),
                       "-n", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    _skipped_said(result.stderr, 4)
    skipped = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))["problems"]["skipped"]
    assert skipped["lines"] == 2 and skipped["loaded"] == 2
    assert skipped["reasons"] == {"invalid JSON": 1, "duplicate id": 1}
    assert skipped["examples"][0].startswith("line 2: invalid JSON") and skipped["examples"][1].startswith("line 4")


def test_run_reports_skipped_lines_on_the_console_and_in_its_json(world: tuple[Path, Path], tmp_path: Path) -> None:
    catalog, problems = world
    bad = _with_bad_lines(problems, tmp_path / "problems.jsonl")
    out = tmp_path / "run"
    result = shoparena("run", "--agent", "react", "--model", "policy:careful", "--catalog", str(catalog),
                       "--problems", str(bad), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    _skipped_said(result.stderr, 4)
    printed = json.loads(result.stdout)["skipped_problems"]
    stored = json.loads((out / "summary.json").read_text(encoding="utf-8"))["summary"]["skipped_problems"]
    assert printed == stored and stored["lines"] == 2 and stored["reasons"] == {"invalid JSON": 1, "duplicate id": 1}


@pytest.mark.parametrize("command", ["evaluate", "run"])
def test_ids_colliding_with_other_content_are_refused(world: tuple[Path, Path], tmp_path: Path,
                                                       command: str) -> None:
    catalog, problems = world
    clash = _with_conflicting_ids(problems, tmp_path / "problems.jsonl")
    out = tmp_path / "out"
    args = ["--model", "policy:careful", "--catalog", str(catalog), "--problems", str(clash), "--out", str(out)]
    result = shoparena(command, *args, *(["--agent", "react"] if command == "run" else ["-n", "1"]))
    assert result.returncode == DATA_ERROR, result.stderr
    assert "line 2" in result.stderr and "other content" in result.stderr and "hint:" in result.stderr
    assert not out.exists()


class _FailsEveryCall(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server that lists its model (the pre-run check passes) and fails every completion."""

    def _send(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(500, {"error": {"message": "model overloaded"}})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_model() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FailsEveryCall)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"openai:http://127.0.0.1:{server.server_address[1]}/v1/m"
    finally:
        server.shutdown()
        server.server_close()


def test_run_whose_every_episode_failed_on_the_backend_says_so_and_exits_5(world: tuple[Path, Path],
                                                                          failing_model: str, tmp_path: Path) -> None:
    catalog, problems = world
    out = tmp_path / "run"
    result = shoparena("run", "--agent", "react", "--model", failing_model, "--catalog", str(catalog), "--problems",
                       str(problems), "--out", str(out), "--timeout", "30")
    assert result.returncode == BACKEND, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "every episode failed on the model backend" in errors[0], result.stderr
    assert "model overloaded" in errors[0] and "hint:" in result.stderr
    assert (out / "summary.json").is_file()  # the run is kept; its figures are said to be those of no agent


@pytest.mark.parametrize(("stages", "needle"), [
    (",", "names no stage"), ("", "names no stage"), (" , ", "names no stage"), ("sft,,kto", "empty stage name"),
    ("sft,bogus", "unknown stage 'bogus'"), ("sfft", "did you mean 'sft'"),
])
def test_train_stages_that_name_no_known_stage_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          stages: str, needle: str) -> None:
    from shoparena.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["train", "tiny", "--corpus", str(corpus), "--out", str(tmp_path / "run"), "--stages", stages])
    err = capsys.readouterr().err
    assert exc.value.code == USAGE, err
    assert needle in err and "hint:" in err and "sft,rs,teacher,kto,grpo" in err, err
    assert not (tmp_path / "run").exists()


def test_the_library_refuses_an_empty_stage_list(tmp_path: Path) -> None:
    from shoparena.errors import ConfigError
    from shoparena.train.recipe import load_recipe, run_recipe

    spec, text = load_recipe("tiny")
    with pytest.raises(ConfigError, match="no stage to run"):
        run_recipe(spec, tmp_path / "corpus", tmp_path / "run", stages=[], recipe_text=text)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["score", "validate", "store rescore", "corpus build", "arena banks build"])
def test_every_command_that_scores_against_problems_refuses_reused_ids(
        world: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """The other readers that score or split by problem id: a reused id would make either problem the truth."""
    from shoparena.cli import main

    catalog, problems = world
    clash = str(_with_conflicting_ids(problems, tmp_path / "problems.jsonl"))
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("[]\n", encoding="utf-8")
    args = {
        "score": ["score", "--catalog", str(catalog), "--problems", clash, "--rollouts", str(rollouts)],
        "validate": ["validate", "--catalog", str(catalog), "--problems", clash, "--agent", "react", "--store",
                     f"sqlite:///{tmp_path / 'v.db'}"],
        "store rescore": ["store", "rescore", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--catalog", str(catalog),
                          "--problems", clash, "--dry-run"],
        "corpus build": ["corpus", "build", "--from-rollouts", str(rollouts), "--catalog", str(catalog), "--problems",
                         clash, "--out", str(tmp_path / "corpus")],
        "arena banks build": ["arena", "banks", "build", "--problems", clash, "--out", str(tmp_path / "bank")],
    }[command]
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == DATA_ERROR and "other content" in err and "hint:" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problems.jsonl", "rollouts.jsonl"]
