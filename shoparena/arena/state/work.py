"""The validator work queue (docs/arena.md §6): work items with X-of-Y validator agreement, leases, the reaper.

A work item asks for ``required_successes`` (X) successful runs from distinct validators of one agent version on
one suite; it fails once more than ``max_attempts − X`` runs failed (Y attempts in all). A run the validator failed
on its own side (``failure_reason`` ``sandbox_unavailable: …``: its sandbox never ran the agent) is no failure of the
agent's: like a lapsed lease, it gives its slot back to the queue for another validator. Each claim creates an
``eval_runs`` row holding a lease until ``lease_expires_at``; heartbeats renew it. A lease the clock has passed is
EXPIRED (by the reaper, or on the spot when its holder calls): the slot returns to the queue and the late
validator's heartbeat / complete get ``LeaseExpired``. Counters on the item (``active_leases``, ``successes``,
``failures``) change only inside the write transaction that changes the runs, with the item row locked on
PostgreSQL (``FOR UPDATE``) and the whole database on SQLite (``BEGIN IMMEDIATE``), so two validators can never
over-claim an item. A closed item's score is the mean ``final_score`` of its included runs; a qualifying item then
makes its version ELIGIBLE (score ≥ the current threshold) or DISCARDED; a race item's score waits, hidden, for
the race to complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.engine import Connection

from shoparena.arena.config import ArenaConfig
from shoparena.arena.races import mean
from shoparena.arena.state.db import event, short_id
from shoparena.arena.state.queries import current_threshold
from shoparena.arena.state.schema import agent_versions, eval_runs, suites, work_items
from shoparena.arena.state.types import (
    ClaimWork,
    CompleteRequest,
    CompleteResult,
    Forbidden,
    Invalid,
    LeaseExpired,
    NotFound,
    ProblemProgress,
    WorkItemStatus,
)
from shoparena.validator.core import SANDBOX_UNAVAILABLE

__all__ = ["cancel_items", "claim", "complete", "create_item", "heartbeat", "progress", "reap", "set_state"]

PRIORITY = {"RACE": 10, "QUALIFYING": 0}
HOLDING = ("RUNNING", "SUCCESS", "FAILED")  # a validator with such a run on an item may not claim it again
VALIDATORS_OWN = (f"{SANDBOX_UNAVAILABLE}:",)
"""``failure_reason`` prefixes of runs that failed on the validator's side, never counted against the agent."""


def set_state(conn: Connection, version_id: str, state: str, now: float, reason: str | None = None,
              **values: Any) -> None:
    conn.execute(update(agent_versions).where(agent_versions.c.agent_version_id == version_id)
                 .values(state=state, state_reason=reason, updated_at=now, **values))
    event(conn, now, f"VERSION_{state}", "agent_version", version_id, reason=reason,
          **{k: v for k, v in values.items() if isinstance(v, (int, float, str, type(None)))})


def create_item(conn: Connection, kind: str, race_id: str, version_id: str, suite_id: str, now: float,
                config: ArenaConfig) -> str:
    item_id = short_id("wi", kind, race_id, version_id)
    conn.execute(work_items.insert().values(
        work_item_id=item_id, kind=kind, race_id=race_id, agent_version_id=version_id, suite_id=suite_id,
        status="OPEN", priority=PRIORITY[kind], required_successes=config.required_successes,
        max_attempts=config.max_attempts, active_leases=0, successes=0, failures=0, created_at=now))
    event(conn, now, "WORK_CREATED", "work_item", item_id, work_kind=kind, race_id=race_id, agent_version_id=version_id)
    return item_id


def _end_runs(conn: Connection, where: Any, status: str, now: float) -> list[Any]:
    rows = conn.execute(select(eval_runs.c.eval_run_id, eval_runs.c.work_item_id)
                        .where(eval_runs.c.status == "RUNNING", where)).all()
    for r in rows:
        conn.execute(update(eval_runs).where(eval_runs.c.eval_run_id == r.eval_run_id)
                     .values(status=status, completed_at=now))
        conn.execute(update(work_items).where(work_items.c.work_item_id == r.work_item_id)
                     .values(active_leases=work_items.c.active_leases - 1))
        event(conn, now, f"RUN_{status}", "eval_run", r.eval_run_id, work_item_id=r.work_item_id)
    return rows


def reap(conn: Connection, now: float) -> int:
    """Expire every lease the clock has passed; their slots return to the queue. Returns how many."""
    return len(_end_runs(conn, eval_runs.c.lease_expires_at < now, "EXPIRED", now))


