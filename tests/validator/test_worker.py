"""The arena worker's lease heartbeat (:func:`shoparena.validator.worker.keep_alive`) over a real arena: it renews
the lease while the evaluation runs, and a refused heartbeat is logged with its exception, never swallowed."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from shoparena.clock import ManualClock
from shoparena.validator.worker import LocalWork, keep_alive
from tests.arena_service import GOOD, T0, make_arena


def _claimed(tmp_path: Path) -> tuple[object, str]:
    arena = make_arena(f"sqlite:///{tmp_path / 'arena.db'}", clock=ManualClock(T0))
    arena.tick()
    arena.submit("hk-0", "agent", GOOD)
    work = arena.claim_work("val-a")
    assert work is not None
    return arena, work.eval_run_id


def test_a_refused_heartbeat_is_logged_and_ends_the_loop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    arena, run_id = _claimed(tmp_path)
    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="shoparena.validator.worker"):
        thread = threading.Thread(target=keep_alive, args=(LocalWork(arena, "val-b"), run_id, stop, 0.01))
        thread.start()
        thread.join(timeout=10)
    assert not thread.is_alive(), "the loop must end by itself after the first failure"
    [record] = [r for r in caplog.records if r.name == "shoparena.validator.worker"]
    assert record.levelno == logging.WARNING and run_id in record.getMessage()
    assert "Forbidden" in record.getMessage() and record.exc_info is not None


def test_heartbeats_renew_until_stopped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    arena, run_id = _claimed(tmp_path)
    beats: list[float] = []

    class Counting(LocalWork):
        def heartbeat(self, eval_run_id: str) -> float:
            beats.append(super().heartbeat(eval_run_id))
            if len(beats) >= 3:
                stop.set()
            return beats[-1]

    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="shoparena.validator.worker"):
        keep_alive(Counting(arena, "val-a"), run_id, stop, 0.01)
    assert len(beats) == 3 and caplog.records == []
