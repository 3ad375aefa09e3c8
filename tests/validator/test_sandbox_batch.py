"""Batch mode (ORO's design, docs/arena.md §3): one sandbox per batch, the agent imported once, one forked process per
problem. One problem's attack (fork bomb, memory bomb, endless loop, segfault, exit) never costs the other
problems of the batch their run; timeouts stay per problem; outcomes stream back as problems finish; the agent
module is imported once; each problem sees only its own run token; the validator keeps partial results when the
sandbox dies or overruns its deadline. Targets never leave loopback."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoparena.validator.sandbox import Outcome, Sandbox, SandboxLimits, get_sandbox
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from tests.validator.hostile import agent
from tests.validator.hostile.world import World, gateway_world, processes_with_uid_in

_REASON = BubblewrapSandbox().unavailable()
if _REASON:
    print(f"bubblewrap batch tests skipped: {_REASON}", file=sys.stderr)
needs_bwrap = pytest.mark.skipif(_REASON is not None, reason=f"bubblewrap unusable here: {_REASON}")
UID_BASE = 300_000 + (os.getpid() % 10_000) * 8
BATCH = SandboxLimits(mode="batch", timeout_s=3.0, kill_grace_s=0.5, memory_mb=768, pids=48, tmpfs_mb=16,
                      file_size_mb=8)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with gateway_world() as w:
        yield w


def _backends() -> list:
    return [pytest.param("bubblewrap", marks=needs_bwrap), "process"]


def _sandbox(name: str, **options: object) -> Sandbox:
    if name == "bubblewrap":
        options.setdefault("uid_base", UID_BASE)
    return get_sandbox(name, allow_non_hermetic=True, **options)


def _problems(*queries: str) -> list[dict]:
    return [{"problem_id": f"{i:02d}-{q}", "query": q} for i, q in enumerate(queries)]


def _run(sandbox: Sandbox, world: World, agent_file: Path, problems: list[dict], limits: SandboxLimits = BATCH,
         workers: int = 3) -> dict[str, Outcome]:
    outs = {o.envelope.problem_id: o for o in sandbox.run(agent_file, problems, gateway_socket=world.socket,
                                                          env_for=world.env_for, limits=limits, workers=workers)}
    for pid in outs:
        world.calls(pid)
    assert set(outs) == {p["problem_id"] for p in problems}
    return outs


def _uids_alive() -> set[int]:
    return processes_with_uid_in(UID_BASE)


@needs_bwrap
@pytest.mark.parametrize("leaves", [True, False], ids=["problem-cgroups", "fallback"])
def test_one_problems_attack_does_not_cost_the_others(world: World, leaves: bool) -> None:
    sandbox = _sandbox("bubblewrap")
    sandbox.problem_cgroups = leaves  # type: ignore[attr-defined]
    problems = _problems("forkbomb", "search", "membomb", "search", "loop", "search", "segv", "exit", "search",
                         "search")
    t0 = time.monotonic()
    outs = _run(sandbox, world, agent("mixed"), problems, BATCH.model_copy(update={"timeout_s": 5.0}))
    by = {pid.partition("-")[2]: [] for pid in outs}
    for pid, out in outs.items():
        by[pid.partition("-")[2]].append(out)
    for out in by["search"]:
        assert out.envelope.status == "SUCCESS", (out.envelope.error, out.stderr_tail[-500:])
        assert out.envelope.dialogue[0]["hits"]
    [bomb], [loop], [segv], [exit_], [mem] = by["forkbomb"], by["loop"], by["segv"], by["exit"], by["membomb"]
    assert bomb.envelope.status != "SUCCESS" and loop.envelope.status == "TIMED_OUT"
    assert segv.envelope.error["type"] == "AgentCrashed" and "SIGSEGV" in segv.envelope.error["message"]
    assert exit_.envelope.error["type"] == "AgentCrashed" and "code 9" in exit_.envelope.error["message"]
    if leaves and "per problem" in bomb.enforced["pids"]:  # the bomb filled its own cgroup, not the sandbox
        assert bomb.envelope.status == "TIMED_OUT"
        assert 0 < bomb.counters["pids_peak"] <= BATCH.pids and bomb.counters["pids_max_hits"] > 0
        assert all(o.counters["pids_peak"] <= 2 for o in by["search"])
    if leaves and "per problem" in mem.enforced["memory"]:
        assert mem.counters["memory_peak_mb"] <= BATCH.memory_mb  # the cap held
        # the spread bomb's children overlap and one is OOM-killed in its cgroup, unless (on a loaded machine) their
        # interpreter starts were so slow that the problem's timeout ended it first, or a child was refused its memory
        refused = mem.envelope.status == "SUCCESS" and any(mem.envelope.dialogue[0]["children"])
        assert mem.counters["oom_kills"] >= 1 or mem.envelope.status == "TIMED_OUT" or refused, \
            (mem.envelope, mem.counters)
    assert time.monotonic() - t0 < 30
    assert not _uids_alive()


@pytest.mark.parametrize("backend", _backends())
def test_timeouts_stay_per_problem(world: World, backend: str) -> None:
    limits = BATCH.model_copy(update={"timeout_s": 1.0})
    t0 = time.monotonic()
    outs = _run(_sandbox(backend), world, agent("mixed"),
                _problems("sleep:60", "sleep:0", "sleep:0", "loop", "sleep:0"), limits, workers=2)
    for pid, out in outs.items():
        if pid.endswith(("sleep:60", "loop")):
            assert out.envelope.status == "TIMED_OUT", out.envelope
            assert out.envelope.error["message"] == "agent_main exceeded 1 s (TERM, then KILL after 0.5 s)"
            assert 1.0 <= out.wall_s < 1.0 + 0.5 + 1.5
        else:
            assert out.envelope.status == "SUCCESS" and out.wall_s < 1.0
    assert time.monotonic() - t0 < 8


@pytest.mark.parametrize("backend", _backends())
def test_outcomes_stream_back_in_completion_order(world: World, backend: str) -> None:
    problems = _problems("sleep:1.5", "sleep:0.1", "sleep:0.8")
    seen: list[tuple[str, float]] = []
    for out in _sandbox(backend).run(agent("mixed"), problems, gateway_socket=world.socket, env_for=world.env_for,
                                     limits=BATCH, workers=3):
        seen.append((out.envelope.problem_id, time.time()))
        world.calls(out.envelope.problem_id)
    assert [pid for pid, _ in seen] == ["01-sleep:0.1", "02-sleep:0.8", "00-sleep:1.5"]
    assert seen[1][1] < seen[2][1] - 0.4  # yielded while the slowest was still running


@pytest.mark.parametrize("backend", _backends())
def test_the_agent_is_imported_once(world: World, tmp_path: Path, backend: str) -> None:
    f = tmp_path / "counting.py"
    f.write_text(
        "import os, sys, time\n"
        "IMPORTED_AT = time.time()\n"
        "with open(os.path.join(os.environ['HOME'], 'imports.log'), 'a') as fh:\n"
        "    fh.write('import\\n')\n"
        "REGISTERED = sys.modules.get('submitted_agent') is sys.modules[__name__]\n"
        "CALLS = 0\n"
        "def agent_main(p):\n"
        "    global CALLS\n"
        "    CALLS += 1\n"
        "    with open(os.path.join(os.path.dirname(os.environ['HOME']), 'imports.log')) as fh:\n"
        "        imports = len(fh.read().splitlines())\n"
        "    return [{'imports': imports, 'at': IMPORTED_AT, 'calls': CALLS, 'registered': REGISTERED,\n"
        "             'pid': os.getpid()}]\n")
    outs = _run(_sandbox(backend), world, f, _problems(*["x"] * 6), workers=2)
    seen = [o.envelope.dialogue[0] for o in outs.values()]
    assert all(s["imports"] == 1 and s["calls"] == 1 and s["registered"] for s in seen), seen
    assert len({s["at"] for s in seen}) == 1  # one import, shared by every problem
    assert len({s["pid"] for s in seen}) == 6  # each problem in its own process


@needs_bwrap
def test_each_problem_sees_only_its_own_token(world: World) -> None:
    tokens: dict[str, str] = {}

    def env_for(problem_id: str) -> dict[str, str]:
        env = world.env_for(problem_id)
        tokens[problem_id] = env["SHOPARENA_RUN_TOKEN"]
        return env

    problems = [{"problem_id": f"s{i}", "query": '{"wait": 1.0}'} for i in range(3)]
    outs = {o.envelope.problem_id: o for o in _sandbox("bubblewrap").run(
        agent("siblings"), problems, gateway_socket=world.socket, env_for=env_for, limits=BATCH, workers=3)}
    for pid in outs:
        world.calls(pid)
    assert len(set(tokens.values())) == 3
    for pid, out in outs.items():
        assert out.envelope.status == "SUCCESS", out.envelope.error
        found = out.envelope.dialogue[0]
        assert found["env"]["SHOPARENA_RUN_TOKEN"] == tokens[pid]
        others = [t for p, t in tokens.items() if p != pid]
        blob = out.model_dump_json() + out.stdout_tail + out.stderr_tail
        assert not any(t in blob for t in others), pid
        # every other process of the sandbox (init, executor, zygote, the other problems) is closed to it
        assert not [k for k, v in found["seen"].items() if v.startswith("READ") and not k.endswith("cmdline")]


@pytest.mark.parametrize("backend", _backends())
def test_partial_results_survive_the_sandbox_dying(world: World, backend: str) -> None:
    """The agent kills its own executor: what was reported is kept, the problems the death cut off run again in a
    fresh sandbox, and the one that killed it (running, alone, when a second sandbox died) is charged to the agent."""
    problems = _problems("search", "search", "kill-executor", "search", "search")
    outs = _run(_sandbox(backend), world, agent("mixed"), problems, workers=1)
    statuses = [outs[p["problem_id"]].envelope.status for p in problems]
    assert statuses == ["SUCCESS", "SUCCESS", "FAILED", "SUCCESS", "SUCCESS"]
    assert not any(o.infra_failure for o in outs.values())
    error = outs[problems[2]["problem_id"]].envelope.error
    assert error["type"] == "SandboxError" and "the batch sandbox ended" in error["message"], error
    assert "running each time" in error["message"]
    assert not _uids_alive()


@needs_bwrap
def test_the_batch_deadline_still_reports_every_problem(world: World) -> None:
    limits = BATCH.model_copy(update={"timeout_s": 1.0})
    t0 = time.monotonic()
    outs = _run(_sandbox("bubblewrap"), world, agent("mixed"), _problems("stop-executor", "sleep:0"), limits,
                workers=1)
    stopped, never = outs["00-stop-executor"].envelope, outs["01-sleep:0"].envelope
    assert stopped.status == "TIMED_OUT" and "deadline" in stopped.error["message"]
    assert never.status == "FAILED" and never.error["message"].startswith("not started")
    assert time.monotonic() - t0 < (2 + 1) * (1.5 + 2.0) + 5 + 5  # the deadline: slack of 2 s per problem
    assert not _uids_alive()


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize(("code", "status", "message"), [
    ("while True:\n    pass\n", "TIMED_OUT", "importing the agent file exceeded 1 s"),
    ("import os\nos._exit(4)\n", "FAILED", "died while importing"),
    ("raise ImportError('no such thing')\n", "FAILED", "no such thing"),
])
def test_import_failures_fail_every_problem(world: World, tmp_path: Path, backend: str, code: str, status: str,
                                            message: str) -> None:
    f = tmp_path / "bad.py"
    f.write_text(code + "def agent_main(p):\n    return []\n")
    outs = _run(_sandbox(backend), world, f, _problems("a", "b", "c"), BATCH.model_copy(update={"timeout_s": 1.0}))
    for out in outs.values():
        assert out.envelope.status == status and message in out.envelope.error["message"], out.envelope.error


def test_a_sandbox_without_exit_status_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The batch's end-of-sandbox path: a sandbox process that gives no exit status in 5 s is logged (pid and
    why), and every problem not reported yet still fails with the sandbox's stderr tail."""
    import logging
    import queue
    import subprocess
    import threading

    from shoparena.validator.sandbox.batch import _Batch

    results: queue.Queue = queue.Queue()
    batch = _Batch(get_sandbox("process", allow_non_hermetic=True), b"", _problems("a", "b"), lambda pid: {}, "",
                   tmp_path / "gw.sock", BATCH, 1, False, results, threading.Event())
    batch.stderr += b"first line\nlast words\n"
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with caplog.at_level(logging.WARNING, logger="shoparena.validator.sandbox.batch"):
            batch._sandbox_ended(proc)
    finally:
        proc.kill()
        proc.wait()
    [record] = caplog.records
    assert f"pid {proc.pid}" in record.getMessage() and "TimeoutExpired" in record.getMessage()
    outs = [results.get_nowait() for _ in range(2)]
    assert [o.envelope.status for o in outs] == ["FAILED", "FAILED"]
    assert all("last words" in o.envelope.error["message"] for o in outs)
