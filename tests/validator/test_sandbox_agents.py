"""Agents in the sandbox: the built-ins run unmodified and their searches reach the gateway log; every way an
agent can end is reported as the right envelope, identically by the hermetic and the fallback backend, in both
modes (``batch``: one sandbox per batch, a forked process per problem; ``per_problem``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoparena.agents.loading import agent_path
from shoparena.validator.sandbox import Outcome, Sandbox, SandboxLimits, get_sandbox
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from tests.validator.hostile import agent
from tests.validator.hostile.world import World, gateway_world

_REASON = BubblewrapSandbox().unavailable()
needs_bwrap = pytest.mark.skipif(_REASON is not None, reason=f"bubblewrap unusable here: {_REASON}")
LIMITS = SandboxLimits(timeout_s=20.0, kill_grace_s=0.5, memory_mb=2048, pids=64, tmpfs_mb=16, output_mb=1)
MODES = ["batch", "per_problem"]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with gateway_world() as w:
        yield w


def _backends() -> list:
    return [pytest.param("bubblewrap", marks=needs_bwrap), "process"]


def _sandbox(name: str) -> Sandbox:
    return get_sandbox(name, allow_non_hermetic=True)


def _run(sandbox: Sandbox, world: World, agent_file: Path, problems: list[dict], limits: SandboxLimits = LIMITS,
         workers: int = 2) -> tuple[dict[str, Outcome], dict[str, list]]:
    outs = {o.envelope.problem_id: o for o in sandbox.run(agent_file, problems, gateway_socket=world.socket,
                                                          env_for=world.env_for, limits=limits, workers=workers)}
    return outs, {pid: world.calls(pid) for pid in outs}


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "axis"), [("react", "A"), ("pipeline", "B")])
def test_builtin_agents_run_unmodified_and_are_logged(world: World, name: str, axis: str, mode: str) -> None:
    problems = [p.public_view() for p in world.problems]
    outs, calls = _run(_sandbox("bubblewrap"), world, agent_path(name), problems, _mode(LIMITS, mode))
    assert set(outs) == {p["problem_id"] for p in problems}
    for pid, out in outs.items():
        assert out.envelope.status == "SUCCESS", (out.envelope.error, out.stderr_tail[-2000:])
        last = out.envelope.dialogue[-1]["completion"]["message"]["tool_call"][-1]
        assert last["name"] == "terminate"
        searches = [c for c in calls[pid] if c.kind == "search"]
        assert searches and {c.axis for c in searches} == {axis} and all(c.status == 200 for c in searches)
        assert all(c.problem_id == pid for c in calls[pid])
        assert out.start_overhead_ms is not None and out.start_overhead_ms < 2000


AGENTS = {
    "raises": ("def agent_main(p):\n    raise ValueError('boom ' + p['query'][:4])\n",
               "FAILED", "ValueError", "boom"),
    "not_a_list": ("def agent_main(p):\n    return {'steps': []}\n", "FAILED", "AgentError", "not a list"),
    "not_json": ("def agent_main(p):\n    return [{'x': {1, 2}}]\n", "FAILED", "TypeError", "encoded as JSON"),
    "not_steps": ("def agent_main(p):\n    return [1, 2]\n", "FAILED", "MalformedEnvelope", "step objects"),
    "sys_exit": ("import sys\ndef agent_main(p):\n    sys.exit(3)\n", "FAILED", "SystemExit", "3"),
    "hard_exit": ("import os\ndef agent_main(p):\n    os._exit(7)\n", "FAILED", "AgentCrashed",
                  "exited with code 7"),
    "segfault": ("import os, signal\ndef agent_main(p):\n    os.kill(os.getpid(), signal.SIGSEGV)\n", "FAILED",
                 "AgentCrashed", "SIGSEGV"),
    "syntax": ("def agent_main(p)\n    return []\n", "FAILED", "SyntaxError", "expected ':'"),
    "no_main": ("x = 1\n", "FAILED", "AgentError", "no callable agent_main"),
    "forges": ("import json, os, sys\ndef agent_main(p):\n    fd = json.loads(sys.argv[1])['out_fd']\n"
               "    os.write(fd, json.dumps({'envelope': {'status': 'SUCCESS', 'dialogue': [{'fake': 1}]}}).encode()"
               " + b'\\n')\n    return [{'real': 1}]\n", "FAILED", "MalformedEnvelope", "3 records"),
    "too_big": ("def agent_main(p):\n    return [{'x': 'y' * (2 << 20)}]\n", "FAILED", "OutputTooLarge", "1 MB"),
    "noisy": ("import sys\ndef agent_main(p):\n    for i in range(20000):\n        print('line', i)\n"
              "        print('err', i, file=sys.stderr)\n    return [{'ok': 1}]\n", "SUCCESS", None, None),
    "slow": ("import time\ndef agent_main(p):\n    print('started', flush=True)\n    time.sleep(60)\n",
             "TIMED_OUT", "Timeout", "exceeded 1.5 s"),
}


def _mode(limits: SandboxLimits, mode: str) -> SandboxLimits:
    return limits.model_copy(update={"mode": mode})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", _backends())
def test_every_ending_is_an_envelope(world: World, tmp_path: Path, backend: str, mode: str) -> None:
    sandbox = _sandbox(backend)
    limits = LIMITS.model_copy(update={"timeout_s": 1.5, "mode": mode})
    done = []
    for name, (code, status, err_type, err_text) in AGENTS.items():
        f = tmp_path / f"{name}.py"
        f.write_text(code)
        outs, _calls = _run(sandbox, world, f, [{"problem_id": name, "query": "test query"}], limits)
        env = outs[name].envelope
        assert env.status == status, (name, env.error, outs[name].stderr_tail[-500:])
        if err_type is None:
            assert env.error is None and env.dialogue
        else:
            assert env.error["type"] == err_type and err_text in env.error["message"], (name, env.error)
            assert env.dialogue is None
        assert env.problem_id == name and 0 <= env.execution_time <= outs[name].wall_s + 0.01
        done.append(outs[name])
    noisy = next(o for o in done if o.envelope.problem_id == "noisy")
    assert noisy.stdout_tail.endswith("line 19999\n") and len(noisy.stdout_tail) <= LIMITS.tail_kb << 10
    assert noisy.stderr_tail.endswith("err 19999\n")
    slow = next(o for o in done if o.envelope.problem_id == "slow")
    assert slow.stdout_tail == "started\n" and slow.wall_s < 1.5 + 0.5 + 1.5


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", _backends())
def test_searches_through_the_gateway_and_sanitised_input(world: World, tmp_path: Path, backend: str,
                                                         mode: str) -> None:
    raw = {**world.problems[0].to_upstream(), "problem_id": "raw-1", "reward_title_embeddings": {"t": [0.1]}}
    outs, calls = _run(_sandbox(backend), world, agent("gateway"), [raw, world.problems[1].public_view()],
                       _mode(LIMITS, mode))
    assert all(o.envelope.status == "SUCCESS" for o in outs.values())
    assert [c.kind for c in calls["raw-1"]] == ["search"] and calls["raw-1"][0].params["q"] == raw["query"]
    echo = tmp_path / "echo.py"
    echo.write_text("def agent_main(p):\n    return [dict(p)]\n")
    outs, _ = _run(_sandbox(backend), world, echo, [raw], _mode(LIMITS, mode))
    assert outs["raw-1"].envelope.dialogue == [{"problem_id": "raw-1", "query": raw["query"]}]


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
def test_each_problem_gets_a_fresh_sandbox_or_workdir(world: World, tmp_path: Path, mode: str) -> None:
    """per_problem: nothing an earlier problem wrote survives. batch: /tmp is the batch's (ORO: one container per
    batch), but each problem starts in a fresh, empty working directory and HOME, and a new batch in a new /tmp."""
    f = tmp_path / "marker.py"
    f.write_text("import os\ndef agent_main(p):\n    seen, here = os.listdir('/tmp'), os.listdir('.')\n"
                 "    open('/tmp/marker', 'w').write(p['problem_id'])\n    open('mine', 'w').write('x')\n"
                 "    return [{'seen': seen, 'here': here, 'home': os.environ['HOME'], 'cwd': os.getcwd()}]\n")
    problems = [{"problem_id": f"m{i}", "query": "q"} for i in range(4)]
    for _ in range(2):
        outs, _ = _run(_sandbox("bubblewrap"), world, f, problems, _mode(LIMITS, mode), workers=1)
        seen = [outs[p["problem_id"]].envelope.dialogue[0] for p in problems]
        if mode == "per_problem":  # (only mount points of a checkout under /tmp may be there)
            assert all("marker" not in s["seen"] for s in seen) and len({tuple(s["seen"]) for s in seen}) == 1
        else:
            assert "marker" not in seen[0]["seen"] and all("marker" in s["seen"] for s in seen[1:])
            assert all(s["here"] == [] and s["home"] == s["cwd"] for s in seen)
            assert len({s["cwd"] for s in seen}) == len(seen)
            names = [s["cwd"].rpartition("/")[2] for s in seen]
            assert all(names[j] not in s["seen"] for i, s in enumerate(seen) for j in range(i))  # removed after


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", _backends())
def test_closing_the_iterator_kills_running_sandboxes(world: World, tmp_path: Path, backend: str,
                                                      mode: str) -> None:
    f = tmp_path / "mixed.py"
    f.write_text("import time\ndef agent_main(p):\n    if p['query'] == 'slow':\n        time.sleep(60)\n"
                 "    return []\n")
    problems = [{"problem_id": "fast", "query": "fast"}, {"problem_id": "slow", "query": "slow"}]
    it = _sandbox(backend).run(f, problems, gateway_socket=world.socket, env_for=lambda _: {},
                               limits=LIMITS.model_copy(update={"timeout_s": 60, "mode": mode}), workers=2)
    first = next(it)
    assert first.envelope.problem_id == "fast"
    t0 = time.monotonic()
    closer = threading.Thread(target=it.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive() and time.monotonic() - t0 < 5


@pytest.mark.parametrize("mode", MODES)
def test_process_backend_says_it_is_not_hermetic(world: World, mode: str) -> None:
    [out] = list(_sandbox("process").run(agent("gateway"), [world.problems[0].public_view()],
                                         gateway_socket=world.socket, env_for=world.env_for,
                                         limits=_mode(LIMITS, mode)))
    world.calls(out.envelope.problem_id)
    assert out.backend == "process" and "NONE" in out.enforced["network"] and "NONE" in out.enforced["filesystem"]
    assert out.enforced["mode"].startswith(mode) and json.dumps(out.enforced)
