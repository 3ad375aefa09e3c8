"""Containment, proved with real hostile agents in the bubblewrap sandbox (docs/arena.md §13, §15).

Every attack runs for real, in both modes (``batch``: one sandbox per batch, a forked process per problem;
``per_problem``); each test asserts what the agent managed (nothing), how the run was reported, and that the
sandbox still runs the next problem. Targets never leave loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoparena.validator.sandbox import Outcome, SandboxLimits, get_sandbox
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from shoparena.validator.sandbox.paths import PACKAGE_DIR, python_binds
from tests.validator.hostile import agent
from tests.validator.hostile.world import World, gateway_world, processes_with_uid_in

_REASON = BubblewrapSandbox().unavailable()
if _REASON:
    print(f"sandbox containment tests skipped: {_REASON}", file=sys.stderr)
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"bubblewrap unusable here: {_REASON}")

#: Host uids of this test process's sandboxes (privileged mode): its own range, so that a concurrent run elsewhere
#: on the machine cannot be mistaken for a leftover of ours.
UID_BASE = 200_000 + (os.getpid() % 10_000) * 8
FAST = SandboxLimits(timeout_s=8.0, kill_grace_s=0.5, memory_mb=768, pids=48, tmpfs_mb=16, file_size_mb=8)


@pytest.fixture(params=["batch", "per_problem"])
def fast(request: pytest.FixtureRequest) -> SandboxLimits:
    """:data:`FAST` in each mode."""
    return FAST.model_copy(update={"mode": request.param})


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with gateway_world() as w:
        yield w


@pytest.fixture(scope="module")
def sandbox(world: World) -> BubblewrapSandbox:
    return get_sandbox("bubblewrap", forbidden=[world.catalog, world.gt_file.parent],  # type: ignore[return-value]
                       uid_base=UID_BASE)


def _run(sandbox: BubblewrapSandbox, world: World, name: str, query: dict | str, limits: SandboxLimits,
         n: int = 1) -> list[Outcome]:
    problems = [{"problem_id": f"{name}-{i}", "query": query if isinstance(query, str) else json.dumps(query)}
                for i in range(n)]
    outs = list(sandbox.run(agent(name), problems, gateway_socket=world.socket, env_for=world.env_for,
                            limits=limits, workers=2))
    for o in outs:
        world.calls(o.envelope.problem_id)
    return sorted(outs, key=lambda o: o.envelope.problem_id)


def _still_works(sandbox: BubblewrapSandbox, world: World, limits: SandboxLimits) -> None:
    """The validator keeps going: the next problem runs and searches through the gateway."""
    problem = world.problems[0]
    [out] = list(sandbox.run(agent("gateway"), [problem.public_view()], gateway_socket=world.socket,
                             env_for=world.env_for, limits=limits))
    calls = world.calls(problem.problem_id)
    assert out.envelope.status == "SUCCESS", out.envelope.error
    assert out.envelope.dialogue and out.envelope.dialogue[0]["hits"]
    assert [c.kind for c in calls] == ["search"]


def _sandbox_uids() -> set[int]:
    return processes_with_uid_in(UID_BASE)


def _blob(out: Outcome) -> str:
    return out.model_dump_json() + out.stdout_tail + out.stderr_tail


def test_network_reaches_nothing_on_the_host(sandbox: BubblewrapSandbox, world: World, fast: SandboxLimits) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    abstract_name = "shoparena-test-" + secrets.token_hex(6)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    try:
        [out] = _run(sandbox, world, "net", {"port": listener.getsockname()[1], "abstract": abstract_name}, fast)
        for sock in (listener, abstract):
            with pytest.raises(BlockingIOError):
                sock.accept()  # nobody ever connected
    finally:
        listener.close()
        abstract.close()
    assert out.envelope.status == "SUCCESS"
    seen = out.envelope.dialogue[0]["net"]
    assert "CONNECTED" not in json.dumps(seen)
    assert "ConnectionRefusedError" in seen["127.0.0.1"]
    assert seen["interfaces"] == ["lo"]
    _still_works(sandbox, world, fast)


def test_catalog_ground_truth_and_validator_secrets_stay_out(sandbox: BubblewrapSandbox, world: World,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            fast: SandboxLimits) -> None:
    secret = "VALIDATOR-SECRET-" + secrets.token_hex(8)
    monkeypatch.setenv("SHOPARENA_TEST_SECRET", secret)
    paths = [str(world.gt_file), str(world.documents), str(world.catalog / "index"),
             str(PACKAGE_DIR.parent / "tests" / "data" / "oro_suites" / "problem_suite_v3.json")]
    [out] = _run(sandbox, world, "snoop", {"paths": paths, "validator_pid": os.getpid()}, fast)
    assert out.envelope.status == "SUCCESS", out.envelope.error
    found = out.envelope.dialogue[0]["snoop"]
    for p in [*paths, f"/proc/{os.getpid()}/environ", "/proc/1/environ"]:
        assert not found[p].startswith("READ"), (p, found[p][:200])
    assert found["files_mentioning_canary"] == []
    assert world.canary not in _blob(out) and secret not in _blob(out)
    assert world.tokens == {}  # the run token the agent saw was its own, and it is closed now
    assert set(found["env"]) == {"PATH", "HOME", "PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS", "LANG",
                                 "SHOPARENA_GATEWAY", "SHOPARENA_RUN_TOKEN", "SHOPARENA_MODEL", "PWD"}
    # init, the agent (batch: + the executor and the zygote), nothing of the host
    assert len([p for p in found["proc"] if p.isdigit()]) <= (3 if fast.mode == "per_problem" else 4)
    assert str(world.root) not in found["/proc/1/cmdline"]  # options travel through a memfd, not argv
    _still_works(sandbox, world, fast)


def test_fork_bomb_is_capped_and_fully_reaped(sandbox: BubblewrapSandbox, world: World, fast: SandboxLimits) -> None:
    limits = fast.model_copy(update={"timeout_s": 2.0})
    [out] = _run(sandbox, world, "forkbomb", "{}", limits)
    assert out.envelope.status == "TIMED_OUT"
    if "cgroup" in out.enforced["pids"]:
        assert out.counters["pids_peak"] <= limits.pids and out.counters["pids_max_hits"] > 0
    assert out.wall_s < limits.timeout_s + limits.kill_grace_s + 3
    assert not _sandbox_uids()  # every process of the bomb is gone
    _still_works(sandbox, world, fast)


def test_memory_bomb_in_one_process_fails_cleanly(sandbox: BubblewrapSandbox, world: World,
                                                  fast: SandboxLimits) -> None:
    [out] = _run(sandbox, world, "membomb", {"mode": "inline"}, fast)
    assert out.envelope.status == "FAILED"
    assert out.envelope.error["type"] == "MemoryError"
    _still_works(sandbox, world, fast)


def test_memory_bomb_spread_over_processes_hits_the_tree_cap(sandbox: BubblewrapSandbox, world: World,
                                                             fast: SandboxLimits) -> None:
    limits = fast.model_copy(update={"memory_mb": 512})
    [out] = _run(sandbox, world, "membomb", {"mode": "children"}, limits)
    if "cgroup" not in out.enforced["memory"]:
        pytest.skip(f"no memory cgroup here ({out.enforced['memory']}): only RLIMIT_AS per process applies")
    assert out.counters["oom_kills"] >= 1
    assert out.counters["memory_peak_mb"] <= limits.memory_mb
    if out.envelope.status == "SUCCESS":
        assert -9 in out.envelope.dialogue[0]["children"]
    elif out.envelope.status == "FAILED":
        assert "memory limit" in out.envelope.error["message"]
    else:  # on an oversubscribed machine four interpreter starts can outlast the timeout after the OOM kill
        assert out.envelope.status == "TIMED_OUT", out.envelope
    _still_works(sandbox, world, fast)


def test_infinite_loop_ignoring_term_times_out(sandbox: BubblewrapSandbox, world: World,
                                               fast: SandboxLimits) -> None:
    limits = fast.model_copy(update={"timeout_s": 1.0})
    [out] = _run(sandbox, world, "loop", "{}", limits)
    assert out.envelope.status == "TIMED_OUT"
    assert out.envelope.error == {"type": "Timeout", "message": "agent_main exceeded 1 s (TERM, then KILL after "
                                                               "0.5 s)"}
    assert limits.timeout_s + limits.kill_grace_s <= out.wall_s < limits.timeout_s + limits.kill_grace_s + 1.5
    assert out.envelope.dialogue is None
    assert not _sandbox_uids()
    _still_works(sandbox, world, fast)


def test_writes_outside_tmp_fail_and_the_host_is_unchanged(sandbox: BubblewrapSandbox, world: World,
                                                           fast: SandboxLimits) -> None:
    host_files = [PACKAGE_DIR / "__init__.py", Path(sys.prefix) / "pyvenv.cfg", world.gt_file]
    before = {p: p.read_bytes() for p in host_files}
    targets = [*map(str, host_files), str(world.catalog / "planted.txt")]
    [out] = _run(sandbox, world, "writes", {"paths": targets}, fast)
    assert out.envelope.status == "SUCCESS", out.envelope.error
    res = out.envelope.dialogue[0]["writes"]
    assert [k for k, v in res.items() if v == "OK"] == ["/tmp/ok.txt"], res
    assert "File too large" in res["file over RLIMIT_FSIZE"]
    assert "No space left" in res["fill tmpfs"]
    assert {p: p.read_bytes() for p in host_files} == before
    assert not (world.catalog / "planted.txt").exists()
    _still_works(sandbox, world, fast)


def test_shells_run_but_see_only_the_sandbox(sandbox: BubblewrapSandbox, world: World, fast: SandboxLimits) -> None:
    [out] = _run(sandbox, world, "shell", "{}", fast)
    assert out.envelope.status == "SUCCESS", out.envelope.error
    seen = out.envelope.dialogue[0]
    assert seen["system"] == 0
    assert "uid=" in seen["id"] and "uid=0(" not in seen["id"]
    # The runtime (interpreter, venv, package) is bound at its host path, so its top-level folder shows up too
    # (/work here, /check on CI); nothing else from the host does.
    runtime_tops = {p.parts[1] for p in python_binds()}
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "root", "run",
                                 "sandbox", "sbin", "tmp", "usr"} | runtime_tops
    listing, n_procs, rest = seen["sh"].split("---\n")
    if PACKAGE_DIR.parent == Path("/work/main"):
        assert set(listing.split()) == {".", "..", ".venv", "shoparena"}  # no tests/, no data
    assert int(n_procs) <= (5 if fast.mode == "per_problem" else 7)  # batch: + the executor and the zygote
    assert "sandbox" in rest and "UNSHARED" not in rest  # own hostname; no nested namespaces
    _still_works(sandbox, world, fast)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start bubblewrap as another (unprivileged) uid")
def test_unprivileged_mode_flags_work() -> None:
    """A non-root validator runs bubblewrap in a user namespace: the same options must hold there (checked with
    a shell, since the test interpreter may live under a directory other uids cannot enter)."""
    import shutil
    import subprocess
    import tempfile

    from shoparena.validator.sandbox.base import memfd
    from shoparena.validator.sandbox.bwrap import bwrap_args
    from shoparena.validator.sandbox.paths import system_layout

    tmp_path = Path(tempfile.mkdtemp(prefix="sbx-unpriv-"))  # under /tmp: reachable by the other uid
    tmp_path.chmod(0o755)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "gw.sock"))
    listener.listen()
    os.chmod(tmp_path / "gw.sock", 0o666)
    data = {"agent": b"x = 1\n", "problem": b"{}", "passwd": b"sandbox:x:1000:1000::/tmp:/bin/sh\n",
            "group": b"sandbox:x:1000:\n"}
    fds = {k: memfd(k, v) for k, v in data.items()}
    script = ("id -u; touch /tmp/x && echo tmp-ok; touch /x 2>/dev/null || echo root-ro; "
              "chmod 600 /dev/null 2>/dev/null || echo devnull-kept; unshare -U true 2>/dev/null || echo no-userns; "
              "ls /sandbox | tr '\\n' ' '")
    opts, cmd = bwrap_args(privileged=False, uid=1000, binds=[], system=system_layout(),
                           gateway_socket=tmp_path / "gw.sock", data_fds=fds, seccomp_fd=None,
                           env={"PATH": "/usr/bin:/bin"}, limits=SandboxLimits(tmpfs_mb=8),
                           command=["/bin/sh", "-c", script])
    args_fd = memfd("args", b"".join(x.encode() + b"\0" for x in opts))
    try:
        r = subprocess.run(["setpriv", "--reuid=61099", "--regid=61099", "--clear-groups", "--", "bwrap", "--args",
                            str(args_fd), "--", *cmd], pass_fds=[args_fd, *fds.values()], capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin"}, timeout=30)
    finally:
        for fd in [args_fd, *fds.values()]:
            os.close(fd)
        listener.close()
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1000", "tmp-ok", "root-ro", "devnull-kept", "no-userns", "agent.py",
                                "problem.json"]