def cancel_items(conn: Connection, where: Any, now: float, reason: str) -> list[str]:
    """Cancel the OPEN items matching ``where`` and end their running leases."""
    ids = list(conn.execute(select(work_items.c.work_item_id).where(work_items.c.status == "OPEN", where))
               .scalars())
    if ids:
        _end_runs(conn, eval_runs.c.work_item_id.in_(ids), "CANCELLED", now)
        conn.execute(update(work_items).where(work_items.c.work_item_id.in_(ids))
                     .values(status="CANCELLED", closed_at=now))
        for i in ids:
            event(conn, now, "WORK_CANCELLED", "work_item", i, reason=reason)
    return ids


def claim(conn: Connection, validator: str, now: float, config: ArenaConfig) -> ClaimWork | None:
    """Lease the next item this validator may work on (race items first, then the least-covered, oldest)."""
    reap(conn, now)
    w = work_items.c
    mine = exists().where(eval_runs.c.work_item_id == w.work_item_id, eval_runs.c.validator_hotkey == validator,
                          eval_runs.c.status.in_(HOLDING))
    stmt = (select(work_items).where(w.status == "OPEN", w.active_leases + w.successes < w.required_successes,
                                     w.active_leases + w.successes + w.failures < w.max_attempts, ~mine)
            .order_by(w.priority.desc(), w.active_leases, w.created_at, w.work_item_id).limit(1))
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    item = conn.execute(stmt).first()
    if item is None:
        return None
    attempt = 1 + conn.execute(select(func.count()).where(eval_runs.c.work_item_id == item.work_item_id,
                                                          eval_runs.c.validator_hotkey == validator)).scalar_one()
    run_id = short_id("er", item.work_item_id, validator, attempt)
    lease = now + config.lease_s
    conn.execute(eval_runs.insert().values(
        eval_run_id=run_id, work_item_id=item.work_item_id, validator_hotkey=validator, attempt=attempt,
        status="RUNNING", claimed_at=now, lease_expires_at=lease, is_included=False))
    conn.execute(update(work_items).where(w.work_item_id == item.work_item_id)
                 .values(active_leases=w.active_leases + 1))
    event(conn, now, "RUN_CLAIMED", "eval_run", run_id, work_item_id=item.work_item_id, validator=validator)
    version = conn.execute(select(agent_versions).where(
        agent_versions.c.agent_version_id == item.agent_version_id)).one()
    if item.kind == "QUALIFYING" and version.state == "QUEUED":
        set_state(conn, version.agent_version_id, "RUNNING", now)
    problem_ids = conn.execute(select(suites.c.problem_ids).where(suites.c.suite_id == item.suite_id)).scalar_one()
    return ClaimWork(eval_run_id=run_id, work_item_id=item.work_item_id, kind=item.kind, race_id=item.race_id,
                     suite_id=item.suite_id, agent_id=version.agent_id, agent_version_id=version.agent_version_id,
                     version_number=version.version_number, miner_hotkey=version.hotkey,
                     code_sha256=version.code_sha256, problem_ids=list(problem_ids), lease_expires_at=lease,
                     attempt=attempt)


def held_run(conn: Connection, run_id: str, validator: str, now: float) -> Any:
    """The RUNNING run ``run_id`` held by ``validator`` with a live lease (expired on the spot if it lapsed)."""
    stmt = select(eval_runs).where(eval_runs.c.eval_run_id == run_id)
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    run = conn.execute(stmt).first()
    if run is None:
        raise NotFound(f"no evaluation run {run_id}")
    if run.validator_hotkey != validator:
        raise Forbidden(f"evaluation run {run_id} is not leased to this validator")
    if run.status == "RUNNING" and run.lease_expires_at < now:
        _end_runs(conn, eval_runs.c.eval_run_id == run_id, "EXPIRED", now)
        run = conn.execute(select(eval_runs).where(eval_runs.c.eval_run_id == run_id)).one()
    if run.status == "EXPIRED":
        raise LeaseExpired(f"the lease on {run_id} expired at {run.lease_expires_at:.0f}; the work was requeued")
    if run.status != "RUNNING":
        raise LeaseExpired(f"evaluation run {run_id} is {run.status}, not running")
    return run


def heartbeat(conn: Connection, run_id: str, validator: str, now: float, config: ArenaConfig) -> float:
    held_run(conn, run_id, validator, now)
    lease = now + config.lease_s
    conn.execute(update(eval_runs).where(eval_runs.c.eval_run_id == run_id)
                 .values(lease_expires_at=lease, heartbeat_at=now))
    return lease


def progress(conn: Connection, run_id: str, validator: str, updates: Sequence[ProblemProgress], now: float) -> int:
    run = held_run(conn, run_id, validator, now)
    merged = dict(run.progress or {})
    merged.update({u.problem_id: u.model_dump(exclude={"problem_id"}) for u in updates})
    conn.execute(update(eval_runs).where(eval_runs.c.eval_run_id == run_id).values(progress=merged))
    return len(merged)


