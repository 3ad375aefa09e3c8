"""The validator work queue: claims, leases and the reaper, X-of-Y agreement, qualifying verdicts."""

from __future__ import annotations

import threading

import pytest

from shoparena.arena.service import Arena
from shoparena.arena.state.types import Forbidden, Invalid, LeaseExpired, NotFound, ProblemProgress
from shoparena.clock import ManualClock
from tests.arena_service import GOOD, T0, config, failed, make_arena, ok


def _arena_with_versions(url: str, n: int, **cfg: object) -> tuple[Arena, ManualClock, list[str]]:
    clock = ManualClock(T0)
    arena = make_arena(url, clock=clock, cfg=config(**cfg))
    arena.tick()  # opens race 1 (qualifying until 18:00 UTC)
    ids = [arena.submit(f"hk-{i}", "agent", GOOD + f"# {i}\n").agent_version_id for i in range(n)]
    return arena, clock, [i for i in ids if i]


def test_two_validators_claim_different_items(url: str) -> None:
    arena, _, ids = _arena_with_versions(url, 2)
    a, b = arena.claim_work("val-a"), arena.claim_work("val-b")
    assert a is not None and b is not None and a.work_item_id != b.work_item_id
    assert {a.agent_version_id, b.agent_version_id} == set(ids)
    assert a.kind == "QUALIFYING" and len(a.problem_ids) == 5 and a.lease_expires_at == T0 + 60
    assert arena.versions(a.miner_hotkey, a.agent_id)[0].state == "RUNNING"
    # each then takes the other item (X = 2 distinct validators), never its own again
    a2, b2 = arena.claim_work("val-a"), arena.claim_work("val-b")
    assert a2 is not None and b2 is not None
    assert (a2.work_item_id, b2.work_item_id) == (b.work_item_id, a.work_item_id)
    assert arena.claim_work("val-a") is None and arena.claim_work("val-c") is None  # all slots leased
    arena.close()


def test_concurrent_claims_never_overfill_an_item(url: str) -> None:
    arena, _, _ = _arena_with_versions(url, 3)
    got: list[object] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def go(i: int) -> None:
        barrier.wait()
        w = arena.claim_work(f"val-{i}")
        with lock:
            got.append(w)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claims = [w for w in got if w is not None]
    per_item: dict[str, int] = {}
    for w in claims:
        per_item[w.work_item_id] = per_item.get(w.work_item_id, 0) + 1  # type: ignore[attr-defined]
    assert all(v <= 2 for v in per_item.values())
    if "sqlite" in url:  # SQLite serialises claims: every slot is handed out exactly once
        assert len(claims) == 6 and set(per_item.values()) == {2}
    arena.close()


def test_a_missed_lease_returns_the_item_to_the_queue() -> None:
    arena, clock, _ = _arena_with_versions("sqlite://", 1, required_successes=1, max_attempts=1)
    w = arena.claim_work("val-a")
    assert w is not None and arena.claim_work("val-b") is None
    clock.advance(30)
    assert arena.heartbeat(w.eval_run_id, "val-a") == T0 + 90  # renewed
    clock.advance(61)
    assert "reaped" in arena.tick()
    with pytest.raises(LeaseExpired):
        arena.heartbeat(w.eval_run_id, "val-a")
    with pytest.raises(LeaseExpired):
        arena.complete(w.eval_run_id, "val-a", ok(0.9))
    again = arena.claim_work("val-b")
    assert again is not None and again.work_item_id == w.work_item_id and again.eval_run_id != w.eval_run_id
    # the late validator may come back for it after the new lease lapses (expired runs do not count)
    clock.advance(61)
    back = arena.claim_work("val-a")
    assert back is not None and back.attempt == 2
    res = arena.complete(back.eval_run_id, "val-a", ok(0.8))
    assert res.work_item.is_closed and res.agent_version_became_eligible and res.final_score == 0.8


def test_a_lapsed_lease_is_caught_without_the_reaper() -> None:
    arena, clock, _ = _arena_with_versions("sqlite://", 1)
    w = arena.claim_work("val-a")
    assert w is not None
    clock.advance(61)
    with pytest.raises(LeaseExpired):
        arena.complete(w.eval_run_id, "val-a", ok(0.9))
    assert arena.claim_work("val-b") is not None


def test_x_of_y_closes_items_with_the_mean_score(url: str) -> None:
    arena, _, (vid,) = _arena_with_versions(url, 1)
    a, b = arena.claim_work("val-a"), arena.claim_work("val-b")
    assert a and b and a.agent_version_id == vid
    first = arena.complete(a.eval_run_id, "val-a", ok(0.5))
    assert not first.work_item.is_closed and first.work_item.included_success_count == 1
    assert first.final_score is None and not first.agent_version_became_eligible
    second = arena.complete(b.eval_run_id, "val-b", ok(0.7))
    assert second.work_item.is_closed and second.work_item.status == "DONE"
    assert second.final_score == pytest.approx(0.6) and second.agent_version_became_eligible
    v = arena.versions(a.miner_hotkey, a.agent_id)[0]
    assert (v.state, v.qualifying_score) == ("ELIGIBLE", pytest.approx(0.6))
    with pytest.raises(LeaseExpired):  # a run completes once
        arena.complete(b.eval_run_id, "val-b", ok(0.7))
    assert arena.claim_work("val-c") is None
    arena.close()


