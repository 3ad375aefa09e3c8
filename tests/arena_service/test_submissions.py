"""Submissions: the per-hotkey cooldown (atomic across threads and processes), severities, versions."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

from shoparena.arena.state.schema import events, submissions
from shoparena.clock import ManualClock
from tests.arena_service import GOOD, T0, config, make_arena


def test_accepted_submission_starts_the_full_cooldown(url: str) -> None:
    clock = ManualClock(T0)
    arena = make_arena(url, clock=clock)
    first = arena.submit("hk-a", "alpha", GOOD)
    assert first.admission_status == "ACCEPTED" and first.version_number == 1 and first.cooldown == "full"
    assert first.agent_version_id and first.agent_id and first.next_allowed_at == T0 + 12 * 3600
    clock.advance(3600)
    again = arena.submit("hk-a", "alpha", GOOD + "# v2\n")
    assert (again.admission_status, again.admission_reason) == ("REJECTED", "COOLDOWN")
    assert again.remaining_seconds == 11 * 3600 and again.submission_id is None
    assert arena.submit("hk-b", "alpha", GOOD).admission_status == "ACCEPTED"  # per hotkey
    clock.advance(11 * 3600)
    v2 = arena.submit("hk-a", "alpha", GOOD + "# v2\n")
    assert v2.admission_status == "ACCEPTED" and v2.version_number == 2 and v2.agent_id == first.agent_id
    versions = arena.versions("hk-a", first.agent_id)
    assert [v.version_number for v in versions] == [1, 2]
    # v1 was still waiting for a qualifying window: superseded by v2
    assert [v.state for v in versions] == ["CANCELLED", "RECEIVED"]
    other = arena.submit("hk-b", "beta", GOOD)
    assert other.admission_reason == "COOLDOWN"
    arena.close()


def test_rejections_cost_the_cooldown_of_their_severity() -> None:
    clock = ManualClock(T0)
    arena = make_arena("sqlite://", clock=clock, cfg=config(reduced_cooldown_s=1800))
    sec = arena.submit("hk-s", "a", "x = 1\ny = eval('2')\n")
    assert (sec.admission_status, sec.admission_reason, sec.cooldown) == ("REJECTED", "INVALID_FILE", "reduced")
    assert [v.model_dump() for v in sec.violations] == [
        {"rule": "banned_call", "severity": "security", "message": "banned_call on line 2", "line": 2}]
    assert sec.remaining_seconds == 1800 and sec.agent_version_id is None
    assert arena.submit("hk-s", "a", GOOD).admission_reason == "COOLDOWN"
    clock.advance(1800)
    assert arena.submit("hk-s", "a", GOOD).admission_status == "ACCEPTED"

    mixed = arena.submit("hk-i", "a", "eval(1)\nPRODUCT_ID = '123'\n")
    assert mixed.cooldown == "full" and {v.severity for v in mixed.violations} == {"security", "integrity"}
    clock.advance(12 * 3600 - 1)
    assert arena.submit("hk-i", "a", GOOD).admission_reason == "COOLDOWN"

    fmt = arena.submit("hk-f", "a", "SYNTAX!\n")
    assert fmt.cooldown == "reduced" and fmt.violations[0].severity == "format"
    assert arena.agents("hk-s")[0].version_count == 1 and arena.agents("hk-i") == []


def test_names_and_registration() -> None:
    from shoparena.arena.chain import LocalChain

    chain = LocalChain(seed=0)
    chain.register("hk-reg", "ck")
    arena = make_arena("sqlite://", chain=chain)
    assert arena.submit("hk-reg", "bad/name", GOOD).admission_reason == "INVALID_NAME"
    assert arena.submit("hk-reg", "x" * 101, GOOD).admission_reason == "INVALID_NAME"
    assert arena.submit("hk-unknown", "ok", GOOD).admission_reason == "NOT_REGISTERED_ONCHAIN"
    assert arena.submit("hk-reg", "ok name-1.2_b", GOOD).admission_status == "ACCEPTED"


def test_a_gate_crash_gives_the_slot_back() -> None:
    arena = make_arena("sqlite://")

    def broken(code: bytes, released: dict[str, str]) -> object:
        raise RuntimeError("gate bug")

    arena.gate = broken
    try:
        arena.submit("hk", "a", GOOD)
    except RuntimeError:
        pass
    from tests.arena_service import stub_gate

    arena.gate = stub_gate
    assert arena.submit("hk", "a", GOOD).admission_status == "ACCEPTED"


def test_concurrent_threads_one_hotkey_exactly_one_accepted(url: str) -> None:
    arena = make_arena(url)
    n = 8
    barrier = threading.Barrier(n)
    results = []
    lock = threading.Lock()

    def go(i: int) -> None:
        barrier.wait()
        r = arena.submit("hk-race", f"agent{i}", GOOD + f"# {i}\n")
        with lock:
            results.append(r)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    accepted = [r for r in results if r.admission_status == "ACCEPTED"]
    assert len(accepted) == 1 and len(results) == n
    assert all(r.admission_reason == "COOLDOWN" for r in results if r is not accepted[0])
    rows = arena.db.read(lambda c: c.execute(submissions.select()).all())
    assert len(rows) == 1
    arena.close()


def _submit_in_process(url: str, barrier: object, queue: object, i: int) -> None:
    from tests.arena_service import GOOD as code
    from tests.arena_service import make_arena as mk

    arena = mk(url)
    barrier.wait()  # type: ignore[attr-defined]
    r = arena.submit("hk-proc", f"agent{i}", code + f"# {i}\n")
    queue.put((r.admission_status, r.admission_reason))  # type: ignore[attr-defined]
    arena.close()


def test_concurrent_processes_on_sqlite_exactly_one_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    make_arena(url).close()  # migrate first
    ctx = mp.get_context("spawn")
    n = 3
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_submit_in_process, args=(url, barrier, queue, i)) for i in range(n)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(got) == [("ACCEPTED", None)] + [("REJECTED", "COOLDOWN")] * (n - 1)


def test_every_change_is_in_the_event_log() -> None:
    arena = make_arena("sqlite://")
    arena.tick()
    arena.submit("hk", "a", GOOD)
    kinds = arena.db.read(lambda c: [r.kind for r in c.execute(events.select().order_by(events.c.seq))])
    assert kinds == ["RACE_QUALIFYING_OPEN", "VERSION_RECEIVED", "SUBMISSION_ACCEPTED", "WORK_CREATED",
                     "VERSION_QUEUED"]
