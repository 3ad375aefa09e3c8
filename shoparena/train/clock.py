"""A stage's compute time across every process that worked on it, and its memory.

A stage can be interrupted and continued by ``--resume`` in a later process, so neither the last process's timer nor
the trainer's own runtime says what the stage cost. :class:`StageClock` keeps ``<stage>/clock.json``: the CPU seconds
(every thread of the process: training, in-process sampling, model loading; and the child processes it has waited for,
such as sandboxed agents) and wall seconds of the processes before this one, plus this one's so far, rewritten every
``every_s`` seconds. A process killed between two writes loses at most that interval from the count; the work it did
after its last checkpoint and the redoing of it are both counted, since both were spent. A stage that starts afresh
(no ``--resume``, or checkpoints made for other inputs) starts the clock at zero.

The clock also keeps the stage's memory, so a run of several stages in one process shows where it grows: the resident
set of this process when the stage began (``rss_start_mib``: what earlier stages left behind), and its peak resident
set during the stage (``peak_rss_mib``, the largest over the processes that worked on it and measured it; a clock
written before memory was kept adds nothing). Linux keeps one high-water mark per process; the clock resets it when
the stage begins (``/proc/self/clear_refs``, "5"), so the peak is this stage's alone. Where that reset or the reading
is not possible (not Linux) both are ``None``: a process-long peak would be charged to whichever stage ran last. Child
processes (sandboxed agents) are not counted.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["CLOCK_FILE", "StageClock", "peak_rss_mib", "read_clock", "reset_peak_rss", "rss_mib"]

CLOCK_FILE = "clock.json"
_ZERO: dict[str, Any] = {"cpu_s": 0.0, "wall_s": 0.0, "processes": 0, "rss_start_mib": None, "peak_rss_mib": None}
_MEMORY = ("rss_start_mib", "peak_rss_mib")


def read_clock(stage_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"cpu_s", "wall_s", "processes", "rss_start_mib", "peak_rss_mib"}`` from ``stage_dir/clock.json``; zeros
    (and no memory figures) when it is missing or unreadable: a clock that cannot be read is restarted, never trusted
    half-way. A clock written before memory was kept reads with ``None`` for both memory figures."""
    zero = dict(_ZERO)
    try:
        data = json.loads((Path(stage_dir) / CLOCK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return zero
    if not isinstance(data, dict):
        return zero
    try:
        out = {"cpu_s": float(data["cpu_s"]), "wall_s": float(data["wall_s"]), "processes": int(data["processes"])}
    except (KeyError, TypeError, ValueError):
        return zero
    if not all(math.isfinite(v) and v >= 0 for v in out.values()):  # NaN and infinity parse as floats
        return zero
    for key in _MEMORY:
        value = data.get(key)
        if value is not None and (type(value) is not int or value < 0):
            return zero
        out[key] = value
    return out


def rss_mib() -> int | None:
    """This process's resident set in MiB, or ``None`` where ``/proc`` cannot tell it (not Linux)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // (1 << 20)


def reset_peak_rss() -> bool:
    """Reset this process's resident-set high-water mark to its current resident set (Linux ≥ 4.0); whether it
    could be reset."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def peak_rss_mib() -> int | None:
    """This process's resident-set high-water mark in MiB (``VmHWM``), or ``None`` where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StageClock:
    """Context manager: counts this process's CPU and wall time into ``stage_dir/clock.json`` on top of the
    earlier processes' (``resume=True``) or from zero (``resume=False``), and the stage's memory (module docstring).
    :meth:`totals` gives the figures so far."""

    def __init__(self, stage_dir: str | os.PathLike[str], *, resume: bool, every_s: float = 30.0) -> None:
        self.path = Path(stage_dir) / CLOCK_FILE
        self.every_s = every_s
        self.before = read_clock(stage_dir) if resume else dict(_ZERO)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._c0 = self._t0 = 0.0
        self._rss_start: int | None = None
        self._peak_is_stage = False

    def totals(self) -> dict[str, Any]:
        """``{"cpu_s", "wall_s", "processes"}``: the earlier processes' plus this one's so far; ``rss_start_mib``:
        this process's resident set when it began the stage; ``peak_rss_mib``: the stage's peak so far over the
        processes that worked on it and measured it (``None`` where this process's could not be measured)."""
        peak = peak_rss_mib() if self._peak_is_stage else None
        if peak is not None and self.before["peak_rss_mib"] is not None:
            peak = max(peak, self.before["peak_rss_mib"])
        return {"cpu_s": round(self.before["cpu_s"] + _cpu_s() - self._c0, 3),
                "wall_s": round(self.before["wall_s"] + time.perf_counter() - self._t0, 3),
                "processes": self.before["processes"] + 1,
                "rss_start_mib": self._rss_start, "peak_rss_mib": peak}

    def _write(self) -> None:
        from shoparena._io import atomic_write

        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(self.path, "w") as fh:
                fh.write(json.dumps(self.totals()) + "\n")

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self._write()
            except OSError:  # a full or vanished disk must not kill the training it measures
                pass

    def __enter__(self) -> StageClock:
        self._c0, self._t0 = _cpu_s(), time.perf_counter()
        self._rss_start = rss_mib()
        self._peak_is_stage = reset_peak_rss() and self._rss_start is not None
        self._write()
        self._thread = threading.Thread(target=self._tick, name="stage-clock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._write()
