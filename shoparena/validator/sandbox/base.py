"""What every backend shares: the problem loop (sanitise, environment, worker slots, mode) and small helpers.

A backend subclasses :class:`BaseSandbox` and implements ``_run_one`` (one problem, on one worker slot: the
``per_problem`` mode) and, where it supports the ``batch`` mode, ``_launch_batch`` (start one sandbox whose
command is the batch executor; :mod:`~shoparena.validator.sandbox.batch` does the rest), plus ``unavailable`` and
``describe``; :meth:`BaseSandbox.run` does the rest, so the contract of :class:`~shoparena.validator.sandbox.types.Sandbox`
is implemented once. A backend without ``_launch_batch`` runs ``per_problem`` whatever the limits ask.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError
from shoparena.validator.sandbox.sanitise import sanitise
from shoparena.validator.sandbox.supervise import run_parallel
from shoparena.validator.sandbox.types import Envelope, Outcome, SandboxLimits

__all__ = ["BaseSandbox", "base_env", "memfd", "mode_text"]

#: What every sandboxed agent gets besides the SDK variables.
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
            "LANG": "C.UTF-8"}


_MODES = {
    "batch": "batch: one sandbox per batch, the agent imported once; each problem forked into its own process (own "
             "session and process group it cannot leave, own rlimits, own pids/memory cgroups where the host allows, "
             "a fresh working directory), killed as a group at its timeout",
    "per_problem": "per_problem: a fresh sandbox and interpreter for every problem",
}


def mode_text(mode: str) -> str:
    """How a mode isolates problems, in words (``describe()["mode"]``)."""
    return _MODES[mode]


def base_env(extra: dict[str, str], gateway: str) -> dict[str, str]:
    """:data:`BASE_ENV`, then the validator's per-problem variables, then ``SHOPARENA_GATEWAY`` (not overridable)."""
    env = dict(BASE_ENV)
    env.update({str(k): str(v) for k, v in extra.items()})
    env["SHOPARENA_GATEWAY"] = gateway
    return env


def memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, positioned at its start (close-on-exec until inherited)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


RETRIES = 2
"""Fresh sandboxes a problem gets after its sandbox failed without the agent's doing (both modes)."""


def _unstarted(out: Outcome) -> Outcome:
    """A per-problem outcome whose sandbox never reached the agent's code (no ready mark: it did not start, or its
    start outlasted the timeout on a busy host) is an infrastructure failure."""
    error = out.envelope.error or {}
    if out.start_overhead_ms is None and out.envelope.dialogue is None and error.get("type") in ("SandboxError",
                                                                                                "Timeout"):
        return out.model_copy(update={"infra_failure": True})
    return out


class BaseSandbox:
    """The shared half of a backend."""

    name = "base"
    hermetic = True
    problem_cgroups = True
    """Batch mode: give each problem its own cgroups where the host allows (tests turn it off to exercise the
    fallback: rlimits plus the executor killing the biggest process group when the sandbox's process cap is hit)."""

    @property
    def supports_batch(self) -> bool:
        return type(self)._launch_batch is not BaseSandbox._launch_batch

    def mode(self, limits: SandboxLimits | None = None) -> str:
        """The mode a run with ``limits`` uses on this backend."""
        wanted = (limits or SandboxLimits()).mode
        return wanted if wanted == "per_problem" or self.supports_batch else "per_problem"

    def _launch_batch(self, agent: bytes, config: dict[str, Any], fds: list[int], env: dict[str, str],
                      gateway_socket: Path, limits: SandboxLimits, cgroup: Any) -> Any:
        raise NotImplementedError

    def unavailable(self) -> str | None:
        raise NotImplementedError

    def describe(self) -> dict[str, str]:
        raise NotImplementedError

    def _run_one(self, agent: bytes, problem: dict[str, Any], env: dict[str, str], gateway_socket: Path,
                 limits: SandboxLimits, slot: int, cancel: threading.Event) -> Outcome:
        raise NotImplementedError

    def _gateway_address(self, gateway_socket: Path) -> str:
        return "unix:/run/gateway.sock"

    def run(self, agent_file: Path, problems: Sequence[dict[str, Any]], *, gateway_socket: Path,
            env_for: Callable[[str], dict[str, str]], limits: SandboxLimits | None = None,
            workers: int = 1) -> Iterator[Outcome]:
        """See :class:`~shoparena.validator.sandbox.types.Sandbox`. The agent file is read once, here, by the
        validator; the sandbox gets its bytes, never the host path."""
        reason = self.unavailable()
        if reason:
            raise ConfigError(f"the {self.name} sandbox cannot run here: {reason}",
                              hint="install bubblewrap (apt-get install bubblewrap) or pick another --sandbox")
        limits = limits or SandboxLimits()
        clean = [sanitise(p) for p in problems]
        agent = Path(agent_file).read_bytes()
        sock = Path(gateway_socket)
        if not stat.S_ISSOCK(os.stat(sock).st_mode):
            raise ConfigError(f"{sock} is not a Unix socket", hint="pass the gateway's uds path")
        if os.geteuid() == 0 and os.stat(sock).st_mode & 0o006 != 0o006:
            os.chmod(sock, 0o666)  # sandboxes run as other uids; keep the socket in a private (0700) directory
        address = self._gateway_address(sock)
        if self.mode(limits) == "batch":
            from shoparena.validator.sandbox.batch import run_batch

            return run_batch(self, agent, clean, env_for, address, sock, limits, workers, self.problem_cgroups) \
                if clean else iter(())

        def one(problem: dict[str, Any], slot: int, cancel: threading.Event) -> Outcome:
            # a sandbox that fails before the agent's code starts is the validator's failure: a fresh one, then
            # (after RETRIES) an infrastructure outcome, never the agent's
            for attempt in range(RETRIES + 1):
                env = base_env(env_for(problem["problem_id"]), address)
                try:
                    out = _unstarted(self._run_one(agent, problem, env, sock, limits, slot, cancel))
                except Exception as exc:  # the launch itself failed
                    out = failed(problem, exc)
                if not out.infra_failure or cancel.is_set() or attempt == RETRIES:
                    return out
            raise AssertionError("unreachable")

        def failed(problem: dict[str, Any], exc: BaseException) -> Outcome:
            return Outcome(backend=self.name, limits=limits, infra_failure=True, envelope=Envelope(
                problem_id=problem["problem_id"], status="FAILED", execution_time=0.0,
                error={"type": "SandboxError", "message": f"{type(exc).__name__}: {exc}"[:2000]}))

        return run_parallel(clean, workers, one, failed)
