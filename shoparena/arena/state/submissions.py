"""Submissions (docs/arena.md §2): the atomic per-hotkey cooldown, the gate, agents and versions v1, v2, ….

Atomicity: the cooldown is taken *before* the gate runs, by one conditional statement in a write transaction —
``UPDATE miners SET next_allowed_at = now + cooldown … WHERE hotkey = ? AND next_allowed_at <= now`` — which at
most one concurrent caller can win (SQLite serialises writers with ``BEGIN IMMEDIATE``; PostgreSQL re-checks the
``WHERE`` on the locked row). The winner becomes the ``cooldown_holder``; everyone else gets COOLDOWN with the
remaining seconds. After the gate, a second transaction settles the cooldown by severity (accepted or integrity:
full; security / format only: reduced) — only if the winner still holds it — records the submission and, when
accepted, the new version. A crash between the two leaves the full cooldown in place (fail closed).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from shoparena.arena.config import ArenaConfig
from shoparena.arena.state.db import ArenaDB, event, short_id
from shoparena.arena.state.ports import Gate, violations_of
from shoparena.arena.state.queries import active_race, released_code
from shoparena.arena.state.schema import agent_versions, agents, miners, submissions, work_items
from shoparena.arena.state.types import SubmitResult
from shoparena.arena.state.work import cancel_items, create_item, set_state

__all__ = ["NAME_RE", "pin", "queue_received", "submit"]

NAME_RE = re.compile(r"^[A-Za-z0-9 _.\-]{1,100}$")


def _insert_miner(conn: Connection, hotkey: str, now: float) -> None:
    ins = pg_insert(miners) if conn.dialect.name == "postgresql" else sqlite_insert(miners)
    conn.execute(ins.values(hotkey=hotkey, first_seen_at=now, next_allowed_at=-1e18, cooldown_holder=None,
                            submission_count=0, pinned_version_id=None, banned=False)
                 .on_conflict_do_nothing(index_elements=["hotkey"]))


def _take_cooldown(conn: Connection, hotkey: str, now: float, config: ArenaConfig) -> tuple[str | None, Any]:
    """``(submission_id, None)`` for the caller that won the hotkey's slot, else ``(None, miner row)``."""
    _insert_miner(conn, hotkey, now)
    m = miners.c
    won = conn.execute(update(miners).where(m.hotkey == hotkey, m.next_allowed_at <= now, m.banned.is_(False))
                       .values(next_allowed_at=now + config.cooldown_s, submission_count=m.submission_count + 1)
                       .returning(m.submission_count)).first()
    if won is None:
        return None, conn.execute(select(miners).where(m.hotkey == hotkey)).one()
    sub_id = short_id("sub", hotkey, won.submission_count)
    conn.execute(update(miners).where(m.hotkey == hotkey).values(cooldown_holder=sub_id))
    return sub_id, None


def _cooldown_of(report_cooldown: str, accepted: bool, config: ArenaConfig) -> tuple[str, float]:
    if accepted or report_cooldown == "full":
        return "full", config.cooldown_s
    if report_cooldown == "reduced":
        return "reduced", config.reduced_cooldown_s
    return "none", 0.0


def _release(db: ArenaDB, hotkey: str, sub_id: str, until: float) -> None:
    db.write(lambda conn: conn.execute(update(miners).where(
        miners.c.hotkey == hotkey, miners.c.cooldown_holder == sub_id).values(next_allowed_at=until)))


def submit(db: ArenaDB, *, hotkey: str, agent_name: str, code: bytes, now: float, config: ArenaConfig,
           gate: Gate, registered: set[str] | None) -> SubmitResult:
    """One submission attempt; never raises for a refusal (the result says why)."""
    if not NAME_RE.match(agent_name):
        return SubmitResult(admission_status="REJECTED", admission_reason="INVALID_NAME", hotkey=hotkey)
    if registered is not None and hotkey not in registered:
        return SubmitResult(admission_status="REJECTED", admission_reason="NOT_REGISTERED_ONCHAIN", hotkey=hotkey)
    sub_id, miner = db.write(lambda conn: _take_cooldown(conn, hotkey, now, config))
    if sub_id is None:
        if miner.banned:
            return SubmitResult(admission_status="REJECTED", admission_reason="BANNED", hotkey=hotkey)
        return SubmitResult(admission_status="REJECTED", admission_reason="COOLDOWN", hotkey=hotkey,
                            next_allowed_at=miner.next_allowed_at,
                            remaining_seconds=max(0.0, miner.next_allowed_at - now))
    try:
        released = db.read(lambda conn: released_code(conn, now, exclude_hotkey=hotkey))
        report = gate(code, released)
    except BaseException:
        _release(db, hotkey, sub_id, now)  # our failure, not the miner's: give the slot back
        raise
    kind, seconds = _cooldown_of(report.cooldown, report.accepted, config)
    violations = violations_of(report)
    sha = hashlib.sha256(code).hexdigest()
    next_at = now + seconds

    def _record(conn: Connection) -> SubmitResult:
        conn.execute(update(miners).where(miners.c.hotkey == hotkey, miners.c.cooldown_holder == sub_id)
                     .values(next_allowed_at=next_at))
        version: tuple[str, str, int] | None = None
        if report.accepted:
            version = _new_version(conn, hotkey, agent_name, code.decode("utf-8"), sha, sub_id, now)
        conn.execute(submissions.insert().values(
            submission_id=sub_id, hotkey=hotkey, agent_name=agent_name, submitted_at=now, code_sha256=sha,
            admission_status="ACCEPTED" if report.accepted else "REJECTED",
            admission_reason=None if report.accepted else "INVALID_FILE", cooldown=kind, next_allowed_at=next_at,
            violations=[v.model_dump() for v in violations], similarity=report.similarity,
            similar_to=report.similar_to, agent_version_id=version[1] if version else None))
        event(conn, now, "SUBMISSION_" + ("ACCEPTED" if report.accepted else "REJECTED"), "submission", sub_id,
              hotkey=hotkey, cooldown=kind, violations=len(violations))
        if version is not None:
            queue_received(conn, now, config)
        return SubmitResult(
            admission_status="ACCEPTED" if report.accepted else "REJECTED",
            admission_reason=None if report.accepted else "INVALID_FILE", hotkey=hotkey,
            agent_id=version[0] if version else None, agent_version_id=version[1] if version else None,
            version_number=version[2] if version else None, submission_id=sub_id, next_allowed_at=next_at,
            remaining_seconds=seconds, cooldown=kind, violations=violations, similarity=report.similarity,
            similar_to=report.similar_to)

    return db.write(_record)


