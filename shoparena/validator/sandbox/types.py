"""What a sandbox run takes and gives back: limits, the per-problem ORO envelope, and the backend contract.

A sandbox runs one submitted single-file agent on a batch of sanitised problems, one process per problem. Its only
peer is the gateway, reached through a Unix socket bound into the sandbox; everything it writes goes to a private
tmpfs. Two modes (:attr:`SandboxLimits.mode`): ``batch`` (ORO's design, docs/arena.md §3: one sandbox per batch, the
agent file imported once, each problem in its own forked process with its own limits and timeout) and
``per_problem`` (a fresh sandbox and interpreter for every problem). Each problem yields an :class:`Outcome`: the ORO envelope (``SUCCESS`` / ``FAILED`` / ``TIMED_OUT``,
error, dialogue; docs/arena.md §3, docs/shoppingbench.md §6.2) plus sandbox metadata (exit code, output tails, wall time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from shoparena.env.types import Envelope as Envelope

SandboxMode = Literal["batch", "per_problem"]
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SandboxLimits(BaseModel):
    """Per-problem resource limits (ORO: 4 GB memory, 256 pids, 1024 files, 256 MB tmpfs, 300 s), and the mode."""

    model_config = _FROZEN

    mode: SandboxMode = "batch"
    """``batch``: one sandbox per :meth:`Sandbox.run` call, the agent imported once, one forked process per problem
    (backends without it, docker, run ``per_problem``); ``per_problem``: one sandbox per problem."""
    timeout_s: float = 300.0
    """Wall clock per problem; then TERM, then KILL after ``kill_grace_s``."""
    kill_grace_s: float = 2.0
    memory_mb: int = 4096
    """Address-space / memory cap of the agent process tree."""
    pids: int = 256
    """Processes and threads the agent may have at once."""
    open_files: int = 1024
    tmpfs_mb: int = 256
    """Size of the private writable /tmp (per batch in batch mode, where each problem also gets a fresh HOME and
    working directory below it)."""
    file_size_mb: int = 64
    """Largest file the agent may write (in its tmpfs)."""
    output_mb: int = 16
    """Largest envelope (dialogue) accepted back from the agent; bigger output is a FAILED envelope."""
    cpu_s: float | None = None
    """CPU seconds per process (RLIMIT_CPU); None = twice the wall-clock timeout plus the grace period."""
    cpu_shares: int = 512
    """Relative CPU weight against other sandboxes (docker ``--cpu-shares``; the cpu cgroup where writable)."""
    tail_kb: int = 16
    """How much of the end of stdout and stderr is kept."""

    def cpu_limit_s(self) -> int:
        """The RLIMIT_CPU value actually applied."""
        return max(1, int(self.cpu_s if self.cpu_s is not None else 2 * self.timeout_s + self.kill_grace_s + 1))


class Outcome(BaseModel):
    """One problem's envelope and what the sandbox observed around it."""

    model_config = _FROZEN

    envelope: Envelope
    backend: str
    exit_code: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    wall_s: float = 0.0
    start_overhead_ms: float | None = None
    """Time from launching the problem to the agent's code starting (entry handshake): per-problem mode, from
    launching its sandbox; batch mode, from the executor starting the problem (fork, limits, cgroup move) — the
    batch's own start (sandbox, interpreter, agent import) is paid once and reported in ``enforced["mode"]``."""
    started_at: float | None = None
    """Wall-clock time (Unix seconds) at which the problem was started."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    enforced: dict[str, str] = Field(default_factory=dict)
    """What actually enforced each guarantee on this run, e.g. ``{"pids": "cgroup pids.max=256", "network":
    "netns (loopback only)", "uid": "host uid 61000"}``: a limit whose mechanism was unavailable says so."""
    counters: dict[str, int] = Field(default_factory=dict)
    """Kernel counters read after the run where available: ``pids_peak``, ``pids_max_hits``, ``memory_peak_mb``,
    ``oom_kills``."""
    infra_failure: bool = False
    """The sandbox itself failed under this problem (killed from outside, never started) in every fresh sandbox it
    was retried in, at least once before the agent's code had started: the envelope is the validator's failure,
    not the agent's outcome, and scoring and records never count it as the agent's."""


class Sandbox(Protocol):
    """A sandbox backend (``bubblewrap``, ``docker``, or the non-hermetic ``process`` fallback)."""

    name: str
    hermetic: bool
    """False for backends that do not isolate (tests of the validator logic only, never production)."""

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (a missing binary or daemon), or None when it can."""
        ...

    def describe(self, limits: SandboxLimits | None = None) -> dict[str, str]:
        """What enforces each guarantee on this machine (the same keys as :attr:`Outcome.enforced`), ``mode``
        included: the mode a run with ``limits`` uses here."""
        ...

    def run(self, agent_file: Path, problems: Sequence[dict[str, Any]], *, gateway_socket: Path,
            env_for: Callable[[str], dict[str, str]], limits: SandboxLimits | None = None,
            workers: int = 1) -> Iterator[Outcome]:
        """Run ``agent_main`` once per problem (``problem_id`` → ``env_for(problem_id)`` gives the SDK environment:
        ``SHOPARENA_RUN_TOKEN``, ``SHOPARENA_MODEL`` …; the gateway address is set by the sandbox to the socket
        as seen inside). Every problem is passed through :func:`~shoparena.validator.sandbox.sanitise.sanitise` first.
        Yields outcomes as problems finish, in any order; never raises for agent misbehaviour (a backend that
        cannot run at all raises :class:`~shoparena.errors.ConfigError` before the first problem).
        Closing the iterator early kills the sandboxes still running. In ``batch`` mode (``limits.mode``)
        ``env_for`` is called for every problem before the sandbox starts, and ``workers`` caps the problems that
        run at once inside the one sandbox."""
        ...
