"""Crash safety and concurrent writers, for real: writer subprocesses, ``kill -9``, several processes at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from shoparena.store import open_store
from shoparena.store.testing import synthetic_record
from tests.store.conftest import WRITER, rec

SEED, SIZE = 7, 20_000


def _writer(url: str, *, start: int = 0, count: int, batch: int = 1) -> list[str]:
    return [sys.executable, str(WRITER), url, "--start", str(start), "--count", str(count), "--seed", str(SEED),
            "--size", str(SIZE), "--batch", str(batch)]


def _expected_ids(start: int, count: int) -> list[str]:
    return [synthetic_record(i, seed=SEED, size=SIZE).sealed(0).record_id for i in range(start, start + count)]


def _finish(cmd: list[str]) -> int:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout.splitlines()[-1].split()[1])


@pytest.mark.parametrize("batch", [1, 25])
def test_kill_9_mid_run_loses_no_commit_and_a_rerun_duplicates_nothing(store_url: str, batch: int) -> None:
    n, kill_after = 250, 75
    open_store(store_url).close()
    proc = subprocess.Popen(_writer(store_url, count=n, batch=batch), stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        acked.append(line.split()[1])
        if len(acked) >= kill_after:
            break
    os.kill(proc.pid, signal.SIGKILL)  # at an arbitrary point of the run, most likely inside an append
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    expected = _expected_ids(0, n)
    with open_store(store_url) as st:
        stored = [r.record_id for r in st.rows()]
        assert set(acked) <= set(stored)  # every acknowledged (committed) append survived
        assert len(stored) == len(set(stored)) == st.count() < n
        assert stored == expected[:len(stored)]  # a prefix, with the right content hashes
        if batch > 1:
            assert len(stored) % batch == 0  # a batch is all or nothing
        assert st.verify().ok

    assert _finish(_writer(store_url, count=n, batch=batch)) == n - len(stored)
    assert _finish(_writer(store_url, count=n, batch=batch)) == 0
    with open_store(store_url) as st:
        assert [r.record_id for r in st.rows()] == expected
        assert st.verify().ok


def test_concurrent_writer_processes_with_overlapping_records(store_url: str) -> None:
    """Four processes (two appending one by one, two in batches) write overlapping ranges at once."""
    open_store(store_url).close()
    ranges = [(0, 60), (30, 60), (60, 60), (90, 60)]
    procs = [subprocess.Popen(_writer(store_url, start=s, count=c, batch=1 if k % 2 else 10),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, (s, c) in enumerate(ranges)]
    added = 0
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        added += int(out.splitlines()[-1].split()[1])
    expected = set(_expected_ids(0, 150))
    assert added == 150
    with open_store(store_url) as st:
        ids = [r.record_id for r in st.rows()]
        assert len(ids) == len(set(ids)) == 150 and set(ids) == expected
        assert st.verify().ok


def test_a_forked_child_uses_its_own_connections(store_url: str) -> None:
    """A process forked after the store connected (multiprocessing's default on Linux) must neither use nor
    close its parent's connections: parent and child append at the same time and both keep working."""

    def _timeout(*_: object) -> None:
        raise TimeoutError("a shared connection hung")

    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(60)  # a shared PostgreSQL socket hangs rather than fails: bound it (the child inherits it)
    try:
        with open_store(store_url) as st:
            assert st.append(rec(0)) and st.count() == 1  # the pool now holds an open connection
            pid = os.fork()
            if pid == 0:  # child
                try:
                    ok = all(st.append(rec(i)) for i in range(1, 40)) and not st.append(rec(0))
                except BaseException:
                    ok = False
                os._exit(0 if ok else 1)
            parent_ok = all(st.append(rec(i)) for i in range(100, 140))
            _, status = os.waitpid(pid, 0)
            assert parent_ok and os.waitstatus_to_exitcode(status) == 0
            assert st.count() == 80 and st.verify().ok
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
