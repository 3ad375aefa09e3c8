"""The cgroups of one batch-mode sandbox, where the host lets the validator make them.

``…/shoparena-sandbox/<tag>``: the batch's group, with the caps of the whole sandbox (``workers × pids`` plus a
reserve for the executor and the zygote, ``(workers + 1) × memory``, the cpu shares); below it, the leaf ``main``
that the sandbox starts in (executor, zygote) and one leaf per problem (``p<index>``: that problem's own ``pids``
and ``memory`` caps and counters, and its own ``cpu`` shares, so problems of a batch share the CPU fairly). A problem's process is moved into its leaf by the validator
(:meth:`BatchCgroup.attach`), on the executor's request and before any agent code runs in it, so everything the
problem ever starts is counted and capped there: a fork bomb fills its own leaf, not the sandbox. The leaves make
the layout valid for cgroup v2 too (no processes in a group whose controllers are delegated).
"""

from __future__ import annotations

from pathlib import Path

from shoparena.validator.sandbox.limits import ProblemCgroup, cgroup_bases
from shoparena.validator.sandbox.types import SandboxLimits

__all__ = ["RESERVE_PIDS", "BatchCgroup", "host_pid"]

RESERVE_PIDS = 32
"""Processes and threads the batch may have beyond ``workers × pids``: the executor, the zygote, the forks."""
_PER_PROBLEM = ("pids", "memory", "cpu")


def host_pid(pidfd: int) -> int:
    """The pid, in this process's pid namespace, of the process a pidfd refers to (``-1``: it has exited)."""
    with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError("no Pid in the pidfd's fdinfo")


class BatchCgroup:
    """The batch's group, its ``main`` leaf (:attr:`procs_files`: what the launcher joins) and problem leaves."""

    def __init__(self, limits: SandboxLimits, workers: int) -> None:
        self.limits = limits
        self.root = ProblemCgroup(limits, caps={"pids": workers * limits.pids + RESERVE_PIDS,
                                                "memory": (workers + 1) * limits.memory_mb,
                                                "cpu": limits.cpu_shares})
        for d in {d for d, version in self.root.dirs.values() if version == 2}:
            try:  # delegate to the leaves (the group itself never holds a process)
                (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in self.root.dirs))
            except OSError:
                pass
        self._bases = dict(self.root.dirs)
        self.main = ProblemCgroup(limits, bases=self._bases, tag="main", caps=dict.fromkeys(self._bases))
        self.problems: dict[int, ProblemCgroup] = {}

    @property
    def dirs(self) -> dict[str, tuple[Path, int]]:
        return self.main.dirs

    @property
    def procs_files(self) -> list[str]:
        return self.main.procs_files

    @property
    def per_problem(self) -> bool:
        """Whether problems can get leaves of their own (a pids or memory group exists)."""
        return any(c in self.main.dirs for c in _PER_PROBLEM)

    def enforced(self) -> dict[str, str]:
        """Controller → what caps the whole sandbox."""
        return dict(self.root.enforced)

    def attach(self, index: int, pid: int) -> dict[str, str]:
        """Make problem ``index``'s leaf and move host pid ``pid`` into it; controller → what caps the problem."""
        bases = {c: b for c, b in self._bases.items() if c in _PER_PROBLEM}
        cg = ProblemCgroup(self.limits, bases=bases, tag=f"p{index}",
                           caps={"pids": self.limits.pids, "memory": self.limits.memory_mb,
                                 "cpu": self.limits.cpu_shares})
        self.problems[index] = cg
        for f in cg.procs_files:
            Path(f).write_text(str(pid))
        return dict(cg.enforced)

    def finish(self, index: int) -> dict[str, int]:
        """Problem ``index``'s counters; its leaf is emptied and removed."""
        cg = self.problems.pop(index, None)
        if cg is None:
            return {}
        counters = cg.counters()
        cg.close()
        return counters

    def kill(self) -> None:
        for cg in [*self.problems.values(), self.main]:
            cg.kill()

    def close(self) -> None:
        for index in list(self.problems):
            self.finish(index)
        self.main.close()
        self.root.close()


def batch_cgroup(limits: SandboxLimits, workers: int) -> BatchCgroup | None:
    """A :class:`BatchCgroup`, or None where no controller is writable."""
    if not cgroup_bases():
        return None
    cg = BatchCgroup(limits, workers)
    if not cg.dirs:
        cg.close()
        return None
    return cg
