"""The race state machine against the database (rules in ``arena/races.py``), one transition per step of
:func:`tick`, each inside the tick's write transaction (PostgreSQL also takes an advisory lock, so two arena
processes never both open or close a race).

- no active race → **open** race n+1 (QUALIFYING_OPEN): secret drawn, ``sha256(secret)`` published, qualifying
  suite drawn (open bank, or the static suite), qualifying closes at the next daily close; waiting versions queued.
- QUALIFYING_OPEN and ``now ≥ qualifying_closes_at`` → **start** (RACE_RUNNING): beacon read, secret revealed,
  ``world_seed`` derived, held-out draw, one racer per hotkey (incumbent auto-qualifies), race work items.
- RACE_RUNNING and (every race item closed or ``now ≥ race_deadline_at``) → **finish** (RACE_COMPLETE): open
  items cancelled (DNF), ranks and scores written to ``qualifiers`` (hidden until now), winner promoted (code
  release at the next weekday noon US/Pacific), eliminations; the next race opens in the same tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from shoparena.arena import races as rules
from shoparena.arena.config import ArenaConfig
from shoparena.arena.state.db import event, short_id
from shoparena.arena.state.ports import registered_hotkeys, static_problems
from shoparena.arena.state.queries import active_race, current_threshold, incumbent
from shoparena.arena.state.schema import agent_versions, miners, qualifiers, races, suites, work_items
from shoparena.arena.state.submissions import queue_received
from shoparena.arena.state.work import cancel_items, create_item, reap
from shoparena.tasks.types import Problem

__all__ = ["RaceContext", "tick"]

_PG_TICK_LOCK = 0x5E0A_71C4
MAX_STEPS = 16


@dataclass(frozen=True)
class RaceContext:
    config: ArenaConfig
    banks: Any
    chain: Any
    seed: int | None


def tick(conn: Connection, now: float, ctx: RaceContext) -> list[str]:
    """Reap lapsed leases, then apply every race transition due at ``now``; returns what happened."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_TICK_LOCK})")
    done: list[str] = []
    if reap(conn, now):
        done.append("reaped")
    for _ in range(MAX_STEPS):
        race = active_race(conn)
        if race is None:
            done.append(f"opened {_open(conn, now, ctx)}")
        elif race.status == "QUALIFYING_OPEN" and now >= race.qualifying_closes_at:
            _start(conn, race, now, ctx)
            done.append(f"started {race.race_id}")
        elif race.status == "RACE_RUNNING" and (now >= race.race_deadline_at or not _open_items(conn, race)):
            _finish(conn, race, now, ctx)
            done.append(f"completed {race.race_id}")
        else:
            break
    if queue_received(conn, now, ctx.config):
        done.append("queued")
    return done


def _suite(conn: Connection, kind: str, source: str, race_id: str | None, problems: list[Problem],
           now: float) -> str:
    ids = [p.problem_id for p in problems]
    suite_id = short_id("suite", kind, source, race_id if kind == "RACE" else "", *ids)
    ins = pg_insert(suites) if conn.dialect.name == "postgresql" else sqlite_insert(suites)
    conn.execute(ins.values(suite_id=suite_id, kind=kind, source=source, race_id=race_id, problem_ids=ids,
                            problems=[p.model_dump(mode="json") for p in problems], created_at=now)
                 .on_conflict_do_nothing(index_elements=["suite_id"]))
    return suite_id


def _open(conn: Connection, now: float, ctx: RaceContext) -> str:
    cfg = ctx.config
    number = 1 + (conn.execute(select(races.c.race_number).order_by(races.c.race_number.desc()).limit(1))
                  .scalar() or 0)
    race_id = f"race-{number:06d}"
    secret = rules.race_secret(ctx.seed, race_id)
    if cfg.qualifying_source == "static":
        assert cfg.qualifying_suite is not None
        problems = static_problems(ctx.banks, cfg.qualifying_suite)[: cfg.qualifying_problems]
        source = f"static:{cfg.qualifying_suite}"
    else:
        problems = ctx.banks.draw("open", cfg.qualifying_problems, rules.qualifying_seed(ctx.seed, race_id))
        source = "open"
    suite_id = _suite(conn, "QUALIFYING", source, race_id, problems, now)
    closes = rules.next_qualifying_close(now, cfg)
    commitment = rules.commitment(secret)
    conn.execute(races.insert().values(
        race_id=race_id, race_number=number, status="QUALIFYING_OPEN", qualifying_suite_id=suite_id,
        opened_at=now, qualifying_closes_at=closes, qualifying_threshold=current_threshold(conn, now, cfg),
        commitment=commitment, secret=secret, promoted=False))
    event(conn, now, "RACE_QUALIFYING_OPEN", "race", race_id, commitment=commitment, qualifying_closes_at=closes,
          qualifying_suite_id=suite_id)
    return race_id


