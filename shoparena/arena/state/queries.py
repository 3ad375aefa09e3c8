"""Reads shared by the arena's write paths: the open race, the incumbent, the current threshold, released code."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlalchemy.engine import Connection

from shoparena.arena.config import ArenaConfig
from shoparena.arena.races import qualifying_threshold
from shoparena.arena.state.schema import agent_versions, agents, races

__all__ = ["Incumbent", "active_race", "current_threshold", "incumbent", "released_code", "version_row"]

ACTIVE = ("QUALIFYING_OPEN", "RACE_RUNNING")


class Incumbent(BaseModel):
    """The top agent: the winner of the newest completed race that had one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_version_id: str
    hotkey: str
    qualifying_score: float | None
    race_id: str
    race_number: int
    winner_score: float | None
    reign_started_at: float
    code_release_at: float


def active_race(conn: Connection, *, lock: bool = False) -> Any:
    """The race in QUALIFYING_OPEN or RACE_RUNNING (at most one), or None."""
    stmt = select(races).where(races.c.status.in_(ACTIVE)).order_by(races.c.race_number.desc()).limit(1)
    if lock and conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    return conn.execute(stmt).first()


def incumbent(conn: Connection) -> Incumbent | None:
    row = conn.execute(
        select(races.c.race_id, races.c.race_number, races.c.winner_agent_version_id, races.c.winner_score,
               races.c.reign_started_at, races.c.code_release_at, agent_versions.c.hotkey,
               agent_versions.c.qualifying_score)
        .join(agent_versions, agent_versions.c.agent_version_id == races.c.winner_agent_version_id)
        .where(races.c.status == "RACE_COMPLETE", races.c.winner_agent_version_id.is_not(None))
        .order_by(races.c.race_number.desc()).limit(1)
    ).first()
    if row is None:
        return None
    return Incumbent(agent_version_id=row.winner_agent_version_id, hotkey=row.hotkey,
                     qualifying_score=row.qualifying_score, race_id=row.race_id, race_number=row.race_number,
                     winner_score=row.winner_score, reign_started_at=row.reign_started_at,
                     code_release_at=row.code_release_at)


def current_threshold(conn: Connection, now: float, config: ArenaConfig) -> float:
    inc = incumbent(conn)
    if inc is None:
        return qualifying_threshold(None, None, now, config)
    return qualifying_threshold(inc.qualifying_score, inc.reign_started_at, now, config)


def version_row(conn: Connection, agent_version_id: str) -> Any:
    return conn.execute(select(agent_versions).where(agent_versions.c.agent_version_id == agent_version_id)).first()


def released_code(conn: Connection, now: float, *, exclude_hotkey: str | None = None) -> dict[str, str]:
    """``{"<agent name>@v<n>": code}`` of every version whose embargo has ended (for the similarity check), except
    ``exclude_hotkey``'s own: improving one's own released agent is not copying it."""
    cond = [agent_versions.c.code_release_at.is_not(None), agent_versions.c.code_release_at <= now]
    if exclude_hotkey is not None:
        cond.append(agents.c.hotkey != exclude_hotkey)
    rows = conn.execute(
        select(agents.c.name, agent_versions.c.version_number, agent_versions.c.code)
        .join(agents, agents.c.agent_id == agent_versions.c.agent_id)
        .where(*cond)
        .order_by(agent_versions.c.agent_version_id)
    ).all()
    return {f"{r.name}@v{r.version_number}": r.code for r in rows}