def complete(conn: Connection, run_id: str, validator: str, req: CompleteRequest, now: float,
             config: ArenaConfig) -> CompleteResult:
    """Record a run's result; close its item after X successes (or once X became unreachable)."""
    run = held_run(conn, run_id, validator, now)
    stmt = select(work_items).where(work_items.c.work_item_id == run.work_item_id)
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    item = conn.execute(stmt).one()
    n_problems = len(conn.execute(select(suites.c.problem_ids).where(suites.c.suite_id == item.suite_id))
                     .scalar_one())
    success = req.terminal_status == "SUCCESS"
    ours = not success and (req.failure_reason or "").startswith(VALIDATORS_OWN)
    if success:
        if req.validator_score is None or not 0.0 <= req.validator_score <= 1.0:
            raise Invalid("a SUCCESS run needs validator_score in [0, 1]")
        total = req.score_components.total_problems
        if total is not None and total != n_problems:
            raise Invalid(f"the run scored {total} problems; the suite has {n_problems}")
        weight = req.score_components.richness_weight or 0.0
        if weight != config.richness_weight:  # races and weights never mix scores of two formulas
            raise Invalid(f"the run was scored with richness weight {weight:g}; this arena scores with "
                          f"{config.richness_weight:g}")
    comps = req.score_components
    conn.execute(update(eval_runs).where(eval_runs.c.eval_run_id == run_id).values(
        status="SUCCESS" if success else "FAILED", completed_at=now, is_included=success,
        final_score=req.validator_score if success else None, success_rate=comps.success_rate,
        reasoning_quality=comps.reasoning_quality, reasoning_coefficient=comps.reasoning_coefficient,
        score_components=comps.model_dump(), failure_reason=req.failure_reason,
        validator_run_id=req.validator_run_id, sandbox_metadata=req.sandbox_metadata))
    w = work_items.c
    conn.execute(update(work_items).where(w.work_item_id == item.work_item_id).values(
        active_leases=w.active_leases - 1, successes=w.successes + int(success),
        failures=w.failures + int(not success and not ours)))
    event(conn, now, "RUN_SUCCESS" if success else "RUN_FAILED", "eval_run", run_id,
          work_item_id=item.work_item_id, score=req.validator_score, reason=req.failure_reason)
    item = conn.execute(select(work_items).where(w.work_item_id == item.work_item_id)).one()
    became_eligible, score = False, None
    if item.status == "OPEN" and item.successes >= item.required_successes:
        became_eligible, score = _close(conn, item, now, config)
    elif item.status == "OPEN" and item.failures > item.max_attempts - item.required_successes:
        _fail(conn, item, now)
    item = conn.execute(select(work_items).where(w.work_item_id == item.work_item_id)).one()
    status = WorkItemStatus(work_item_id=item.work_item_id, included_success_count=item.successes,
                            required_successes=item.required_successes, failures=item.failures,
                            is_closed=item.status != "OPEN", status=item.status)
    final = score if item.kind == "QUALIFYING" else None  # race scores stay hidden until RACE_COMPLETE
    return CompleteResult(status="SUCCESS" if success else "FAILED", work_item=status,
                          agent_version_became_eligible=became_eligible, final_score=final)


def _close(conn: Connection, item: Any, now: float, config: ArenaConfig) -> tuple[bool, float | None]:
    scores = conn.execute(select(eval_runs.c.final_score).where(
        and_(eval_runs.c.work_item_id == item.work_item_id, eval_runs.c.is_included.is_(True)))
        .order_by(eval_runs.c.completed_at, eval_runs.c.eval_run_id)).scalars().all()
    score = mean([float(s) for s in scores[: item.required_successes]])
    conn.execute(update(work_items).where(work_items.c.work_item_id == item.work_item_id)
                 .values(status="DONE", score=score, closed_at=now))
    event(conn, now, "WORK_DONE", "work_item", item.work_item_id, work_kind=item.kind)
    if item.kind != "QUALIFYING":
        return False, score
    threshold = current_threshold(conn, now, config)
    eligible = score is not None and score >= threshold
    if eligible:
        set_state(conn, item.agent_version_id, "ELIGIBLE", now, None, qualifying_score=score,
                  qualifying_race_id=item.race_id, eligible_at=now)
    else:
        set_state(conn, item.agent_version_id, "DISCARDED", now, f"BELOW_THRESHOLD ({score:.4f} < {threshold:.4f})",
                  qualifying_score=score, qualifying_race_id=item.race_id)
    return eligible, score


def _fail(conn: Connection, item: Any, now: float) -> None:
    conn.execute(update(work_items).where(work_items.c.work_item_id == item.work_item_id)
                 .values(status="FAILED", closed_at=now))
    event(conn, now, "WORK_FAILED", "work_item", item.work_item_id, work_kind=item.kind)
    if item.kind == "QUALIFYING":
        set_state(conn, item.agent_version_id, "DISCARDED", now, "EVALUATION_FAILED")
