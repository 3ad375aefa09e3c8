"""The sandbox's pure parts: bubblewrap and docker command lines, binds, seccomp program, report parsing,
the registry. No sandbox is started here."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, NotFoundError
from shoparena.validator.sandbox import SandboxLimits, get_sandbox, sandbox_names
from shoparena.validator.sandbox.bwrap import AGENT, PROBLEM, SOCKET, bwrap_args
from shoparena.validator.sandbox.docker import docker_argv
from shoparena.validator.sandbox.limits import rlimits
from shoparena.validator.sandbox.paths import PACKAGE_DIR, python_binds, system_layout
from shoparena.validator.sandbox.seccomp import DENIED, filter_program
from shoparena.validator.sandbox.supervise import parse_report

FDS = {"agent": 10, "problem": 11, "passwd": 12, "group": 13}
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "SHOPARENA_GATEWAY": "unix:/run/gateway.sock",
       "SHOPARENA_RUN_TOKEN": "tok"}


def _args(privileged: bool, **kw) -> tuple[list[str], list[str]]:
    return bwrap_args(privileged=privileged, uid=61003, binds=python_binds(), system=system_layout(),
                      gateway_socket=Path("/srv/gw/gateway.sock"), data_fds=FDS, seccomp_fd=kw.get("seccomp", 14),
                      env=ENV, limits=SandboxLimits(tmpfs_mb=32), command=["python", "entry.py"])


def _pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_bwrap_privileged_isolates_and_drops_to_a_host_uid() -> None:
    opts, cmd = _args(True)
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
                 "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in opts
    assert "--unshare-user" not in opts  # as root a user namespace would map the sandbox onto host root
    assert opts[opts.index("--cap-drop") + 1] == "ALL"
    assert cmd[:3] == ["/usr/bin/setpriv", "--reuid=61003", "--regid=61003"] and "--clear-groups" in cmd
    assert cmd[-2:] == ["python", "entry.py"]
    assert opts[opts.index("--seccomp") + 1] == "14"
    # the filesystem: read-only binds at the same paths, nothing writable but the tmpfs
    ro = dict(_pairs(opts, "--ro-bind"))
    assert all(src == dst for src, dst in ro.items())
    assert str(PACKAGE_DIR) in ro and str(PACKAGE_DIR.parent) not in ro and "/" not in ro
    assert _pairs(opts, "--bind") == [("/srv/gw/gateway.sock", SOCKET)]
    assert {dst for _, dst in _pairs(opts, "--ro-bind-data")} == {"/etc/passwd", "/etc/group", AGENT, PROBLEM}
    i = opts.index("/tmp", opts.index("--tmpfs") + 1)
    assert opts[i - 5: i + 1] == ["--perms", "1777", "--size", str(32 << 20), "--tmpfs", "/tmp"]
    assert [opts[j + 1] for j, a in enumerate(opts) if a == "--remount-ro"][-1] == "/"  # then all read-only
    assert dict(_pairs(opts, "--setenv")) == ENV


def test_bwrap_unprivileged_uses_a_user_namespace_without_nesting() -> None:
    opts, cmd = _args(False, seccomp=None)
    assert {"--unshare-user", "--disable-userns"} <= set(opts)
    assert opts[opts.index("--uid") + 1] == "1000" and "--seccomp" not in opts
    assert cmd == ["python", "entry.py"]


def test_binds_are_the_python_installation_only() -> None:
    binds = python_binds()
    assert PACKAGE_DIR in binds
    assert all(Path(sys.base_prefix).resolve() == b or b in Path(sys.base_prefix).resolve().parents or
               b in (PACKAGE_DIR, Path(sys.prefix).resolve()) or Path("/usr/local") in b.parents for b in binds)
    assert not any(b in (PACKAGE_DIR.parent / "tests").parents or b == PACKAGE_DIR.parent for b in binds)
    with pytest.raises(ConfigError, match="would expose"):
        python_binds(forbidden=[PACKAGE_DIR / "catalog" / "data"])


def test_docker_argv_carries_oro_flags() -> None:
    lim = SandboxLimits()
    argv = docker_argv(image="shoparena-sandbox:1", name="sbx-1", limits=lim, agent=Path("/w/agent.py"),
                       problem=Path("/w/problem.json"), entry=Path("/pkg/entry.py"),
                       gateway_socket=Path("/g/gw.sock"), out_dir=Path("/w/out"), env_file=Path("/w/env"))
    line = " ".join(argv)
    for flag in ("run --rm --name sbx-1", "--network none", "--memory 4096m --memory-swap 4096m",
                 "--pids-limit 256", "--ulimit nofile=1024:1024", "--cpu-shares 512", "--user 1000:1000",
                 "--cap-drop=ALL", "--security-opt no-new-privileges=true", "--read-only",
                 "--tmpfs /tmp:rw,noexec,nosuid,size=256m", "--env-file /w/env",
                 "-v /w/agent.py:/sandbox/agent.py:ro", "-v /w/problem.json:/sandbox/problem.json:ro",
                 "-v /pkg/entry.py:/sandbox/entry.py:ro", "-v /g/gw.sock:/run/gateway.sock",
                 "-v /w/out:/sandbox/out:rw"):
        assert flag in line, flag
    image_at = argv.index("shoparena-sandbox:1")
    assert argv[image_at + 1:image_at + 5] == ["python", "-I", "-B", "/sandbox/entry.py"]
    assert json.loads(argv[-1])["out_path"] == "/sandbox/out/report.jsonl"
    assert sum(a == "-v" for a in argv) == 5  # no data, catalog or repository mount (docs/arena.md §4)
    internal = docker_argv(image="i", name="n", limits=lim, agent=Path("a"), problem=Path("p"), entry=Path("e"),
                           gateway_socket=Path("s"), out_dir=Path("o"), env_file=Path("f"), network="sandbox-net")
    assert internal[internal.index("--network") + 1] == "sandbox-net"


def test_seccomp_program_is_well_formed() -> None:
    prog = filter_program()
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    code, _, _, k = struct.unpack("<HBBI", prog[:8])
    assert (code, k) == (0x20, 4)  # first: load the architecture
    assert {"unshare", "setns", "mount", "keyctl", "bpf", "ptrace", "io_uring_setup"} <= set(DENIED)
    last = struct.unpack("<HBBI", prog[-8:])
    assert last[0] == 0x06 and last[3] == 0x7FFF0000  # default: allow


def test_rlimits() -> None:
    lim = SandboxLimits(memory_mb=512, timeout_s=10, kill_grace_s=1)
    assert rlimits(lim, nproc=True) == {"AS": 512 << 20, "NOFILE": 1024, "FSIZE": 64 << 20, "CORE": 0,
                                        "CPU": 22, "NPROC": 256}
    assert "NPROC" not in rlimits(lim, nproc=False)


@pytest.mark.parametrize(("raw", "expect"), [
    (b'{"ready": 1.5}\n{"envelope": {"status": "SUCCESS"}}\n', (1.5, {"status": "SUCCESS"}, None)),
    (b'{"ready": 1.5}\n', (1.5, None, None)),
    (b"", (None, None, None)),
    (b'{"ready": 1}\n{"envelope": {}}\n{"envelope": {}}\n', (1.0, None, "holds 3 records")),
    (b'{"ready": 1}\n{"env": {}}\n', (1.0, None, "not {\"envelope\"")),
    (b'{"ready": 1}\n{"envelope": {"sta', (None, None, "not JSON")),
    (b'{"fake": 1}\n{"envelope": {}}\n', (None, None, "not a ready mark")),
])
def test_parse_report(raw: bytes, expect: tuple) -> None:
    ready, env, problem = parse_report(raw)
    assert (ready, env) == expect[:2]
    assert (problem is None) == (expect[2] is None) and (expect[2] is None or expect[2] in problem)


def test_registry() -> None:
    assert sandbox_names() == ["bubblewrap", "docker", "process"]
    assert get_sandbox("bwrap").name == "bubblewrap"
    with pytest.raises(NotFoundError, match="did you mean bubblewrap"):
        get_sandbox("bubblewarp")
    with pytest.raises(ConfigError, match="allow-non-hermetic"):
        get_sandbox("process")
    assert get_sandbox("process", allow_non_hermetic=True).hermetic is False
    assert get_sandbox("docker", image="x").hermetic is True
