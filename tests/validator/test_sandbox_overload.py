"""A busy or shared machine is not the agent's fault.

Two validators on one host (two test runs, two validator workers) never share a sandbox uid: a finished sandbox's
uid is reclaimed by killing every process of that uid, which used to kill the other validator's live sandbox
(``SandboxError: the batch sandbox ended (it was killed by SIGKILL)``, charged to the agent). A sandbox killed from
outside mid-run is the validator's failure: the problems it cut off run again in a fresh sandbox and end with the
agent's true outcome; a sandbox that always dies gives infrastructure outcomes, which an evaluation never scores
(status ``FAILED``, reason ``sandbox_unavailable: …``, no records), so the agent's score is the one a healthy
sandbox gives. Each scenario also runs with every core oversubscribed by busy loops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.errors import BackendError
from shoparena.store import open_store
from shoparena.tasks.generator import generate_problems
from shoparena.validator import core
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate
from shoparena.validator.run import PARTIAL, RunConfig, run_agents
from shoparena.validator.sandbox import Outcome, SandboxLimits, get_sandbox, paths
from shoparena.validator.sandbox.base import RETRIES, memfd
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from shoparena.validator.sandbox.process import ProcessSandbox
from shoparena.validator.sandbox.supervise import descendants
from tests.validator.hostile import agent
from tests.validator.hostile.world import World, gateway_world, processes_with_uid_in

_REASON = BubblewrapSandbox().unavailable()
needs_bwrap = pytest.mark.skipif(_REASON is not None, reason=f"bubblewrap unusable here: {_REASON}")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="host sandbox uids are leased only by a root validator")
UID_BASE = 500_000 + (os.getpid() % 10_000) * 8
LIMITS = SandboxLimits(mode="batch", timeout_s=60.0, kill_grace_s=0.5, memory_mb=768, pids=48, tmpfs_mb=16,
                       file_size_mb=8)
ROOT = Path(__file__).resolve().parents[2]
LOADS = ["idle", "oversubscribed"]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with gateway_world() as w:
        yield w


@pytest.fixture
def load(request: pytest.FixtureRequest) -> Iterator[str]:
    """``oversubscribed``: two busy-loop processes per core for the test's duration (killed after it)."""
    busy: list[subprocess.Popen[bytes]] = []
    if request.param == "oversubscribed":
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield request.param
    finally:
        for p in busy:
            p.kill()
            p.wait()


def _backends() -> list[Any]:
    return [pytest.param("bubblewrap", marks=needs_bwrap), "process"]


def _sandbox(name: str) -> Any:
    return get_sandbox(name, allow_non_hermetic=True, **({"uid_base": UID_BASE} if name == "bubblewrap" else {}))


def _problems(*queries: str) -> list[dict[str, Any]]:
    return [{"problem_id": f"{i:02d}-{q}", "query": q} for i, q in enumerate(queries)]


