"""``shoparena evaluate`` on the console: result tables, phase messages in OUT/evaluate.log, ``--baseline``, and a
model whose every episode failed on its backend (a loopback server that answers every request 500)."""

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


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    catalog, _, problems_file = small_world(root, size=300, catalog_seed=3, n=4, problem_seed=5)
    return catalog, problems_file


def _shoparena(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "shoparena", *args], capture_output=True, text=True, timeout=300,
                          env=env)


class _Overloaded(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server that is up and fails every request (500 with an error body)."""

    def _fail(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"error": {"message": "model overloaded"}}'
        self.send_response(500)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _fail

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def overloaded() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Overloaded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"openai:http://127.0.0.1:{server.server_address[1]}/v1/m"
    finally:
        server.shutdown()
        server.server_close()


def test_tables_on_the_console_and_phases_in_the_log(world, tmp_path: Path) -> None:
    catalog, problems = world
    out = tmp_path / "out"
    # --model repeated adds models (the other tests give them comma-separated): the first is not dropped
    proc = _shoparena("evaluate", "--model", "expert=policy:expert", "--model", "rand=policy:random",
                      "--catalog", str(catalog), "--problems", str(problems), "--out", str(out), "-n", "1",
                      "--baseline", "rand")
    assert proc.returncode == 0, proc.stderr
    assert "average success rate" in proc.stdout and "what happened in the episodes" in proc.stdout
    assert "paired comparisons (baseline rand)" in proc.stdout and "expert − rand" in proc.stdout
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stdout + proc.stderr
    log = (out / "evaluate.log").read_text(encoding="utf-8")
    assert "expert: policy:expert on" in log and "rand: ASR" in log
    body = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert [m["label"] for m in body["config"]["models"]] == ["expert", "rand"]
    assert body["baseline"] == "rand" and body["comparisons"][0]["a"] == "rand"
    d = body["models"]["expert"]["diagnostics"]
    assert d["episodes"] == d["finished"] > 0 and d["totals"]["turns"] > 0


def test_an_unknown_baseline_is_exit_2_listing_the_labels(world, tmp_path: Path) -> None:
    catalog, problems = world
    proc = _shoparena("evaluate", "--model", "expert=policy:expert,rand=policy:random", "--catalog", str(catalog),
                      "--problems", str(problems), "--out", str(tmp_path / "out"), "--baseline", "teacher")
    assert proc.returncode == 2
    assert "error: baseline 'teacher' is not one of the evaluated models" in proc.stderr
    assert "hint: --baseline expert | rand" in proc.stderr
    assert not (tmp_path / "out" / "models").exists()  # refused before anything ran


def test_every_episode_failed_on_the_backend_is_said_and_exit_5(world, overloaded: str, tmp_path: Path) -> None:
    catalog, problems = world
    out = tmp_path / "out"
    proc = _shoparena("evaluate", "--model", f"expert=policy:expert,down={overloaded}", "--catalog", str(catalog),
                      "--problems", str(problems), "--out", str(out), "-n", "1", "--limit", "1", "--timeout", "60")
    assert proc.returncode == 5, proc.stderr
    assert "every episode of model 'down' failed on its model backend (1 of 1)" in proc.stderr
    assert "model overloaded" in proc.stderr and "Traceback" not in proc.stderr
    assert "what happened in the episodes" in proc.stdout  # the tables are shown first
    d = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))["models"]["down"]["diagnostics"]
    assert d["all_failed_on_backend"] and d["failed_by_reason"] == {"BackendError": 1}
    assert d["totals"]["inference_failed"] == d["totals"]["inference_calls"] >= 1
