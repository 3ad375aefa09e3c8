"""The NON-hermetic fallback: a plain subprocess per problem, with rlimits (and cgroups where writable).

For machines without bubblewrap or Docker, to test the validator's logic only. The agent runs as the
validator's own user, sees the whole filesystem and the network, and can read the catalog and the ground
truth: :attr:`ProcessSandbox.hermetic` is False and :func:`~shoparena.validator.sandbox.get_sandbox` refuses it
unless ``allow_non_hermetic=True`` (the CLI's ``--allow-non-hermetic``). It shares the entry, the report pipe,
the limits and the timeout handling with the hermetic backends, so the validator sees identical outcomes. Batch
mode runs the same executor as bubblewrap's (:mod:`.executor`), as a plain subprocess in a private directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shoparena.validator.sandbox import paths
from shoparena.validator.sandbox.base import BaseSandbox, mode_text
from shoparena.validator.sandbox.batch import Launch, batch_config
from shoparena.validator.sandbox.batch_cgroup import BatchCgroup
from shoparena.validator.sandbox.bwrap import _JOIN_CGROUPS
from shoparena.validator.sandbox.limits import ProblemCgroup, cgroup_bases, rlimits
from shoparena.validator.sandbox.supervise import make_outcome, watch
from shoparena.validator.sandbox.types import Outcome, SandboxLimits

__all__ = ["ProcessSandbox"]


class ProcessSandbox(BaseSandbox):
    """``process``: one subprocess per problem in its own session and private working directory."""

    name = "process"
    hermetic = False

    def __init__(self, *, forbidden: Sequence[object] = ()) -> None:
        """``forbidden`` is accepted for a uniform constructor and ignored: this backend hides nothing."""

    def unavailable(self) -> str | None:
        return None

    def describe(self, limits: SandboxLimits | None = None) -> dict[str, str]:
        lim = limits or SandboxLimits()
        return {**self._enforced(lim, {c: "cgroup" for c in cgroup_bases()}), "mode": mode_text(self.mode(lim))}

    def _gateway_address(self, gateway_socket: Path) -> str:
        return f"unix:{gateway_socket}"

    def _enforced(self, limits: SandboxLimits, cg: dict[str, str]) -> dict[str, str]:
        none = "NONE (non-hermetic process backend)"
        nproc = "none (root: RLIMIT_NPROC does not apply)" if os.geteuid() == 0 else "none"
        return {"network": none, "filesystem": none, "processes": "own session; killed by process group",
                "uid": f"the validator's own (uid {os.geteuid()})", "pids": cg.get("pids", nproc),
                "memory": cg.get("memory", "no cgroup") + f"; RLIMIT_AS={limits.memory_mb} MB per process",
                "cpu": cg.get("cpu", "no cgroup") + f"; RLIMIT_CPU={limits.cpu_limit_s()} s per process",
                "files": f"RLIMIT_NOFILE={limits.open_files}, RLIMIT_FSIZE={limits.file_size_mb} MB",
                "seccomp": "off",
                "timeout": f"{limits.timeout_s:g} s wall, TERM then KILL after {limits.kill_grace_s:g} s",
                "mode": mode_text("per_problem")}

    def _run_one(self, agent: bytes, problem: dict[str, Any], env: dict[str, str], gateway_socket: Path,
                 limits: SandboxLimits, slot: int, cancel: threading.Event) -> Outcome:
        work = Path(tempfile.mkdtemp(prefix="shoparena-sbx-"))
        cgroup = ProblemCgroup(limits)
        out_r, out_w = os.pipe()
        try:
            (work / "agent.py").write_bytes(agent)
            (work / "problem.json").write_text(json.dumps(problem), encoding="utf-8")
            (work / "tmp").mkdir()
            config = {"agent": str(work / "agent.py"), "problem": str(work / "problem.json"), "out_fd": out_w,
                      "rlimits": rlimits(limits, nproc=False), "package_path": _package_path(work)}
            argv = [sys.executable, "-I", "-B", str(paths.ENTRY), json.dumps(config)]
            env = {**env, "HOME": str(work / "tmp"), "TMPDIR": str(work / "tmp")}
            if cgroup.dirs:
                argv = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *argv]
                env["SHOPARENA_CGROUPS"] = " ".join(cgroup.procs_files)
            launched_wall, started = time.time(), time.monotonic()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=[out_w], env=env, cwd=work / "tmp", start_new_session=True)
        except BaseException:
            os.close(out_r)
            cgroup.close()
            shutil.rmtree(work, ignore_errors=True)
            raise
        finally:
            os.close(out_w)

        def signal_tree(sig: int) -> None:
            try:
                os.killpg(proc.pid, sig)
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
            signal_tree(signal.SIGKILL)  # whatever the agent left running in its session
            counters = cgroup.counters()
            cgroup.close()
            shutil.rmtree(work, ignore_errors=True)
        return make_outcome(problem["problem_id"], watched, backend=self.name, limits=limits,
                            launched_wall=launched_wall, counters=counters, enforced=self._enforced(
                                limits, cgroup.enforced))

    def _launch_batch(self, agent: bytes, config: dict[str, Any], fds: list[int], env: dict[str, str],
                      gateway_socket: Path, limits: SandboxLimits, cgroup: BatchCgroup | None) -> Launch:
        work = Path(tempfile.mkdtemp(prefix="shoparena-sbx-"))
        try:
            (work / "agent.py").write_bytes(agent)
            (work / "tmp").mkdir()
            config = {**config, **batch_config(limits, config["workers"], nproc=False,
                                               problem_cgroups=config["ctl_fd"] is not None),
                      "agent": str(work / "agent.py"), "tmp": str(work / "tmp"), "dir_vars": ["HOME", "TMPDIR"],
                      "package_path": _package_path(work)}
            argv = [sys.executable, "-I", "-B", str(paths.ENTRY), json.dumps(config)]
            env = {**env, "HOME": str(work / "tmp"), "TMPDIR": str(work / "tmp")}
            if cgroup is not None:
                argv = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *argv]
                env["SHOPARENA_CGROUPS"] = " ".join(cgroup.procs_files)
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=fds, env=env, cwd=work / "tmp", start_new_session=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise

        def kill() -> None:
            if proc.poll() is None:  # the executor kills the problems' process groups on TERM
                _killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
            _killpg(proc.pid, signal.SIGKILL)
            if cgroup is not None:
                cgroup.kill()

        def cleanup() -> None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            shutil.rmtree(work, ignore_errors=True)

        return Launch(proc=proc, kill=kill, cleanup=cleanup, ancestors=(proc.pid,),
                      enforced=self._enforced(limits, cgroup.enforced() if cgroup is not None else {}))


def _package_path(work: Path) -> str:
    """A directory in ``work`` holding only a link to the validator's package (:data:`paths.PACKAGE_DIR`): the
    entry puts it first on ``sys.path``, so the agent imports the validator's own copy of ``shoparena``. Not
    :data:`paths.PACKAGE_PARENT` itself: unbound, that is the whole checkout, whose other top-level directories
    (``tests``, ``scripts``) would shadow the agent's imports of the same names."""
    pkg = work / "pkg"
    pkg.mkdir()
    (pkg / paths.PACKAGE_DIR.name).symlink_to(paths.PACKAGE_DIR, target_is_directory=True)
    return str(pkg)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
