"""One evaluation core: ``run`` is ``validate`` without the judge and the store.

The same agent, model and seed through :func:`run_agents` and through :func:`evaluate` on the ``process`` sandbox
give identical steps and identical scores; the same seed gives the same bytes twice; a model that cannot work
fails before any problem runs; a backend failure is a FAILED problem; one malformed output loses nothing else;
and nothing an agent forks outlives its run.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoparena.agents import agent_path
from shoparena.errors import BackendError, ConfigError, NotFoundError
from shoparena.store import open_store
from shoparena.store.types import canonical_json
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate, sample_seed
from shoparena.validator.run import RunConfig, run_agents, validator_config
from tests.worlds import small_world

WALL_CLOCK = ("timestamp", "execution_time")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    return small_world(tmp_path_factory.mktemp("core"), size=500, catalog_seed=31, n=6,
                       problem_seed=8)


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def canonical(steps: list[dict[str, Any]]) -> bytes:
    """Sorted-key JSON of a step list without its wall-clock fields (``extra_info.timestamp`` and
    ``execution_time``: the only ones that depend on when and how fast the agent ran)."""
    return canonical_json([{**s, "extra_info": {k: v for k, v in (s.get("extra_info") or {}).items()
                                                if k not in WALL_CLOCK}} for s in steps])


def _run_steps(out: Path) -> dict[str, bytes]:
    return {steps[0]["extra_info"]["problem_id"]: canonical(steps) for steps in _lines(out / "rollouts.jsonl")}


def _store_steps(db: Path) -> tuple[dict[str, bytes], dict[str, bool]]:
    with open_store(f"sqlite:///{db}") as store:
        records = list(store.query())
    return {r.problem_id: canonical(r.steps) for r in records}, {r.problem_id: r.success for r in records}


@pytest.mark.parametrize(("agent", "temperature", "seed"), [("react", 0.7, 5), ("pipeline", 0.0, 0)])
def test_run_and_validate_give_the_same_steps_and_scores(world, tmp_path: Path, agent: str, temperature: float,
                                                         seed: int) -> None:
    catalog, problems, _ = world
    config = RunConfig(agent=agent, model="policy:expert", seed=seed, temperature=temperature, concurrency=2)
    summary = run_agents(catalog, problems, config, tmp_path / "run")
    assert summary.statuses == {"SUCCESS": len(problems)}
    vconfig = ValidatorConfig(model="policy:expert", sandbox="process", allow_non_hermetic=True, workers=2,
                              temperature=temperature, seed=seed)
    assert vconfig.model_dump(exclude={"judge", "workers"}) == validator_config(config).model_dump(
        exclude={"judge", "workers"})
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        evaluated = evaluate(AgentSpec(path=str(agent_path(agent)), agent_id=agent), problems, catalog, store,
                             vconfig)
    steps, success = _store_steps(tmp_path / "t.db")
    assert len(steps) == len(problems) and all(steps.values())
    assert _run_steps(tmp_path / "run") == steps  # byte-equal, problem by problem
    runs = {r["problem_id"]: r["success"] for r in _lines(tmp_path / "run" / "runs.jsonl")}
    assert runs == success
    assert summary.asr == evaluated.success_rate and summary.gt_rate == evaluated.ground_truth_rate


def test_same_seed_same_bytes_and_another_seed_differs(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    runs = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        run_agents(catalog, problems, RunConfig(agent="react", model="policy:novice", seed=seed, temperature=1.0,
                                                concurrency=2), tmp_path / name)
        runs[name] = [canonical(steps) for steps in _lines(tmp_path / name / "rollouts.jsonl")]
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]
    assert sample_seed(1, "p", 0) == sample_seed(1, "p", 0) != sample_seed(1, "p", 1)


def test_cli_run_and_cli_validate_agree(world, tmp_path: Path) -> None:
    catalog, _, problems_file = world
    common = ["--catalog", str(catalog), "--problems", str(problems_file), "--agent", "react", "--model",
              "policy:careful", "--seed", "3", "--temperature", "0.5", "--limit", "4", "--json"]
    db = tmp_path / "t.db"
    run = subprocess.run([sys.executable, "-m", "shoparena", "run", *common, "--out", str(tmp_path / "o")],
                         env=ENV, capture_output=True, text=True, timeout=240)
    val = subprocess.run([sys.executable, "-m", "shoparena", "validate", *common, "--sandbox", "process",
                          "--allow-non-hermetic", "--store", f"sqlite:///{db}"],
                         env=ENV, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    assert val.returncode == 0, val.stderr
    steps, _ = _store_steps(db)
    assert len(steps) == 4 and _run_steps(tmp_path / "o") == steps
    assert json.loads(run.stdout)["asr"] == json.loads(val.stdout)["success_rate"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("model", "code", "says"), [
    ("bogus:x", ConfigError.exit_code, "unknown model backend"),
    ("polcy:expert", ConfigError.exit_code, "did you mean policy"),
    ("policy:nosuch", ConfigError.exit_code, "unknown offline policy"),
    ("hf:/nonexistent", NotFoundError.exit_code, "no transformers model"),
    ("openai:http://127.0.0.1:{port}/v1/m", BackendError.exit_code, "cannot connect"),
])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_model_that_cannot_work_fails_before_the_run(world, tmp_path: Path, command: str, model: str,
                                                        code: int, says: str) -> None:
    catalog, _, problems_file = world
    extra = (["--out", str(tmp_path / "o")] if command == "run" else
             ["--sandbox", "process", "--allow-non-hermetic", "--store", f"sqlite:///{tmp_path / 't.db'}"])
    done = subprocess.run([sys.executable, "-m", "shoparena", command, "--catalog", str(catalog), "--problems",
                           str(problems_file), "--agent", "react", "--model", model.format(port=_free_port()),
                           "--json", *extra], env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) <= 2 and lines[0].startswith("error:") and says in lines[0] + lines[-1], done.stderr
    assert len(lines) == 1 or lines[1].startswith("  hint:")
    assert not (tmp_path / "o" / "rollouts.jsonl").exists()


@pytest.fixture
def failing_server() -> Iterator[str]:
    """A loopback OpenAI-compatible server that accepts connections and fails every completion."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"error": {"message": "model crashed", "type": "server_error"}}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"openai:http://127.0.0.1:{server.server_address[1]}/v1/broken-model"
    finally:
        server.shutdown()
        server.server_close()


