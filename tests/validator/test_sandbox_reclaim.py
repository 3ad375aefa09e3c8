"""A sandbox's host uid goes back to the pool only once nothing runs under it (:func:`kill_uid`): processes that
left the sandbox's process tree — reparented orphans, the stragglers of a pid namespace whose init was killed — are
found by uid, killed, and waited for."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from shoparena.validator.sandbox.supervise import descendants, kill_uid, uid_processes

pytestmark = pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root and setpriv to run processes under a dedicated uid")
UID = 390_000 + os.getpid() % 10_000


def _orphans(uid: int, n: int) -> set[int]:
    """``n`` sleepers under ``uid`` whose parent exited: not descendants of this process any more."""
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sh", "-c",
                    f"for i in $(seq {n}); do sleep 60 & done"], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while len(found := uid_processes(uid)) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def test_kill_uid_kills_and_waits_for_processes_outside_the_tree() -> None:
    pids = _orphans(UID, 3)
    assert len(pids) == 3 and not pids & set(descendants(os.getpid()))
    assert kill_uid(UID) == set()
    assert uid_processes(UID) == set()
    for pid in pids:  # gone, not just signalled (a /proc entry belongs to its process's uid)
        assert not os.path.exists(f"/proc/{pid}") or os.stat(f"/proc/{pid}").st_uid != UID


def test_kill_uid_leaves_other_uids_alone() -> None:
    mine = _orphans(UID + 1, 1)
    try:
        assert kill_uid(UID) == set()
        assert uid_processes(UID + 1) == mine
    finally:
        assert kill_uid(UID + 1) == set()

