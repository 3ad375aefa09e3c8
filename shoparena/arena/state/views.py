"""Read-only views of the arena state, with the embargoes applied: per-agent race scores only once the race is
RACE_COMPLETE (they are written to ``qualifiers`` only then), the race secret only once revealed, held-out and
static problem ids never public, a winner's code only after its release time."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from shoparena.arena.config import ArenaConfig
from shoparena.arena.state.queries import current_threshold, incumbent
from shoparena.arena.state.schema import agent_versions, agents, qualifiers, races, suites, work_items
from shoparena.arena.state.types import (
    AgentPublic,
    LeaderboardRow,
    NotFound,
    QualifierPublic,
    RaceDetail,
    RacePublic,
    SeedCommitment,
    Standings,
    SuitePublic,
    TopAgent,
    VersionPublic,
)
from shoparena.arena.state.work import held_run
from shoparena.arena.weights import Finisher

__all__ = ["agents_of", "leaderboard", "race_detail", "race_list", "run_agent", "run_problems", "standings",
           "suite_list", "top_agent", "versions_of"]


def _version(r: Any) -> VersionPublic:
    return VersionPublic(agent_version_id=r.agent_version_id, agent_id=r.agent_id, version_number=r.version_number,
                         state=r.state, state_reason=r.state_reason, code_sha256=r.code_sha256,
                         submitted_at=r.created_at, qualifying_score=r.qualifying_score, eligible_at=r.eligible_at,
                         eliminated_in_race_number=r.eliminated_in_race_number)


def agents_of(conn: Connection, hotkey: str) -> list[AgentPublic]:
    out = []
    for a in conn.execute(select(agents).where(agents.c.hotkey == hotkey).order_by(agents.c.created_at,
                                                                                    agents.c.agent_id)):
        vs = versions_of(conn, hotkey, a.agent_id)
        out.append(AgentPublic(agent_id=a.agent_id, agent_name=a.name, hotkey=a.hotkey, created_at=a.created_at,
                               version_count=len(vs), latest=vs[-1] if vs else None))
    return out


def versions_of(conn: Connection, hotkey: str, agent_id: str) -> list[VersionPublic]:
    owner = conn.execute(select(agents.c.hotkey).where(agents.c.agent_id == agent_id)).scalar()
    if owner is None or owner != hotkey:
        raise NotFound(f"no agent {agent_id} of this miner")
    v = agent_versions.c
    return [_version(r) for r in conn.execute(select(agent_versions).where(v.agent_id == agent_id)
                                              .order_by(v.version_number))]


def _counts(conn: Connection, race_id: str) -> tuple[int, int]:
    q = qualifiers.c
    n = conn.execute(select(func.count()).where(q.race_id == race_id)).scalar_one()
    scored = conn.execute(select(func.count()).where(q.race_id == race_id, q.race_score.is_not(None))).scalar_one()
    return n, scored


def _race(conn: Connection, r: Any) -> RacePublic:
    n, scored = _counts(conn, r.race_id)
    complete = r.status == "RACE_COMPLETE"
    return RacePublic(
        race_id=r.race_id, race_number=r.race_number, status=r.status, qualifying_suite_id=r.qualifying_suite_id,
        race_suite_id=r.race_suite_id, opened_at=r.opened_at, qualifying_closes_at=r.qualifying_closes_at,
        race_started_at=r.race_started_at, race_deadline_at=r.race_deadline_at,
        race_completed_at=r.race_completed_at, qualifying_threshold=r.qualifying_threshold,
        commitment=r.commitment, incumbent_version_id=r.incumbent_version_id,
        winner_agent_version_id=r.winner_agent_version_id if complete else None,
        winner_score=r.winner_score if complete else None, promoted=bool(r.promoted),
        code_release_at=r.code_release_at if complete else None, qualifier_count=n, scored_count=scored)


def race_list(conn: Connection, limit: int = 50) -> list[RacePublic]:
    rows = conn.execute(select(races).order_by(races.c.race_number.desc()).limit(limit)).all()
    return [_race(conn, r) for r in rows]


def race_detail(conn: Connection, race_id: str) -> RaceDetail:
    r = conn.execute(select(races).where(races.c.race_id == race_id)).first()
    if r is None:
        raise NotFound(f"no race {race_id}")
    complete = r.status == "RACE_COMPLETE"
    q = qualifiers.c
    quals = [QualifierPublic(agent_version_id=x.agent_version_id, miner_hotkey=x.hotkey,
                             qualification_type=x.qualification_type, qualifying_score=x.qualifying_score,
                             race_score=x.race_score if complete else None,
                             race_rank=x.race_rank if complete else None, eliminated=bool(x.eliminated))
             for x in conn.execute(select(qualifiers).where(q.race_id == race_id)
                                   .order_by(q.race_rank.is_(None), q.race_rank, q.agent_version_id))]
    revealed = r.world_seed is not None
    seed = SeedCommitment(race_id=r.race_id, commitment=r.commitment, qualifying_closes_at=r.qualifying_closes_at,
                          revealed=revealed, secret=r.secret if revealed else None,
                          beacon_block=r.beacon_block, beacon=r.beacon, beacon_source=r.beacon_source,
                          world_seed=r.world_seed)
    return RaceDetail(race=_race(conn, r), qualifiers=quals, seed=seed)


def top_agent(conn: Connection, now: float, config: ArenaConfig) -> TopAgent | None:
    inc = incumbent(conn)
    if inc is None:
        return None
    v = conn.execute(select(agent_versions, agents.c.name).join(agents, agents.c.agent_id == agent_versions.c.agent_id)
                     .where(agent_versions.c.agent_version_id == inc.agent_version_id)).one()
    released = now >= inc.code_release_at
    return TopAgent(agent_version_id=v.agent_version_id, agent_id=v.agent_id, agent_name=v.name,
                    miner_hotkey=v.hotkey, top_score=inc.winner_score,
                    challenge_threshold=current_threshold(conn, now, config), margin=config.threshold_margin,
                    race_id=inc.race_id, promoted_at=inc.reign_started_at, code_available_at=inc.code_release_at,
                    release_state="RELEASED" if released else "HIDDEN", code_sha256=v.code_sha256,
                    code=v.code if released else None)


def standings(conn: Connection) -> Standings | None:
    r = conn.execute(select(races).where(races.c.status == "RACE_COMPLETE")
                     .order_by(races.c.race_number.desc()).limit(1)).first()
    if r is None:
        return None
    q = qualifiers.c
    rows = conn.execute(select(q.hotkey, q.race_score, q.agent_version_id).where(
        q.race_id == r.race_id, q.race_score.is_not(None)).order_by(q.race_rank)).all()
    finishers = [Finisher(hotkey=x.hotkey, race_score=x.race_score, agent_version_id=x.agent_version_id)
                 for x in rows]
    top = next((f.hotkey for f in finishers if f.agent_version_id == r.winner_agent_version_id), None)
    return Standings(race_id=r.race_id, race_number=r.race_number, completed_at=r.race_completed_at,
                     top_hotkey=top, finishers=finishers)


def leaderboard(conn: Connection) -> list[LeaderboardRow]:
    """Eligible versions: the top agent first, then by their latest completed race score, then qualifying."""
    inc = incumbent(conn)
    v = agent_versions.c
    rows = conn.execute(select(agent_versions, agents.c.name).join(agents, agents.c.agent_id == v.agent_id)
                        .where(v.state == "ELIGIBLE")).all()
    q = qualifiers.c
    done = conn.execute(select(q.agent_version_id, q.race_score, races.c.race_number, races.c.winner_agent_version_id)
                        .join(races, races.c.race_id == q.race_id).where(races.c.status == "RACE_COMPLETE")
                        .order_by(races.c.race_number)).all()
    last: dict[str, tuple[int, float | None]] = {}
    wins: dict[str, int] = {}
    for d in done:
        last[d.agent_version_id] = (d.race_number, d.race_score)
        if d.winner_agent_version_id == d.agent_version_id:
            wins[d.agent_version_id] = wins.get(d.agent_version_id, 0) + 1

    def key(r: Any) -> tuple[Any, ...]:
        lr = last.get(r.agent_version_id, (None, None))[1]
        top = inc is not None and r.agent_version_id == inc.agent_version_id
        return (not top, lr is None, -(lr or 0.0), -(r.qualifying_score or 0.0), r.agent_version_id)

    out = []
    for i, r in enumerate(sorted(rows, key=key)):
        lr_num, lr_score = last.get(r.agent_version_id, (None, None))
        out.append(LeaderboardRow(
            rank=i + 1, agent_version_id=r.agent_version_id, agent_id=r.agent_id, agent_name=r.name,
            miner_hotkey=r.hotkey, version_number=r.version_number, state=r.state,
            qualifying_score=r.qualifying_score, last_race_number=lr_num, last_race_score=lr_score,
            races_won=wins.get(r.agent_version_id, 0),
            is_top_agent=inc is not None and r.agent_version_id == inc.agent_version_id,
            eliminated_in_race_number=r.eliminated_in_race_number))
    return out


def suite_list(conn: Connection) -> list[SuitePublic]:
    out = []
    for s in conn.execute(select(suites).order_by(suites.c.created_at, suites.c.suite_id)):
        public = s.kind == "QUALIFYING" and s.source == "open"
        out.append(SuitePublic(suite_id=s.suite_id, kind=s.kind, source=s.source, race_id=s.race_id,
                               problem_count=len(s.problem_ids), problem_ids=list(s.problem_ids) if public else None,
                               created_at=s.created_at))
    return out


def _item_of_run(conn: Connection, run_id: str, validator: str, now: float) -> Any:
    run = held_run(conn, run_id, validator, now)
    return conn.execute(select(work_items).where(work_items.c.work_item_id == run.work_item_id)).one()


def run_agent(conn: Connection, run_id: str, validator: str, now: float) -> dict[str, Any]:
    """The agent code of a run, for the validator holding its lease only."""
    item = _item_of_run(conn, run_id, validator, now)
    v = conn.execute(select(agent_versions).where(agent_versions.c.agent_version_id == item.agent_version_id)).one()
    return {"agent_version_id": v.agent_version_id, "agent_id": v.agent_id, "version_number": v.version_number,
            "miner_hotkey": v.hotkey, "code_sha256": v.code_sha256, "code": v.code}


def run_problems(conn: Connection, run_id: str, validator: str, now: float) -> dict[str, Any]:
    """The full problems of a run (with ground truth, for scoring), for the validator holding its lease only."""
    item = _item_of_run(conn, run_id, validator, now)
    s = conn.execute(select(suites).where(suites.c.suite_id == item.suite_id)).one()
    return {"suite_id": s.suite_id, "problems": list(s.problems)}