def _new_version(conn: Connection, hotkey: str, name: str, code: str, sha: str, sub_id: str,
                 now: float) -> tuple[str, str, int]:
    agent_id = short_id("ag", hotkey, name)
    ins = pg_insert(agents) if conn.dialect.name == "postgresql" else sqlite_insert(agents)
    conn.execute(ins.values(agent_id=agent_id, hotkey=hotkey, name=name, created_at=now)
                 .on_conflict_do_nothing(index_elements=["agent_id"]))
    v = agent_versions.c
    number = 1 + conn.execute(select(func.coalesce(func.max(v.version_number), 0))
                              .where(v.agent_id == agent_id)).scalar_one()
    version_id = short_id("av", agent_id, number)
    superseded = list(conn.execute(select(v.agent_version_id).where(
        v.agent_id == agent_id, v.state.in_(("RECEIVED", "QUEUED")))).scalars())
    for old in superseded:
        cancel_items(conn, work_items.c.agent_version_id == old, now, f"superseded by v{number}")
        set_state(conn, old, "CANCELLED", now, f"SUPERSEDED by v{number}")
    conn.execute(agent_versions.insert().values(
        agent_version_id=version_id, agent_id=agent_id, hotkey=hotkey, version_number=number, code=code,
        code_sha256=sha, state="RECEIVED", submission_id=sub_id, created_at=now, updated_at=now))
    event(conn, now, "VERSION_RECEIVED", "agent_version", version_id, agent_id=agent_id, version_number=number)
    return agent_id, version_id, number


def queue_received(conn: Connection, now: float, config: ArenaConfig) -> int:
    """Give every RECEIVED version a qualifying item on the open race's suite (none while no race is open)."""
    race = active_race(conn)
    if race is None or race.status != "QUALIFYING_OPEN":
        return 0
    ids = list(conn.execute(select(agent_versions.c.agent_version_id).where(agent_versions.c.state == "RECEIVED")
                            .order_by(agent_versions.c.created_at, agent_versions.c.agent_version_id)).scalars())
    for version_id in ids:
        create_item(conn, "QUALIFYING", race.race_id, version_id, race.qualifying_suite_id, now, config)
        set_state(conn, version_id, "QUEUED", now)
    return len(ids)


def pin(conn: Connection, hotkey: str, version_id: str | None, now: float, config: ArenaConfig) -> str | None:
    """Set (or clear, with None) the hotkey's race selection. Returns the refusal reason, None when done:
    ``NOT_FOUND``, ``NOT_ELIGIBLE``, ``DISCARDED``, ``ELIMINATED``, ``BELOW_THRESHOLD``, ``SELECTED_AFTER_CLOSE``."""
    from shoparena.arena.state.queries import current_threshold, version_row

    if version_id is not None:
        v = version_row(conn, version_id)
        if v is None or v.hotkey != hotkey:
            return "NOT_FOUND"
        if v.state == "DISCARDED":
            return "DISCARDED"
        if v.eliminated_in_race_number is not None:
            return "ELIMINATED"
        if v.state != "ELIGIBLE":
            return "NOT_ELIGIBLE"
        if (v.qualifying_score or 0.0) < current_threshold(conn, now, config):
            return "BELOW_THRESHOLD"
    race = active_race(conn)
    if race is not None and race.status == "RACE_RUNNING":
        return "SELECTED_AFTER_CLOSE"
    _insert_miner(conn, hotkey, now)
    conn.execute(update(miners).where(miners.c.hotkey == hotkey).values(pinned_version_id=version_id))
    event(conn, now, "RACE_SELECTION", "miner", hotkey, agent_version_id=version_id)
    return None
