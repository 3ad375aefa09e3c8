"""Resource limits: the rlimits the entry sets on itself, and per-problem cgroups where the host lets us make them.

RLIMIT_NPROC does not bind real uid 0 and counts every process of a uid, so a fork bomb is contained by a
``pids`` cgroup (``pids.max``) when one can be created, else by RLIMIT_NPROC under a dedicated non-root uid.
RLIMIT_AS caps each process; a ``memory`` cgroup caps the whole tree (tmpfs pages included). cgroup v1 (one
hierarchy per controller) and v2 (unified) are both handled; each problem gets a child group of the validator's
own cgroup (``…/shoparena-sandbox/<tag>``), which the launcher joins before exec'ing the sandbox, so every
process of the run is inside from its first instruction. Whatever is unavailable is reported, never faked.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from pathlib import Path

from shoparena.validator.sandbox.types import SandboxLimits

__all__ = ["ProblemCgroup", "cgroup_bases", "rlimits"]

_WANTED = ("pids", "memory", "cpu")
_GROUP = "shoparena-sandbox"
_seq = itertools.count()


def rlimits(limits: SandboxLimits, *, nproc: bool) -> dict[str, int]:
    """What the entry applies to itself before importing the agent (name → soft = hard value)."""
    out = {"AS": limits.memory_mb << 20, "NOFILE": limits.open_files, "FSIZE": limits.file_size_mb << 20,
           "CORE": 0, "CPU": limits.cpu_limit_s()}
    if nproc:
        out["NPROC"] = limits.pids
    return out


def _mounts() -> tuple[dict[str, tuple[Path, str]], tuple[Path, str] | None]:
    """v1 controller → (mount point, mount root); the v2 (mount point, mount root)."""
    v1: dict[str, tuple[Path, str]] = {}
    v2 = None
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            if rfields[0] == "cgroup2":
                v2 = (Path(fields[4]), fields[3])
            elif rfields[0] == "cgroup":
                for opt in rfields[2].split(","):
                    if opt in _WANTED:
                        v1[opt] = (Path(fields[4]), fields[3])
    return v1, v2


def _own_paths() -> tuple[dict[str, str], str | None]:
    v1: dict[str, str] = {}
    v2 = None
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            ident, _, rest = line.rstrip("\n").partition(":")
            ctrls, _, path = rest.partition(":")
            if ident == "0" and not ctrls:
                v2 = path
            for c in ctrls.split(","):
                v1[c] = path
    return v1, v2


def _under(mount: Path, root: str, path: str) -> Path:
    rel = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    return mount / rel if rel not in ("", ".") else mount


def _prepare(base: Path, v2: bool, ctrls: list[str]) -> Path | None:
    """``base/shoparena-sandbox``, created (and, for v2, with the controllers delegated), or None."""
    group = base / _GROUP
    try:
        if v2:
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ctrls))
        group.mkdir(exist_ok=True)
        if v2:
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ctrls))
        for stale in group.iterdir():  # groups left by a validator that was killed (never a live one's)
            owner = stale.name[1:].partition("-")[0]
            if stale.is_dir() and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    stale.rmdir()
                except OSError:
                    pass
    except OSError:
        return None
    return group


@functools.cache
def cgroup_bases() -> dict[str, tuple[Path, int]]:
    """Controller → (directory under which per-problem groups can be made, cgroup version); only the writable
    ones. Cached for the process."""
    out: dict[str, tuple[Path, int]] = {}
    try:
        mounts1, mount2 = _mounts()
        own1, own2 = _own_paths()
    except OSError:
        return out
    for c in _WANTED:
        if c in mounts1 and c in own1:
            group = _prepare(_under(*mounts1[c], own1[c]), False, [c])
            if group is not None:
                out[c] = (group, 1)
    missing = [c for c in _WANTED if c not in out and c not in mounts1]
    if missing and mount2 is not None and own2 is not None:
        base = _under(*mount2, own2)
        try:
            have = (base / "cgroup.controllers").read_text().split()
        except OSError:
            have = []
        usable = [c for c in missing if c in have]
        group = _prepare(base, True, usable) if usable else None
        for c in usable if group is not None else []:
            out[c] = (group, 2)  # type: ignore[assignment]
    return out


class ProblemCgroup:
    """The cgroups of one sandboxed problem: created with the limits written, joined by the launcher through
    :attr:`procs_files`, read for counters and emptied + removed by :meth:`close`."""

    def __init__(self, limits: SandboxLimits, *, bases: dict[str, tuple[Path, int]] | None = None,
                 tag: str | None = None, caps: dict[str, int | None] | None = None) -> None:
        """``bases``: controller → (parent directory, version), default :func:`cgroup_bases`; ``caps``: controller
        → value to write (pids, MB of memory, cpu shares; None: no limit), default from ``limits`` for every
        controller of ``bases``."""
        self.dirs: dict[str, tuple[Path, int]] = {}
        self.enforced: dict[str, str] = {}
        tag = tag or f"p{os.getpid()}-{next(_seq)}"
        bases = cgroup_bases() if bases is None else bases
        if caps is None:
            caps = {"pids": limits.pids, "memory": limits.memory_mb, "cpu": limits.cpu_shares}
        for ctrl, (base, version) in bases.items():
            if ctrl not in caps:
                continue
            d = base / tag
            try:
                d.mkdir(exist_ok=True)
                self.enforced[ctrl] = self._write_limit(ctrl, d, version, caps[ctrl])
                self.dirs[ctrl] = (d, version)
            except OSError as exc:
                self.enforced[ctrl] = f"cgroup unavailable ({exc.strerror})"
                try:
                    d.rmdir()
                except OSError:
                    pass

    @staticmethod
    def _write_limit(ctrl: str, d: Path, version: int, value: int | None) -> str:
        if value is None:
            return f"cgroup v{version}"
        if ctrl == "pids":
            (d / "pids.max").write_text(str(value))
            return f"cgroup v{version} pids.max={value}"
        if ctrl == "memory":
            size = value << 20
            names = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if version == 1 else \
                ("memory.max", "memory.swap.max")
            (d / names[0]).write_text(str(size))
            if (d / names[1]).exists():
                (d / names[1]).write_text(str(size if version == 1 else 0))
            return f"cgroup v{version} memory={value} MB (no swap)"
        if version == 1:
            (d / "cpu.shares").write_text(str(value))
            return f"cgroup v1 cpu.shares={value}"
        weight = max(1, min(10000, 1 + (value - 2) * 9999 // 262142))
        (d / "cpu.weight").write_text(str(weight))
        return f"cgroup v2 cpu.weight={weight}"

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(d / "cgroup.procs") for d, _ in self.dirs.values()})

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d, _ in self.dirs.values():
            try:
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return found

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Signal every process in the groups; returns how many were signalled."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        return len(pids)

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ctrl, (d, version) in self.dirs.items():
            if ctrl == "pids":
                _read_int(d / "pids.peak", out, "pids_peak")
                _read_key(d / "pids.events", "max", out, "pids_max_hits")
            elif ctrl == "memory":
                peak = d / ("memory.max_usage_in_bytes" if version == 1 else "memory.peak")
                if _read_int(peak, out, "memory_peak_mb"):
                    out["memory_peak_mb"] >>= 20
                _read_key(d / ("memory.oom_control" if version == 1 else "memory.events"), "oom_kill", out,
                          "oom_kills")
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """Kill whatever is left, wait for the groups to empty, remove them."""
        deadline = time.monotonic() + timeout_s
        while self.kill() and time.monotonic() < deadline:
            time.sleep(0.01)
        for d, _ in self.dirs.values():
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.01)


def _read_int(path: Path, out: dict[str, int], key: str) -> bool:
    try:
        out[key] = int(path.read_text().split()[0])
        return True
    except (OSError, ValueError, IndexError):
        return False


def _read_key(path: Path, name: str, out: dict[str, int], key: str) -> None:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == name:
                out[key] = int(v)
    except (OSError, ValueError):
        pass
