"""A stage's compute time is counted over every process that worked on it (``shoparena.train.clock``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoparena.train.clock import CLOCK_FILE, StageClock, read_clock


def _burn(seconds: float) -> None:
    """Spend at least ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


def test_a_fresh_clock_counts_this_process_and_writes_it_down(tmp_path: Path) -> None:
    with StageClock(tmp_path, resume=False) as clock:
        _burn(0.2)
        inside = clock.totals()
    on_disk = read_clock(tmp_path)
    assert inside["processes"] == on_disk["processes"] == 1
    # os.times() counts whole clock ticks (10 ms), so the clock may read up to a tick or two under process_time
    assert 0.15 <= inside["cpu_s"] <= on_disk["cpu_s"] and on_disk["wall_s"] >= inside["wall_s"] > 0


def test_resume_adds_to_the_earlier_processes_and_a_fresh_start_does_not(tmp_path: Path) -> None:
    (tmp_path / CLOCK_FILE).write_text(json.dumps({"cpu_s": 100.0, "wall_s": 200.0, "processes": 2}))
    with StageClock(tmp_path, resume=True):
        pass
    resumed = read_clock(tmp_path)
    assert resumed["processes"] == 3 and 100.0 <= resumed["cpu_s"] < 150.0 and 200.0 <= resumed["wall_s"] < 250.0
    with StageClock(tmp_path, resume=False):
        pass
    fresh = read_clock(tmp_path)
    assert fresh["processes"] == 1 and fresh["cpu_s"] < 100.0 and fresh["wall_s"] < 200.0


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"cpu_s": 1}', '{"cpu_s": "a", "wall_s": 1, "processes": 1}',
                                  '{"cpu_s": -5, "wall_s": 1, "processes": 1}',
                                  '{"cpu_s": NaN, "wall_s": 1, "processes": 1}',
                                  '{"cpu_s": 1, "wall_s": Infinity, "processes": 1}'])
def test_an_unreadable_clock_restarts_from_zero(tmp_path: Path, text: str) -> None:
    (tmp_path / CLOCK_FILE).write_text(text)
    assert read_clock(tmp_path) == {"cpu_s": 0.0, "wall_s": 0.0, "processes": 0}
    with StageClock(tmp_path, resume=True):
        pass
    assert read_clock(tmp_path)["processes"] == 1


def test_a_killed_process_leaves_what_it_spent_for_the_next(tmp_path: Path) -> None:
    """SIGKILL runs no exit code: the periodic write is what survives, and a resumed clock starts from it."""
    code = (f"import time; from shoparena.train.clock import StageClock\n"
            f"with StageClock({str(tmp_path)!r}, resume=False, every_s=0.02):\n"
            f"    end = time.process_time() + 600\n"
            f"    while time.process_time() < end: pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while read_clock(tmp_path)["cpu_s"] < 0.2:  # it has spent and recorded some work
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = read_clock(tmp_path)
    assert left["processes"] == 1 and left["cpu_s"] >= 0.2
    with StageClock(tmp_path, resume=True) as clock:
        assert clock.totals()["cpu_s"] >= left["cpu_s"] and clock.totals()["processes"] == 2