def _counting(sandbox: Any, kill_at_launch: bool = False) -> Any:
    """``sandbox`` counting its batch launches; ``kill_at_launch``: each sandbox is SIGKILLed from outside as soon as
    it is launched (a sandbox that always dies)."""
    sandbox.launches = 0
    launch_batch = sandbox._launch_batch

    def counted(agent: bytes, config: dict[str, Any], fds: list[int], *args: Any, **kwargs: Any) -> Any:
        if kill_at_launch:
            # the executor is handed input it cannot read, so it dies before any problem or agent code can run
            # whatever the machine's load; the kill below then comes on top of a death that has already happened
            bad = memfd("broken-input", b"\x00 not the batch input")
            fds = [bad if fd == config["input_fd"] else fd for fd in fds]
            config = {**config, "input_fd": bad}
        try:
            launch = launch_batch(agent, config, fds, *args, **kwargs)
        finally:
            if kill_at_launch:
                os.close(config["input_fd"])  # ours; the launcher closes the input it made
        sandbox.launches += 1
        if kill_at_launch:
            # the launcher and whatever it has started by now: on a loaded machine bwrap may already have handed
            # the work on to its child before the kill arrives
            for pid in [launch.proc.pid, *descendants(launch.proc.pid)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return launch

    sandbox._launch_batch = counted
    return sandbox


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _kill_executors() -> list[int]:
    """SIGKILL, from outside, every batch executor this test process runs (inside bubblewrap or not): the process
    running the sandbox entry whose parent does not (the zygote and the problems are its descendants)."""
    entry = str(paths.ENTRY).encode()
    victims = [pid for pid in descendants(os.getpid()) if entry in _cmdline(pid) and entry not in _cmdline(_ppid(pid))]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    return victims


@pytest.mark.parametrize("load", LOADS, indirect=True)
@pytest.mark.parametrize("backend", _backends())
def test_a_sandbox_killed_mid_run_is_retried_and_gives_the_agents_true_outcome(world: World, backend: str,
                                                                               load: str) -> None:
    sandbox = _counting(_sandbox(backend))
    problems = _problems("sleep:0", "sleep:2", "sleep:2", "search")
    outs: dict[str, Outcome] = {}
    killed: list[int] = []
    for out in sandbox.run(agent("mixed"), problems, gateway_socket=world.socket, env_for=world.env_for,
                           limits=LIMITS, workers=3):
        outs[out.envelope.problem_id] = out
        if not killed:  # the first problem is in; the two sleepers are running: the machine kills the sandbox
            killed = _kill_executors()
            assert killed, "no batch executor found to kill"
    for pid in outs:
        world.calls(pid)
    assert set(outs) == {p["problem_id"] for p in problems}
    for pid, out in outs.items():
        assert out.envelope.status == "SUCCESS" and not out.infra_failure, (pid, out.envelope.error)
    assert outs["01-sleep:2"].envelope.dialogue[0]["slept"] == 2.0 and outs["03-search"].envelope.dialogue[0]["hits"]
    assert sandbox.launches >= 2  # the cut-off problems ran again in a fresh sandbox
    assert not processes_with_uid_in(UID_BASE)


@pytest.mark.parametrize("backend", _backends())
def test_a_sandbox_that_always_dies_gives_infrastructure_outcomes(world: World, backend: str) -> None:
    sandbox = _counting(_sandbox(backend), kill_at_launch=True)
    problems = _problems("search", "sleep:0", "search")
    outs = {o.envelope.problem_id: o for o in sandbox.run(agent("mixed"), problems, gateway_socket=world.socket,
                                                         env_for=world.env_for, limits=LIMITS, workers=2)}
    for pid in outs:
        world.calls(pid)
    assert set(outs) == {p["problem_id"] for p in problems}
    for out in outs.values():
        assert out.infra_failure and out.envelope.error["type"] == "SandboxError", out.envelope.error
        assert "the batch sandbox ended" in out.envelope.error["message"]
    assert sandbox.launches == RETRIES + 1
    assert not processes_with_uid_in(UID_BASE)


@pytest.mark.parametrize("backend", _backends())
def test_an_agent_that_kills_its_executor_is_charged_not_excused(world: World, backend: str, tmp_path: Path) -> None:
    """Code of the agent (here: at import, in the zygote) can signal the executor, which shares its uid: every
    sandbox dying after the agent's code started is the agent's FAILED, never an infrastructure outcome that would
    spare it a score."""
    f = tmp_path / "killer.py"
    f.write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n\ndef agent_main(p):\n    return []\n")
    sandbox = _counting(_sandbox(backend))
    problems = _problems("a", "b")
    outs = {o.envelope.problem_id: o for o in sandbox.run(f, problems, gateway_socket=world.socket,
                                                         env_for=world.env_for, limits=LIMITS, workers=2)}
    for pid in outs:
        world.calls(pid)
    assert set(outs) == {p["problem_id"] for p in problems}
    for out in outs.values():
        assert out.envelope.status == "FAILED" and not out.infra_failure, out.envelope.error
        assert "after the agent's code had started" in out.envelope.error["message"]
    assert sandbox.launches == RETRIES + 1
    assert not processes_with_uid_in(UID_BASE)


@pytest.mark.parametrize("backend", _backends())
def test_a_per_problem_sandbox_that_never_starts_is_retried_then_the_validators_failure(
        world: World, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-problem mode: the sandbox's interpreter cannot open the entry (it exits before the agent's code could
    run), so each problem is tried in RETRIES + 1 fresh sandboxes and ends an infrastructure outcome."""
    monkeypatch.setattr(paths, "ENTRY", tmp_path / "missing-entry.py")
    asked: list[str] = []

    def env_for(problem_id: str) -> dict[str, str]:
        asked.append(problem_id)
        return world.env_for(problem_id)

    problems = _problems("search", "sleep:0")
    outs = {o.envelope.problem_id: o for o in _sandbox(backend).run(
        agent("mixed"), problems, gateway_socket=world.socket, env_for=env_for,
        limits=LIMITS.model_copy(update={"mode": "per_problem"}), workers=2)}
    for pid in outs:
        world.calls(pid)
    assert set(outs) == {p["problem_id"] for p in problems}
    for out in outs.values():
        assert out.infra_failure and out.envelope.error["type"] == "SandboxError", out.envelope.error
        assert "did not start" in out.envelope.error["message"]
    assert sorted(asked) == sorted([p["problem_id"] for p in problems] * (RETRIES + 1))
    assert not processes_with_uid_in(UID_BASE)


_BESIDE = """
import json, sys
from shoparena.validator.sandbox import SandboxLimits, get_sandbox
from tests.validator.hostile import agent
from tests.validator.hostile.world import gateway_world
limits = SandboxLimits.model_validate_json(sys.argv[2])
with gateway_world() as w:
    sandbox = get_sandbox("bubblewrap", uid_base=int(sys.argv[1]))
    for o in sandbox.run(agent("mixed"), [{"problem_id": "b-%d" % i, "query": "sleep:6"} for i in range(2)],
                         gateway_socket=w.socket, env_for=w.env_for, limits=limits, workers=2):
        print(json.dumps({"status": o.envelope.status, "error": o.envelope.error, "uid": o.enforced.get("uid")}))
"""


@needs_bwrap
@needs_root
@pytest.mark.parametrize("load", LOADS, indirect=True)
def test_two_validators_on_one_host_never_kill_each_others_sandbox(world: World, load: str) -> None:
    """A second validator (another test run) with the same uid base runs a batch beside this one's."""
    beside = subprocess.Popen([sys.executable, "-c", _BESIDE, str(UID_BASE), LIMITS.model_dump_json()], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 180
        while not processes_with_uid_in(UID_BASE) and beside.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        theirs = processes_with_uid_in(UID_BASE)
        assert theirs, beside.communicate(timeout=60)[1].decode()[-2000:]
        their_uid = int(next(line for line in Path(f"/proc/{min(theirs)}/status").read_text().splitlines()
                             if line.startswith("Uid:")).split()[1])
        outs = {o.envelope.problem_id: o for o in _sandbox("bubblewrap").run(
            agent("mixed"), _problems("search", "sleep:0"), gateway_socket=world.socket, env_for=world.env_for,
            limits=LIMITS, workers=2)}
        for pid in outs:
            world.calls(pid)
        for out in outs.values():
            assert out.envelope.status == "SUCCESS", out.envelope.error
            assert f"host uid {their_uid} " not in out.enforced["uid"]  # its own uid, not the running one's
        stdout, stderr = beside.communicate(timeout=180)
    finally:
        if beside.poll() is None:
            beside.kill()
            beside.wait()
    assert beside.returncode == 0, stderr.decode()[-2000:]
    results = [json.loads(line) for line in stdout.decode().splitlines()]
    assert len(results) == 2 and all(r["status"] == "SUCCESS" for r in results), results  # not killed by our reclaim


@pytest.fixture(scope="module")
def catalog_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("overload")
    index = create_catalog(generate_catalog(200, seed=9), root / "cat")
    return root / "cat", generate_problems(index, n=3, seed=2, paraphrases=0)


def test_an_evaluation_whose_sandbox_always_dies_never_lowers_the_agents_score(
        catalog_world: tuple[Path, list], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, problems = catalog_world
    spec = AgentSpec(path=str(Path(core.__file__).parents[1] / "agents" / "react.py"), agent_id="react")
    config = ValidatorConfig(sandbox="process", allow_non_hermetic=True, workers=2,
                             limits=SandboxLimits(timeout_s=60, memory_mb=2048))
    healthy = core.open_sandbox
    dying = _counting(ProcessSandbox(), kill_at_launch=True)
    with open_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
        monkeypatch.setattr(core, "open_sandbox", lambda *_a: dying)
        broken = evaluate(spec, problems, catalog, store, config)
        assert broken.status == "FAILED" and broken.final_score is None
        assert (broken.failure_reason or "").startswith("sandbox_unavailable: the sandbox failed on 3 of 3 problems")
        assert broken.records_written == 0 and not list(store.query(eval_run_id=broken.eval_run_id))
        assert {line.status for line in broken.problems} == {"INFRA_FAILED"}
        monkeypatch.setattr(core, "open_sandbox", healthy)
        again = evaluate(spec, problems, catalog, store, config)  # the same evaluation id: it runs what is missing
    with open_store(f"sqlite:///{tmp_path / 'b.db'}") as store:
        fresh = evaluate(spec, problems, catalog, store, config)
    assert again.eval_run_id == broken.eval_run_id and again.status == "SUCCESS" and again.records_written == 3
    assert fresh.status == "SUCCESS" and fresh.successful_problems > 0
    assert (again.final_score, again.success_rate) == (fresh.final_score, fresh.success_rate)


def test_a_run_whose_sandbox_always_dies_keeps_no_episode_and_resumes(
        catalog_world: tuple[Path, list], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, problems = catalog_world
    config = RunConfig(agent=str(Path(core.__file__).parents[1] / "agents" / "react.py"), seed=3, timeout_s=60,
                       concurrency=2)
    healthy = core.open_sandbox
    monkeypatch.setattr(core, "open_sandbox", lambda *_a: _counting(ProcessSandbox(), kill_at_launch=True))
    with pytest.raises(BackendError, match="the sandbox failed on 3 episode") as caught:
        run_agents(catalog, problems, config, tmp_path / "run")
    assert caught.value.exit_code == 5 and "--resume" in (caught.value.hint or "")
    assert len((tmp_path / "run" / PARTIAL).read_text().splitlines()) == 1  # the header: no episode was written
    assert not (tmp_path / "run" / "summary.json").exists()
    monkeypatch.setattr(core, "open_sandbox", healthy)
    resumed = run_agents(catalog, problems, config, tmp_path / "run", resume=True)
    fresh = run_agents(catalog, problems, config, tmp_path / "fresh")
    assert (resumed.asr, resumed.statuses) == (fresh.asr, fresh.statuses) and sum(fresh.statuses.values()) == 3
