"""A stage's compute time is counted over every process that worked on it (``shoparena.train.clock``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shoparena.train.clock import CLOCK_FILE, StageClock, peak_rss_mib, read_clock, reset_peak_rss, rss_mib


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
                                  '{"cpu_s": 1, "wall_s": Infinity, "processes": 1}',
                                  '{"cpu_s": 1, "wall_s": 1, "processes": 1, "peak_rss_mib": -3}',
                                  '{"cpu_s": 1, "wall_s": 1, "processes": 1, "peak_rss_mib": 2.5}',
                                  '{"cpu_s": 1, "wall_s": 1, "processes": 1, "rss_start_mib": "big"}',
                                  '{"cpu_s": 1, "wall_s": 1, "processes": 1, "peak_rss_mib": true}'])
def test_an_unreadable_clock_restarts_from_zero(tmp_path: Path, text: str) -> None:
    (tmp_path / CLOCK_FILE).write_text(text)
    assert read_clock(tmp_path) == {"cpu_s": 0.0, "wall_s": 0.0, "processes": 0, "rss_start_mib": None,
                                    "peak_rss_mib": None}
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


def test_a_clock_written_before_memory_was_kept_still_reads(tmp_path: Path) -> None:
    (tmp_path / CLOCK_FILE).write_text(json.dumps({"cpu_s": 3.0, "wall_s": 4.0, "processes": 1}))
    assert read_clock(tmp_path) == {"cpu_s": 3.0, "wall_s": 4.0, "processes": 1, "rss_start_mib": None,
                                    "peak_rss_mib": None}


MEASURABLE = reset_peak_rss() and rss_mib() is not None and peak_rss_mib() is not None

# 400 MiB touched and freed before the stage (numpy returns a block that large to the system at once), then 100 MiB
# touched inside it: the stage's peak holds the 100 and not the 400 that came before it.
BEFORE_AND_DURING = textwrap.dedent("""
    import json, sys
    import numpy as np
    from shoparena.train.clock import StageClock, read_clock
    a = np.ones(400 << 17)  # 400 MiB of float64
    del a
    with StageClock(sys.argv[1], resume=False) as clock:
        b = np.ones(100 << 17)
        inside = clock.totals()
        del b
    print(json.dumps({"inside": inside, "disk": read_clock(sys.argv[1])}))
""")


@pytest.mark.skipif(not MEASURABLE, reason="the per-stage peak needs Linux's resettable high-water mark")
def test_the_peak_is_the_stages_own_not_the_processs(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", BEFORE_AND_DURING, str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    got = json.loads(out.stdout)
    for figures in (got["inside"], got["disk"]):
        start, peak = figures["rss_start_mib"], figures["peak_rss_mib"]
        assert isinstance(start, int) and isinstance(peak, int)
        assert start + 90 <= peak < start + 300  # the stage's 100 MiB counted, the earlier 400 MiB not


@pytest.mark.skipif(not MEASURABLE, reason="the per-stage peak needs Linux's resettable high-water mark")
def test_a_resumed_stage_keeps_the_larger_peak_of_its_processes(tmp_path: Path) -> None:
    huge = 10 << 20  # 10 TiB in MiB: above anything this process reaches
    (tmp_path / CLOCK_FILE).write_text(json.dumps({"cpu_s": 1.0, "wall_s": 1.0, "processes": 1,
                                                   "rss_start_mib": 5, "peak_rss_mib": huge}))
    with StageClock(tmp_path, resume=True) as clock:
        assert clock.totals()["peak_rss_mib"] == huge
    after = read_clock(tmp_path)
    assert after["peak_rss_mib"] == huge and after["rss_start_mib"] != 5  # this process's start, not the first's
    with StageClock(tmp_path, resume=False):
        pass
    assert 0 < read_clock(tmp_path)["peak_rss_mib"] < huge  # a fresh start forgets the earlier processes' peak
