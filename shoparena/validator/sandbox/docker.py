"""The Docker backend, for production validators: ORO's ``build_sandbox_command`` flags (docs/arena.md §4).

One ``docker run --rm`` per problem from an image that carries Python and the ``shoparena`` package (the agent's
imports). Bound into the container: the agent file, the sanitised problem and the entry script read-only under
/sandbox, the gateway socket at /run/gateway.sock, and a per-problem report directory (the only writable bind,
like ORO's logs directory) where the entry writes its report. Network ``none`` by default: with the gateway on a
Unix socket the container needs no interface at all (pass ``network=`` an internal network to mirror ORO's
compose setup). The run token and other variables go through an ``--env-file`` (mode 0600), not argv. Nothing
of the host's package is mounted: the agent imports the image's ``shoparena`` (the entry config names no package
path), so the image must carry the validator's version of the package.
:func:`docker_argv` is a pure function so the exact command is unit-tested without a daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from shoparena.validator.sandbox import paths
from shoparena.validator.sandbox.base import BaseSandbox, mode_text
from shoparena.validator.sandbox.limits import rlimits
from shoparena.validator.sandbox.supervise import make_outcome, watch
from shoparena.validator.sandbox.types import Outcome, SandboxLimits

__all__ = ["DockerSandbox", "docker_argv"]

REPORT = "/sandbox/out/report.jsonl"


def docker_argv(*, image: str, name: str, limits: SandboxLimits, agent: Path, problem: Path, entry: Path,
                gateway_socket: Path, out_dir: Path, env_file: Path, network: str = "none",
                user: str = "1000:1000", python: str = "python", docker: str = "docker") -> list[str]:
    """The exact ``docker run`` command line for one problem (pure)."""
    mb = limits.memory_mb
    config = {"agent": "/sandbox/agent.py", "problem": "/sandbox/problem.json", "out_path": REPORT,
              "rlimits": {k: v for k, v in rlimits(limits, nproc=False).items() if k in ("AS", "CPU")}}
    return [
        docker, "run", "--rm", "--name", name,
        "--network", network,
        "--memory", f"{mb}m", "--memory-swap", f"{mb}m",
        "--pids-limit", str(limits.pids),
        "--ulimit", f"nofile={limits.open_files}:{limits.open_files}",
        "--ulimit", "core=0:0",
        "--ulimit", f"fsize={limits.file_size_mb << 20}:{limits.file_size_mb << 20}",
        "--cpu-shares", str(limits.cpu_shares),
        "--user", user,
        "--cap-drop=ALL",
        "--security-opt", "no-new-privileges=true",
        "--read-only",
        "--tmpfs", f"/tmp:rw,noexec,nosuid,size={limits.tmpfs_mb}m",
        "--workdir", "/tmp",
        "--env-file", str(env_file),
        "-v", f"{agent}:/sandbox/agent.py:ro",
        "-v", f"{problem}:/sandbox/problem.json:ro",
        "-v", f"{entry}:/sandbox/entry.py:ro",
        "-v", f"{gateway_socket}:/run/gateway.sock",
        "-v", f"{out_dir}:/sandbox/out:rw",
        image,
        python, "-I", "-B", "/sandbox/entry.py", json.dumps(config),
    ]


class DockerSandbox(BaseSandbox):
    """``docker``: hermetic, needs a Docker engine and an ``image`` with Python and ``shoparena`` installed."""

    name = "docker"
    hermetic = True

    def __init__(self, *, image: str = "shoparena-sandbox:latest", network: str = "none", user: str = "1000:1000",
                 python: str = "python", docker: str = "docker", forbidden: Sequence[object] = ()) -> None:
        """``forbidden`` is accepted for a uniform constructor; nothing of the host but the files listed in
        :func:`docker_argv` is mounted."""
        self.image, self.network, self.user, self.python = image, network, user, python
        self.docker = shutil.which(docker) or docker

    @cached_property
    def _probe(self) -> str | None:
        if not shutil.which(self.docker):
            return "the docker CLI is not installed"
        try:
            r = subprocess.run([self.docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                               timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`docker info` failed: {exc}"
        if r.returncode:
            return f"no Docker engine: {r.stderr.decode(errors='replace').strip()[:300]}"
        return None

    def unavailable(self) -> str | None:
        return self._probe

    def describe(self, limits: SandboxLimits | None = None) -> dict[str, str]:
        lim = limits or SandboxLimits()
        return {"network": f"--network {self.network}; the gateway through /run/gateway.sock",
                "filesystem": f"--read-only; tmpfs /tmp {lim.tmpfs_mb} MB (noexec, nosuid)",
                "processes": "own container (pid namespace)", "uid": f"--user {self.user}",
                "pids": f"--pids-limit {lim.pids}", "memory": f"--memory {lim.memory_mb}m (no swap)",
                "cpu": f"--cpu-shares {lim.cpu_shares}", "files": f"--ulimit nofile={lim.open_files}",
                "seccomp": "docker default profile; --cap-drop=ALL; no-new-privileges",
                "timeout": f"{lim.timeout_s:g} s wall, docker kill TERM then KILL after {lim.kill_grace_s:g} s",
                "mode": mode_text("per_problem") + " (the docker backend has no batch mode)"}

    def _gateway_address(self, gateway_socket: Path) -> str:
        return "unix:/run/gateway.sock"

    def _run_one(self, agent: bytes, problem: dict[str, Any], env: dict[str, str], gateway_socket: Path,
                 limits: SandboxLimits, slot: int, cancel: threading.Event) -> Outcome:
        work = Path(tempfile.mkdtemp(prefix="shoparena-docker-"))
        name = f"shoparena-{uuid.uuid4().hex[:12]}"
        try:
            (work / "agent.py").write_bytes(agent)
            (work / "problem.json").write_text(json.dumps(problem), encoding="utf-8")
            out_dir = work / "out"
            out_dir.mkdir()
            out_dir.chmod(0o777)  # the container's uid writes its report here (ORO chmods its logs dir 777)
            for f in ("agent.py", "problem.json"):
                (work / f).chmod(0o444)
            work.chmod(0o755)
            env_file = work / "env"
            fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.writelines(f"{k}={v}\n" for k, v in env.items() if "\n" not in v)
            argv = docker_argv(image=self.image, name=name, limits=limits, agent=work / "agent.py",
                               problem=work / "problem.json", entry=paths.ENTRY, gateway_socket=gateway_socket,
                               out_dir=out_dir, env_file=env_file, network=self.network, user=self.user,
                               python=self.python, docker=self.docker)
            launched_wall, started = time.time(), time.monotonic()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

            def signal_tree(sig: int) -> None:
                flag = "--signal=TERM" if sig == signal.SIGTERM else "--signal=KILL"
                subprocess.run([self.docker, "kill", flag, name], capture_output=True, timeout=30)

            try:
                watched = watch(proc, None, limits, cancel, signal_tree, started)
            finally:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
            _read_report(out_dir / "report.jsonl", (limits.output_mb << 20) + 4096, watched)
            return make_outcome(problem["problem_id"], watched, backend=self.name, limits=limits,
                                launched_wall=launched_wall, counters={}, enforced=self.describe(limits))
        finally:
            subprocess.run([self.docker, "rm", "-f", name], capture_output=True, timeout=30)
            shutil.rmtree(work, ignore_errors=True)


def _read_report(path: Path, cap: int, watched: Any) -> None:
    """The report file, if it is a regular file (never through a link the agent planted), up to ``cap``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        data = fh.read(cap + 1)
    if len(data) > cap:
        watched.report_over_cap = True
    else:
        watched.report += data