def _start(conn: Connection, race: Any, now: float, ctx: RaceContext) -> None:
    cfg = ctx.config
    block, beacon, beacon_source = rules.beacon_for(ctx.chain, race.race_id, now)
    seed_hex = rules.world_seed(race.secret, beacon)
    problems = ctx.banks.draw("held_out", cfg.race_problems, rules.seed_int(seed_hex))
    suite_id = _suite(conn, "RACE", "held_out", race.race_id, problems, now)
    mark_used = getattr(ctx.banks, "mark_used", None)
    if callable(mark_used):  # used held-out clusters move to the open bank at the banks' next rotation
        mark_used([p.problem_id for p in problems])
    threshold = current_threshold(conn, now, cfg)
    inc = incumbent(conn)
    v = agent_versions.c
    rows = conn.execute(select(v.agent_version_id, v.hotkey, v.qualifying_score, v.state,
                               v.eliminated_in_race_number).where(v.state == "ELIGIBLE")).all()
    candidates = [rules.Candidate(agent_version_id=r.agent_version_id, hotkey=r.hotkey,
                                  qualifying_score=r.qualifying_score, state=r.state,
                                  eliminated=r.eliminated_in_race_number is not None) for r in rows]
    inc_candidate = next((c for c in candidates if inc and c.agent_version_id == inc.agent_version_id), None)
    pins = {r.hotkey: r.pinned_version_id for r in conn.execute(
        select(miners.c.hotkey, miners.c.pinned_version_id).where(miners.c.pinned_version_id.is_not(None)))}
    racers = rules.select_racers(candidates, threshold=threshold, incumbent=inc_candidate, pins=pins,
                                 registered=registered_hotkeys(ctx.chain))
    for r in racers:
        conn.execute(qualifiers.insert().values(
            race_id=race.race_id, agent_version_id=r.agent_version_id, hotkey=r.hotkey,
            qualification_type=r.qualification_type, qualifying_score=r.qualifying_score, eliminated=False))
        create_item(conn, "RACE", race.race_id, r.agent_version_id, suite_id, now, cfg)
    conn.execute(update(races).where(races.c.race_id == race.race_id).values(
        status="RACE_RUNNING", race_suite_id=suite_id, race_started_at=now, race_deadline_at=now + cfg.race_window_s,
        qualifying_threshold=threshold, beacon_block=block, beacon=beacon, beacon_source=beacon_source,
        world_seed=seed_hex, incumbent_version_id=inc.agent_version_id if inc else None))
    event(conn, now, "RACE_RUNNING", "race", race.race_id, secret=race.secret, beacon=beacon, beacon_block=block,
          world_seed=seed_hex, racers=[r.agent_version_id for r in racers], threshold=threshold)


def _open_items(conn: Connection, race: Any) -> bool:
    return conn.execute(select(work_items.c.work_item_id).where(
        work_items.c.race_id == race.race_id, work_items.c.kind == "RACE", work_items.c.status == "OPEN")
        .limit(1)).first() is not None


def _finish(conn: Connection, race: Any, now: float, ctx: RaceContext) -> None:
    cfg = ctx.config
    w = work_items.c
    cancel_items(conn, (w.race_id == race.race_id) & (w.kind == "RACE"), now, "race deadline")
    items = conn.execute(select(w.agent_version_id, w.status, w.score).where(
        w.race_id == race.race_id, w.kind == "RACE")).all()
    results = {i.agent_version_id: (i.score if i.status == "DONE" else None) for i in items}
    ranking = rules.rank(results)
    winner = ranking[0][0] if ranking and ranking[0][1] is not None else None
    out = set(rules.eliminated(results, winner, cfg))
    q = qualifiers.c
    for version_id, score, rank in ranking:
        conn.execute(update(qualifiers).where(q.race_id == race.race_id, q.agent_version_id == version_id)
                     .values(race_score=score, race_rank=rank, eliminated=version_id in out))
    for version_id in sorted(out):
        conn.execute(update(agent_versions).where(agent_versions.c.agent_version_id == version_id)
                     .values(eliminated_in_race_number=race.race_number, updated_at=now))
        event(conn, now, "VERSION_ELIMINATED", "agent_version", version_id, race_number=race.race_number)
    values: dict[str, Any] = {"status": "RACE_COMPLETE", "race_completed_at": now}
    if winner is not None:
        prev = incumbent(conn)
        promoted = prev is None or prev.agent_version_id != winner
        reign = now if promoted or prev is None else prev.reign_started_at
        release = rules.release_at(now, cfg) if promoted or prev is None else prev.code_release_at
        values.update(winner_agent_version_id=winner, winner_score=results[winner], promoted=promoted,
                      reign_started_at=reign, code_release_at=release)
        if promoted:
            conn.execute(update(agent_versions).where(agent_versions.c.agent_version_id == winner)
                         .values(promoted_at=now, code_release_at=release, updated_at=now))
            event(conn, now, "VERSION_PROMOTED", "agent_version", winner, race_id=race.race_id,
                  code_release_at=release)
    conn.execute(update(races).where(races.c.race_id == race.race_id).values(**values))
    event(conn, now, "RACE_COMPLETE", "race", race.race_id, winner=winner,
          finishers=sum(1 for _, s, _ in ranking if s is not None), eliminated=sorted(out))
