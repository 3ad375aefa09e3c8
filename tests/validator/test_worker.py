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


def test_a_claimed_agent_s_file_stays_in_the_agent_dir_whatever_the_arena_sends(tmp_path: Path) -> None:
    from shoparena.validator.worker import agent_file

    agents = tmp_path / "agents"
    names = set()
    for hostile in ("../../escaped", "/etc/passwd", "..", "", "a/b", "av-1", "av_1", "x" * 500, "ünï\x00code"):
        path = agent_file(agents, hostile)
        assert path.parent == agents and path.suffix == ".py" and path.name.count("/") == 0
        assert not path.name.startswith(".")
        names.add(path.name)
    assert len(names) == 9  # distinct ids never share a file, even when their safe characters agree
    assert agent_file(agents, "av-1") == agent_file(agents, "av-1")
    assert agent_file(agents, "av-1").name.startswith("av-1-")