def test_a_backend_failure_is_a_failed_problem(world, tmp_path: Path, failing_server: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, problems, _ = world
    monkeypatch.setenv("SHOPARENA_OPENAI_MAX_RETRIES", "0")
    summary = run_agents(catalog, problems[:2], RunConfig(agent="react", model=failing_server, concurrency=2),
                         tmp_path / "o")
    assert summary.statuses == {"FAILED": 2} and summary.asr == 0.0
    for line in _lines(tmp_path / "o" / "runs.jsonl"):
        assert line["error"]["type"] == "BackendError" and "model backend" in line["error"]["message"]


def test_one_malformed_output_loses_nothing_else(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    bad = {problems[0].problem_id: "ints", problems[1].problem_id: "object", problems[2].problem_id: "surrogate"}
    agent = tmp_path / "mixed_agent.py"
    agent.write_text(
        f"BAD = {bad!r}\n"
        + agent_path("react").read_text()
        + "\n_main = agent_main\n"
        "class Thing:\n    pass\n"
        "def agent_main(problem_data):\n"
        "    kind = BAD.get(problem_data['problem_id'])\n"
        "    if kind == 'ints':\n        return [1, 2, 3]\n"
        "    if kind == 'object':\n        return [Thing()]\n"
        "    if kind == 'surrogate':\n"
        "        return [{'completion': {'content': 'bad \\udcff byte'}, 'extra_info': {}}]\n"
        "    return _main(problem_data)\n")
    summary = run_agents(catalog, problems, RunConfig(agent=str(agent), concurrency=2), tmp_path / "o")
    assert summary.statuses == {"SUCCESS": len(problems) - 3, "FAILED": 3}
    runs = {r["problem_id"]: r for r in _lines(tmp_path / "o" / "runs.jsonl")}
    rollouts = _lines(tmp_path / "o" / "rollouts.jsonl")
    assert len(runs) == len(rollouts) == len(problems)
    for pid in bad:
        assert runs[pid]["status"] == "FAILED" and runs[pid]["error"]["type"].startswith("INVALID_OUTPUT:")
    good = [steps for steps in rollouts if steps[0]["extra_info"]["problem_id"] not in bad]
    assert len(good) == len(problems) - 3
    assert all(steps[-1]["completion"]["message"]["tool_call"][-1]["name"] == "terminate" for steps in good)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def test_nothing_an_agent_forks_outlives_the_run(world, tmp_path: Path) -> None:
    catalog, problems, _ = world
    pids = tmp_path / "pids"
    pids.mkdir()
    agent = tmp_path / "forking_agent.py"
    agent.write_text(
        "import os, subprocess\n"
        "def agent_main(problem_data):\n"
        "    child = subprocess.Popen(['sleep', '4711'])\n"
        "    if os.fork() == 0:\n"
        "        os.execvp('sleep', ['sleep', '4712'])\n"
        f"    open(os.path.join({str(pids)!r}, str(child.pid)), 'w').close()\n"
        "    return []\n")
    summary = run_agents(catalog, problems[:2], RunConfig(agent=str(agent), concurrency=2), tmp_path / "o")
    assert summary.statuses == {"SUCCESS": 2}
    children = [int(p.name) for p in pids.iterdir()]
    assert len(children) == 2
    assert not [pid for pid in children if _alive(pid)]
    assert not [pid for pid in _sleepers() if _alive(pid)]  # the forked grandchild too


def _sleepers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline in (b"sleep\x004711\x00", b"sleep\x004712\x00"):
            found.append(int(entry.name))
    return found
