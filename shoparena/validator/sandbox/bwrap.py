"""The default backend: bubblewrap, one sandbox per batch (``batch`` mode, the default) or per problem.

Namespaces: network (only the sandbox's own loopback), pid (the validator's /proc is invisible), ipc, uts and
cgroup. Filesystem: an empty root, read-only binds of only what Python needs at their host paths
(:mod:`~shoparena.validator.sandbox.paths`), a fresh /proc and /dev, size-capped tmpfs at /tmp and /dev/shm, the agent
file and the sanitised problem read-only under /sandbox, the gateway socket at /run/gateway.sock; everything
else read-only. The agent imports the validator's own ``shoparena``: the entry puts the directory holding the
bound package (:data:`~shoparena.validator.sandbox.paths.PACKAGE_PARENT`) first on ``sys.path``, whatever the
environment's install points at. Environment: cleared, then PATH, HOME=/tmp, PYTHONDONTWRITEBYTECODE,
OMP_NUM_THREADS and the SDK variables. The whole argument list travels through a memfd (``--args``), so neither
run tokens nor paths show in the host's process table. In batch mode the sandbox runs the executor
(:mod:`.executor`) instead of one problem: no problem file, the batch arrives through an inherited memfd, each
problem runs in its own forked process (see :mod:`.batch`), and the sandbox's uid is one per concurrent batch.

Identity. A validator running as root starts bubblewrap privileged and the sandbox drops to a dedicated host uid
(``uid_base + n``, no supplementary groups) through ``setpriv`` before Python starts: a user namespace there would
map the sandbox's uid onto host root, which then owns /dev/null and every root-owned file it can see. The uid is
leased host-wide (an exclusive ``flock`` per uid, :func:`_lease_uid`), not only within this process: a finished
sandbox's uid is reclaimed by SIGKILLing every process of that uid, so two validators (or two test runs) on one
host that picked the same uid would kill each other's live sandboxes.
Capabilities: none after the drop; ``no_new_privs``; the seccomp deny-list of :mod:`.seccomp`. A non-root
validator runs bubblewrap unprivileged, in a user namespace (``--disable-userns`` after setup, uid 1000 inside).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from shoparena.errors import BackendError, ConfigError
from shoparena.validator.sandbox import paths, seccomp
from shoparena.validator.sandbox.base import BaseSandbox, memfd, mode_text
from shoparena.validator.sandbox.batch import Launch, batch_config
from shoparena.validator.sandbox.batch_cgroup import BatchCgroup
from shoparena.validator.sandbox.limits import ProblemCgroup, rlimits
from shoparena.validator.sandbox.supervise import descendants, kill_uid, make_outcome, watch
from shoparena.validator.sandbox.types import Outcome, SandboxLimits

_log = logging.getLogger(__name__)

__all__ = ["BubblewrapSandbox", "bwrap_args"]

SOCKET = "/run/gateway.sock"
AGENT = "/sandbox/agent.py"
PROBLEM = "/sandbox/problem.json"
INNER_UID = 1000
_JOIN_CGROUPS = 'for f in $SHOPARENA_CGROUPS; do echo $$ > "$f" || exit 125; done; exec "$@"'


def bwrap_args(*, privileged: bool, uid: int, binds: Sequence[Path], system: tuple[list[Path], list[tuple[str, Path]],
               list[Path]], gateway_socket: Path, data_fds: dict[str, int], seccomp_fd: int | None,
               env: dict[str, str], limits: SandboxLimits, command: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(options, command line)`` for one problem (pure): the options go through ``--args FD``, the command after
    ``--`` on bubblewrap's own command line. ``data_fds``: ``agent``, ``problem`` (not in batch mode), ``passwd``,
    ``group`` → fds whose content bubblewrap copies into read-only files; ``command``: the entry command line."""
    dirs, links, files = system
    a: list[str] = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
    if privileged:
        a += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        a += ["--unshare-user", "--disable-userns", "--uid", str(INNER_UID), "--gid", str(INNER_UID),
              "--cap-drop", "ALL"]
    a += ["--die-with-parent", "--new-session"]
    # The private /tmp first: binds below it (a checkout or venv living under /tmp) are then mounted on top of it
    # instead of being hidden by it.
    a += ["--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp"]
    masked = Path("/usr/local") if Path("/usr") in dirs else None
    for d in dirs:
        a += ["--ro-bind", str(d), str(d)]
    if masked is not None:
        a += ["--perms", "0755", "--tmpfs", str(masked)]  # site-installed tools: not the sandbox's business
    for target, link in links:
        a += ["--symlink", target, str(link)]
    for d in _mountpoints([*binds, *files, Path("/etc/passwd"), Path(AGENT), Path(SOCKET)], dirs, masked):
        a += ["--perms", "0755", "--dir", str(d)]
    for b in binds:
        a += ["--ro-bind", str(b), str(b)]
    if masked is not None:
        a += ["--remount-ro", str(masked)]
    for f in files:
        a += ["--ro-bind", str(f), str(f)]
    a += ["--perms", "0444", "--ro-bind-data", str(data_fds["passwd"]), "/etc/passwd",
          "--perms", "0444", "--ro-bind-data", str(data_fds["group"]), "/etc/group",
          "--perms", "0444", "--ro-bind-data", str(data_fds["agent"]), AGENT]
    if "problem" in data_fds:
        a += ["--perms", "0444", "--ro-bind-data", str(data_fds["problem"]), PROBLEM]
    a += ["--bind", str(gateway_socket), SOCKET,
          "--proc", "/proc", "--dev", "/dev",
          "--perms", "1777", "--size", str(min(limits.tmpfs_mb, 64) << 20), "--tmpfs", "/dev/shm",
          "--remount-ro", "/dev",
          "--remount-ro", "/", "--chdir", "/tmp", "--hostname", "sandbox", "--clearenv"]
    for key, value in env.items():
        a += ["--setenv", key, value]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    prefix: list[str] = []
    if privileged:
        prefix = ["/usr/bin/setpriv" if Path("/usr/bin/setpriv").exists() else "setpriv", f"--reuid={uid}",
                  f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--no-new-privs", "--"]
    return a, [*prefix, *command]


def _mountpoints(targets: Sequence[Path], dirs: Sequence[Path], masked: Path | None) -> list[Path]:
    """Directories to create (mode 0755) so every target has a parent: not ``/``, not inside a read-only bound
    directory, except under the writable ``masked`` tmpfs."""
    out: list[Path] = []
    for target in targets:
        for parent in reversed(target.parents):
            inside_mask = masked is not None and masked in parent.parents
            provided = parent in (Path("/"), Path("/tmp")) or parent == masked or (
                not inside_mask and any(parent == d or d in parent.parents for d in dirs))
            if not provided and parent not in out:
                out.append(parent)
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class BubblewrapSandbox(BaseSandbox):
    """``bubblewrap`` (``bwrap``): hermetic, the default. ``uid_base``: the lowest host uid a sandbox leases when the
    validator is root; ``forbidden``: paths no bind may contain (catalogs, problem banks)."""

    name = "bubblewrap"
    hermetic = True

    def __init__(self, *, uid_base: int = 61000, forbidden: Sequence[str | os.PathLike[str]] = (),
                 use_seccomp: bool = True, bwrap: str = "bwrap") -> None:
        self.uid_base = uid_base
        self.forbidden = tuple(forbidden)
        self.bwrap = shutil.which(bwrap) or bwrap
        self.privileged = os.geteuid() == 0
        self.seccomp = use_seccomp and seccomp.supported()

    @cached_property
    def _probe(self) -> str | None:
        if not shutil.which(self.bwrap):
            return "bwrap not found (Debian: apt-get install -y bubblewrap)"
        if self.privileged and not shutil.which("setpriv"):
            return "setpriv not found (Debian: util-linux)"
        ns = ["--unshare-pid", "--unshare-net"] if self.privileged else ["--unshare-user", "--unshare-pid",
                                                                       "--unshare-net"]
        try:
            r = subprocess.run([self.bwrap, *ns, "--ro-bind", "/", "/", "true"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap does not run: {exc}"
        if r.returncode:
            return f"bwrap cannot create namespaces here: {r.stderr.decode(errors='replace').strip()[:300]}"
        return None

    def unavailable(self) -> str | None:
        return self._probe

    def describe(self, limits: SandboxLimits | None = None) -> dict[str, str]:
        from shoparena.validator.sandbox.limits import cgroup_bases

        lim = limits or SandboxLimits()
        return {**self._enforced(lim, {c: "cgroup" for c in cgroup_bases()}, self.uid_base),
                "mode": mode_text(self.mode(lim))}

    def _enforced(self, limits: SandboxLimits, cg: dict[str, str], uid: int) -> dict[str, str]:
        who = f"host uid {uid} (setpriv; bwrap privileged, no user namespace)" if self.privileged else \
            f"uid {INNER_UID} in a user namespace (host uid {os.getuid()}), nested user namespaces disabled"
        return {
            "network": "own network namespace: loopback only; the gateway through /run/gateway.sock",
            "filesystem": f"read-only binds (python, venv, package, /usr); tmpfs /tmp {limits.tmpfs_mb} MB",
            "processes": "own pid namespace; killed with its init",
            "uid": who,
            "pids": cg.get("pids", f"RLIMIT_NPROC={limits.pids}"),
            "memory": cg.get("memory", "no cgroup") + f"; RLIMIT_AS={limits.memory_mb} MB per process",
            "cpu": cg.get("cpu", "no cgroup") + f"; RLIMIT_CPU={limits.cpu_limit_s()} s per process",
            "files": f"RLIMIT_NOFILE={limits.open_files}, RLIMIT_FSIZE={limits.file_size_mb} MB, no core dumps",
            "seccomp": "x86-64 deny-list (namespaces, mount, keyrings, ptrace, bpf, io_uring …)" if self.seccomp
            else "off",
            "timeout": f"{limits.timeout_s:g} s wall, TERM then KILL after {limits.kill_grace_s:g} s",
            "mode": mode_text("per_problem"),
        }

    def _spawn(self, uid: int, data: dict[str, bytes], config: dict[str, Any], env: dict[str, str],
               limits: SandboxLimits, gateway_socket: Path, cgroup_procs: list[str], keep: list[int]
               ) -> subprocess.Popen[bytes]:
        """Start bubblewrap running the entry with ``config`` (the agent and ``data`` as read-only files)."""
        fds: list[int] = []
        try:
            data = {**data, "passwd": f"root:x:0:0::/:/bin/false\nsandbox:x:{uid}:{uid}::/tmp:/bin/sh\n".encode(),
                    "group": f"root:x:0:\nsandbox:x:{uid}:\n".encode()}
            data_fds = {k: memfd(k, v) for k, v in data.items()}
            fds += data_fds.values()
            seccomp_fd = memfd("seccomp", seccomp.filter_program()) if self.seccomp else None
            if seccomp_fd is not None:
                fds.append(seccomp_fd)
            config = {**config, "package_path": str(paths.PACKAGE_PARENT)}  # the package's only bind below it
            command = [sys.executable, "-I", "-B", str(paths.ENTRY), json.dumps(config)]
            options, cmdline = bwrap_args(privileged=self.privileged, uid=uid, binds=paths.python_binds(self.forbidden),
                                          system=paths.system_layout(), gateway_socket=gateway_socket,
                                          data_fds=data_fds, seccomp_fd=seccomp_fd, env=env, limits=limits,
                                          command=command)
            args_fd = memfd("args", b"".join(x.encode() + b"\0" for x in options))
            fds.append(args_fd)
            argv = [self.bwrap, "--args", str(args_fd), "--", *cmdline]
            popen_env = {"PATH": "/usr/bin:/bin"}
            if cgroup_procs:
                argv = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *argv]
                popen_env["SHOPARENA_CGROUPS"] = " ".join(cgroup_procs)
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=[*keep, *fds], env=popen_env)
        finally:
            _close(fds)

    def _run_one(self, agent: bytes, problem: dict[str, Any], env: dict[str, str], gateway_socket: Path,
                 limits: SandboxLimits, slot: int, cancel: threading.Event) -> Outcome:
        lease = _lease_uid(self.uid_base) if self.privileged else None
        uid = lease.uid if lease is not None else INNER_UID
        try:
            cgroup = ProblemCgroup(limits)
        except BaseException:
            _release(lease)
            raise
        out_r, out_w = os.pipe()
        try:
            config = {"agent": AGENT, "problem": PROBLEM, "out_fd": out_w,
                      "rlimits": rlimits(limits, nproc="pids" not in cgroup.dirs or self.privileged)}
            launched_wall, started = time.time(), time.monotonic()
            proc = self._spawn(uid, {"agent": agent, "problem": json.dumps(problem).encode()}, config, env, limits,
                               gateway_socket, cgroup.procs_files if cgroup.dirs else [], [out_w])
        except BaseException:
            _close([out_r])
            cgroup.close()
            _release(lease)
            raise
        finally:
            _close([out_w])

        def signal_tree(sig: int) -> None:
            tree = descendants(proc.pid)
            if sig == signal.SIGTERM:  # the agent's processes only: TERM to bwrap would skip the grace period
                targets = [p for p in tree if _comm(p) != "bwrap"]
            else:
                targets = [proc.pid, *tree]
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            if sig == signal.SIGKILL:
                cgroup.kill()

        try:
            watched = watch(proc, out_r, limits, cancel, signal_tree, started)
        finally:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        counters = cgroup.counters()
        cgroup.close()
        _release(lease)
        return make_outcome(problem["problem_id"], watched, backend=self.name, limits=limits,
                            launched_wall=launched_wall, counters=counters,
                            enforced=self._enforced(limits, cgroup.enforced, uid))

    def _launch_batch(self, agent: bytes, config: dict[str, Any], fds: list[int], env: dict[str, str],
                      gateway_socket: Path, limits: SandboxLimits, cgroup: BatchCgroup | None) -> Launch:
        lease = _lease_uid(self.uid_base) if self.privileged else None
        uid = lease.uid if lease is not None else INNER_UID
        leaves = config["ctl_fd"] is not None
        config = {**config, **batch_config(limits, config["workers"], nproc=self.privileged or cgroup is None,
                                           problem_cgroups=leaves), "agent": AGENT, "tmp": "/tmp",
                  "dir_vars": ["HOME"]}
        try:
            proc = self._spawn(uid, {"agent": agent}, config, env, limits, gateway_socket,
                               cgroup.procs_files if cgroup is not None else [], fds)
        except BaseException:
            _release(lease)
            raise

        def kill() -> None:
            for pid in [proc.pid, *descendants(proc.pid)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if cgroup is not None:
                cgroup.kill()

        def cleanup() -> None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            _release(lease)

        return Launch(proc=proc, kill=kill, cleanup=cleanup, ancestors=(proc.pid,),
                      enforced=self._enforced(limits, cgroup.enforced() if cgroup is not None else {}, uid))


def _reclaim_uid(uid: int) -> None:
    """Make sure nothing of a finished sandbox still runs under its host uid before the uid is used again."""
    left = kill_uid(uid)
    if left:
        _log.warning("sandbox uid %s: %d process(es) still present 5 s after SIGKILL: %s", uid, len(left),
                     sorted(left)[:10])


#: Where the host-wide uid leases live (root only; the validator runs as root whenever it leases uids).
LEASE_DIRS = (Path("/run/shoparena-sandbox-uids"), Path(tempfile.gettempdir()) / "shoparena-sandbox-uids-0")
_MAX_UIDS = 4096


@dataclass
class UidLease:
    """One host uid held exclusively, host-wide, until :func:`_release` (or the process's death) frees it."""

    uid: int
    fd: int


def _lease_dir() -> Path:
    for d in LEASE_DIRS:
        try:
            d.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(d)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            return d
    raise ConfigError(f"no private directory for sandbox uid leases ({', '.join(map(str, LEASE_DIRS))})",
                      hint="make /run writable for the validator (root), or free the directory named")


def _lease_uid(base: int) -> UidLease:
    """The lowest uid from ``base`` that no sandbox on this host uses, held under an exclusive ``flock`` (freed by
    the kernel if this process dies). Whatever a dead holder left running under it is killed first."""
    d = _lease_dir()
    for uid in range(base, base + _MAX_UIDS):
        fd = os.open(d / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _reclaim_uid(uid)
        return UidLease(uid, fd)
    raise BackendError(f"all {_MAX_UIDS} sandbox uids from {base} are in use on this host",
                       hint="wait for other validators to finish, or pass another uid_base")


def _release(lease: UidLease | None) -> None:
    """Kill what still runs under the lease's uid, then free it for the next sandbox (of any process)."""
    if lease is None:
        return
    try:
        _reclaim_uid(lease.uid)
    finally:
        os.close(lease.fd)
