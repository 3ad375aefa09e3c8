"""A stage's compute time across every process that worked on it.

A stage can be interrupted and continued by ``--resume`` in a later process, so neither the last process's timer nor
the trainer's own runtime says what the stage cost. :class:`StageClock` keeps ``<stage>/clock.json``: the CPU seconds
(every thread of the process: training, in-process sampling, model loading; and the child processes it has waited
for, such as sandboxed agents) and wall seconds of the processes before
this one, plus this one's so far, rewritten every ``every_s`` seconds. A process killed between two writes loses at
most that interval from the count; the work it did after its last checkpoint and the redoing of it are both counted,
since both were spent. A stage that starts afresh (no ``--resume``, or checkpoints made for other inputs) starts the
clock at zero.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["CLOCK_FILE", "StageClock", "read_clock"]

CLOCK_FILE = "clock.json"
_ZERO: dict[str, Any] = {"cpu_s": 0.0, "wall_s": 0.0, "processes": 0}


def read_clock(stage_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"cpu_s", "wall_s", "processes"}`` from ``stage_dir/clock.json``; zeros when it is missing or unreadable
    (a clock that cannot be read is restarted, never trusted half-way)."""
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
    return out


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StageClock:
    """Context manager: counts this process's CPU and wall time into ``stage_dir/clock.json`` on top of the
    earlier processes' (``resume=True``) or from zero (``resume=False``). :meth:`totals` gives the figures so far."""

    def __init__(self, stage_dir: str | os.PathLike[str], *, resume: bool, every_s: float = 30.0) -> None:
        self.path = Path(stage_dir) / CLOCK_FILE
        self.every_s = every_s
        self.before = read_clock(stage_dir) if resume else dict(_ZERO)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._c0 = self._t0 = 0.0

    def totals(self) -> dict[str, Any]:
        """``{"cpu_s", "wall_s", "processes"}``: the earlier processes' plus this one's so far."""
        return {"cpu_s": round(self.before["cpu_s"] + _cpu_s() - self._c0, 3),
                "wall_s": round(self.before["wall_s"] + time.perf_counter() - self._t0, 3),
                "processes": self.before["processes"] + 1}

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
        self._write()
        self._thread = threading.Thread(target=self._tick, name="stage-clock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._write()