def test_failures_are_retried_until_x_is_unreachable() -> None:
    arena, _, _ = _arena_with_versions("sqlite://", 1)  # X = 2 of Y = 3
    a = arena.claim_work("val-a")
    assert a
    r = arena.complete(a.eval_run_id, "val-a", failed())
    assert not r.work_item.is_closed and r.status == "FAILED"
    b, c = arena.claim_work("val-b"), arena.claim_work("val-c")
    assert b and c and arena.claim_work("val-a") is None  # a failed validator does not retry the item
    arena.complete(b.eval_run_id, "val-b", ok(0.9))
    r = arena.complete(c.eval_run_id, "val-c", failed())
    assert r.work_item.is_closed and r.work_item.status == "FAILED"
    v = arena.versions(a.miner_hotkey, a.agent_id)[0]
    assert (v.state, v.state_reason) == ("DISCARDED", "EVALUATION_FAILED")


def test_a_run_whose_sandbox_failed_gives_its_slot_back_instead_of_failing_the_agent() -> None:
    arena, _, _ = _arena_with_versions("sqlite://", 1)  # X = 2 of Y = 3: two failures would discard the agent
    for validator in ("val-a", "val-b"):
        w = arena.claim_work(validator)
        assert w is not None
        r = arena.complete(w.eval_run_id, validator, failed("sandbox_unavailable: the sandbox failed on 5 of 5 "
                                                            "problems (not the agent's doing)"))
        assert r.status == "FAILED" and not r.work_item.is_closed and r.work_item.failures == 0
    c, d = arena.claim_work("val-c"), arena.claim_work("val-d")  # the slots went back to the queue
    assert c and d and arena.claim_work("val-a") is None  # not to the validator whose sandbox failed
    arena.complete(c.eval_run_id, "val-c", ok(0.8))
    r = arena.complete(d.eval_run_id, "val-d", ok(0.6))
    assert r.work_item.is_closed and r.work_item.status == "DONE" and r.final_score == pytest.approx(0.7)
    v = arena.versions(c.miner_hotkey, c.agent_id)[0]
    assert v.state == "ELIGIBLE"


def test_below_threshold_is_discarded() -> None:
    arena, _, _ = _arena_with_versions("sqlite://", 1, threshold_floor=0.3)
    a, b = arena.claim_work("val-a"), arena.claim_work("val-b")
    assert a and b
    arena.complete(a.eval_run_id, "val-a", ok(0.2))
    r = arena.complete(b.eval_run_id, "val-b", ok(0.3))
    assert r.work_item.is_closed and not r.agent_version_became_eligible
    v = arena.versions(a.miner_hotkey, a.agent_id)[0]
    assert v.state == "DISCARDED" and v.state_reason and v.state_reason.startswith("BELOW_THRESHOLD")


def test_run_ownership_and_result_checks() -> None:
    arena, _, _ = _arena_with_versions("sqlite://", 1)
    w = arena.claim_work("val-a")
    assert w
    with pytest.raises(Forbidden):
        arena.heartbeat(w.eval_run_id, "val-b")
    with pytest.raises(Forbidden):
        arena.agent_code(w.eval_run_id, "val-b")
    with pytest.raises(NotFound):
        arena.heartbeat("er_nope", "val-a")
    with pytest.raises(Invalid):
        arena.complete(w.eval_run_id, "val-a", ok(0.5, n=3))  # scored a subset of the suite
    with pytest.raises(Invalid):
        arena.complete(w.eval_run_id, "val-a", ok(1.5))
    code = arena.agent_code(w.eval_run_id, "val-a")
    assert code["code"] == GOOD + "# 0\n" and code["code_sha256"] == w.code_sha256
    probs = arena.run_problems(w.eval_run_id, "val-a")
    assert [p["problem_id"] for p in probs["problems"]] == w.problem_ids
    assert arena.progress(w.eval_run_id, "val-a", [ProblemProgress(problem_id=w.problem_ids[0],
                                                                   status="SUCCESS", score=1)]) == 1


def test_submissions_wait_while_no_qualifying_window_is_open() -> None:
    clock = ManualClock(T0)
    arena = make_arena("sqlite://", clock=clock)
    r = arena.submit("hk", "a", GOOD)
    assert arena.versions("hk", r.agent_id)[0].state == "RECEIVED"  # no race opened yet
    assert arena.claim_work("val") is None
    assert "queued" in arena.tick()
    assert arena.versions("hk", r.agent_id)[0].state == "QUEUED"
    assert arena.claim_work("val") is not None


def test_complete_takes_the_validators_evaluation_summary() -> None:
    from shoparena.validator.core import EvaluationSummary

    arena, _, _ = _arena_with_versions("sqlite://", 1, required_successes=1, max_attempts=1)
    w = arena.claim_work("val-a")
    assert w is not None
    summary = EvaluationSummary(
        eval_run_id="validator-run-1", status="SUCCESS", ground_truth_rate=0.6, success_rate=0.6, format_score=1.0,
        field_matching=0.8, total_problems=5, successful_problems=3, scored_problems=5, reasoning_quality=0.9,
        reasoning_coefficient=1.0, final_score=0.6, judge_inference_failed=0, judge_inference_total=3,
        records_written=5, records_skipped=0, sandbox="process", problems=[], seconds=1.5)
    res = arena.complete(w.eval_run_id, "val-a", summary)
    assert res.work_item.is_closed and res.final_score == pytest.approx(0.6)
    from shoparena.arena.state.schema import eval_runs

    run = arena.db.read(lambda c: c.execute(eval_runs.select()).one())
    assert run.validator_run_id == "validator-run-1" and run.reasoning_quality == 0.9
    assert run.score_components["judge_inference_total"] == 3
