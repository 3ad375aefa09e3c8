"""Arena pages' data, read from the arena tables beside the records: every agent version with its standing, the
races with their lifecycle (qualifying, threshold, qualifiers, held-out draw, validators and their agreement,
winner, promotion, code embargo), the weights validators set over time, agents with their submissions (gate
verdicts: rule, severity, line), cooldowns, evaluations and score history, and submissions.

Embargoes are the arena's own (:mod:`shoparena.arena.state.views`): race scores only once a race is complete
(``race_detail``), held-out problem ids never, and an agent's code only once its release time has passed by the
site's clock — never before, and never for a version that was not promoted.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from shoparena.arena.state import views
from shoparena.arena.state.queries import incumbent
from shoparena.arena.state.schema import (
    agent_versions,
    agents,
    eval_runs,
    events,
    miners,
    qualifiers,
    races,
    submissions,
    suites,
    weight_submissions,
    work_items,
)
from shoparena.arena.state.types import NotFound as ArenaNotFound
from shoparena.errors import NotFoundError
from shoparena.web.site import Site

__all__ = ["agent_page", "arena_versions", "race_list", "race_page", "submission_list", "weights_series"]


def _f(x: Any) -> float | None:
    return None if x is None else round(float(x), 4)


def arena_versions(site: Site, conn: Connection) -> list[dict[str, Any]]:
    """Every agent version in arena order: the top agent, then by latest completed race score, then by
    qualifying score; versions that never qualified come last."""
    inc = incumbent(conn)
    v = agent_versions.c
    rows = conn.execute(select(v.agent_version_id, v.agent_id, v.hotkey, v.version_number, v.state,
                               v.qualifying_score, v.eliminated_in_race_number, agents.c.name)
                        .join(agents, agents.c.agent_id == v.agent_id)).all()
    q = qualifiers.c
    done = conn.execute(select(q.agent_version_id, q.race_score, races.c.race_number,
                               races.c.winner_agent_version_id)
                        .join(races, races.c.race_id == q.race_id).where(races.c.status == "RACE_COMPLETE")
                        .order_by(races.c.race_number)).all()
    last: dict[str, tuple[int, float | None]] = {}
    wins: dict[str, int] = defaultdict(int)
    for d in done:
        last[d.agent_version_id] = (d.race_number, d.race_score)
        if d.winner_agent_version_id == d.agent_version_id:
            wins[d.agent_version_id] += 1
    top_id = inc.agent_version_id if inc is not None else None

    def key(r: Any) -> tuple[Any, ...]:
        score = last.get(r.agent_version_id, (None, None))[1]
        return (r.agent_version_id != top_id, r.state != "ELIGIBLE", score is None, -(score or 0.0),
                r.qualifying_score is None, -(r.qualifying_score or 0.0), r.agent_version_id)

    out = []
    for r in sorted(rows, key=key):
        num, score = last.get(r.agent_version_id, (None, None))
        out.append({"agent_id": r.agent_id, "agent_name": r.name, "miner_hotkey": r.hotkey,
                    "agent_version_id": r.agent_version_id, "version_number": r.version_number, "state": r.state,
                    "qualifying_score": _f(r.qualifying_score), "last_race_number": num,
                    "last_race_score": _f(score), "races_won": wins.get(r.agent_version_id, 0),
                    "is_top_agent": r.agent_version_id == top_id,
                    "eliminated_in_race_number": r.eliminated_in_race_number})
    return out


def race_list(site: Site, conn: Connection, *, limit: int, before: int | None) -> dict[str, Any]:
    """Races newest first, ``limit`` per page, keyset-paginated on ``race_number``."""
    stmt = select(races.c.race_id).order_by(races.c.race_number.desc()).limit(limit + 1)
    if before is not None:
        stmt = stmt.where(races.c.race_number < before)
    ids = conn.execute(stmt).scalars().all()
    items = [views.race_detail(conn, rid).race.model_dump(mode="json") for rid in ids[:limit]]
    nxt = items[-1]["race_number"] if len(ids) > limit else None
    return {"items": items, "limit": limit, "next_before": nxt}


def race_page(site: Site, conn: Connection, race_id: str) -> dict[str, Any]:
    """One race: the public detail (embargoed), the held-out draw's size, each evaluation with its validator and
    score, per-version validator agreement (spread of their final scores), and the weights set from it."""
    try:
        detail = views.race_detail(conn, race_id).model_dump(mode="json")
    except ArenaNotFound:
        raise NotFoundError(f"no race {race_id}") from None
    race = detail["race"]
    complete = race["status"] == "RACE_COMPLETE"
    draw = None
    if race["race_suite_id"]:
        s = conn.execute(select(suites.c.suite_id, suites.c.source, suites.c.problem_ids)
                         .where(suites.c.suite_id == race["race_suite_id"])).first()
        if s is not None:
            draw = {"suite_id": s.suite_id, "source": s.source, "problems": len(s.problem_ids)}
    w, e = work_items.c, eval_runs.c
    runs = conn.execute(select(e.eval_run_id, e.validator_hotkey, e.status, e.final_score, e.success_rate,
                               e.reasoning_coefficient, e.is_included, e.claimed_at, e.completed_at, w.kind,
                               w.agent_version_id)
                        .join(work_items, w.work_item_id == e.work_item_id).where(w.race_id == race_id)
                        .order_by(w.kind, w.agent_version_id, e.claimed_at, e.eval_run_id)).all()
    evaluations, by_version = [], defaultdict(list)
    for r in runs:
        hide = r.kind == "RACE" and not complete  # race scores are embargoed until the race completes
        score = None if hide else _f(r.final_score)
        evaluations.append({"eval_run_id": r.eval_run_id, "kind": r.kind, "agent_version_id": r.agent_version_id,
                            "validator_hotkey": r.validator_hotkey, "status": r.status, "final_score": score,
                            "success_rate": None if hide else _f(r.success_rate),
                            "reasoning_coefficient": None if hide else _f(r.reasoning_coefficient),
                            "included": bool(r.is_included), "claimed_at": r.claimed_at,
                            "completed_at": r.completed_at})
        if score is not None and r.is_included:
            by_version[(r.kind, r.agent_version_id)].append((r.validator_hotkey, score))
    agreement = [{"kind": kind, "agent_version_id": av, "validators": len(xs),
                  "scores": {hk: s for hk, s in xs}, "spread": round(max(s for _, s in xs) - min(s for _, s in xs), 4)}
                 for (kind, av), xs in sorted(by_version.items())]
    return {**detail, "held_out_draw": draw, "evaluations": evaluations, "agreement": agreement,
            "weights": weights_series(site, conn, race_id=race_id)}


def weights_series(site: Site, conn: Connection, *, race_id: str | None = None, limit: int = 500
                   ) -> dict[str, Any]:
    """The weights validators set on chain over time (newest ``limit`` submissions): one point per submission
    and uid, as the share of that submission's weight vector."""
    ws = weight_submissions.c
    stmt = select(ws.id, ws.validator_hotkey, ws.race_id, ws.block, ws.uids, ws.weights, ws.ok, ws.at)
    if race_id is not None:
        stmt = stmt.where(ws.race_id == race_id)
    rows = list(reversed(conn.execute(stmt.order_by(ws.id.desc()).limit(limit)).all()))
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    submissions_ = []
    for r in rows:
        total = sum(r.weights) or 1
        submissions_.append({"validator_hotkey": r.validator_hotkey, "race_id": r.race_id, "block": r.block,
                             "ok": bool(r.ok), "at": r.at,
                             "weights": {str(u): w for u, w in zip(r.uids, r.weights, strict=False) if w}})
        if r.ok:
            for u, w in zip(r.uids, r.weights, strict=False):
                if w:
                    series[f"uid {u}"].append((r.at, round(w / total, 4)))
    return {"submissions": submissions_, "series": dict(sorted(series.items())),
            "note": "shares of the weights each validator set, as the arena recorded them"}


def emissions_series(site: Site, conn: Connection, *, limit: int = 500) -> dict[str, Any]:
    """Cumulative emission per participant over the chain's epochs, from the arena's ``EPOCH`` events (the newest
    ``limit``; the subject index is used, no scan of other events); hotkeys are named by their miner's agent."""
    ev = events.c
    rows = list(reversed(conn.execute(select(ev.at, ev.data).where(ev.subject == "chain", ev.kind == "EPOCH")
                                      .order_by(ev.seq.desc()).limit(limit)).all()))
    names = {r.hotkey: r.name for r in conn.execute(select(agents.c.hotkey, agents.c.name)).all()} if rows else {}
    total: dict[str, float] = defaultdict(float)
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    owner = 0.0
    for r in rows:
        data = r.data if isinstance(r.data, dict) else {}
        owner += float(data.get("owner") or 0.0)
        for hk, em in (data.get("emission") or {}).items():
            total[hk] += float(em)
        for hk, t in total.items():
            series[names.get(hk, hk[:10])].append((r.at, round(t, 6)))
    return {"epochs": len(rows), "owner": round(owner, 6),
            "by_participant": {names.get(k, k[:10]): round(v, 6)
                               for k, v in sorted(total.items(), key=lambda kv: -kv[1])},
            "series": dict(sorted(series.items()))}


def _violations(v: Any) -> list[dict[str, Any]]:
    return [{"rule": x.get("rule"), "severity": x.get("severity"), "line": x.get("line"),
             "message": x.get("message")} for x in (v or []) if isinstance(x, dict)]


def _submission(r: Any) -> dict[str, Any]:
    return {"submission_id": r.submission_id, "hotkey": r.hotkey, "agent_name": r.agent_name,
            "submitted_at": r.submitted_at, "admission_status": r.admission_status,
            "admission_reason": r.admission_reason, "cooldown": r.cooldown, "next_allowed_at": r.next_allowed_at,
            "violations": _violations(r.violations), "similarity": _f(r.similarity), "similar_to": r.similar_to,
            "agent_version_id": r.agent_version_id}


def submission_list(site: Site, conn: Connection, *, limit: int, offset: int, status: str | None
                    ) -> dict[str, Any]:
    """Submissions newest first with their gate verdicts (LIMIT/OFFSET; the table is one row per upload)."""
    s = submissions.c
    stmt = select(submissions).order_by(s.submitted_at.desc(), s.submission_id).limit(limit + 1).offset(offset)
    if status is not None:
        stmt = stmt.where(s.admission_status == status)
    rows = conn.execute(stmt).all()
    return {"items": [_submission(r) for r in rows[:limit]], "limit": limit, "offset": offset, "status": status,
            "next_offset": offset + limit if len(rows) > limit else None}


def agent_page(site: Site, conn: Connection, agent_id: str) -> dict[str, Any]:
    """One agent: its miner's cooldown, its versions (state, scores, promotion; code once released), its
    submissions with gate verdicts, its evaluations, and its score history."""
    a = conn.execute(select(agents).where(agents.c.agent_id == agent_id)).first()
    if a is None:
        raise NotFoundError(f"no agent {agent_id}")
    now = site.now()
    m = conn.execute(select(miners).where(miners.c.hotkey == a.hotkey)).first()
    v = agent_versions.c
    versions = []
    for r in conn.execute(select(agent_versions).where(v.agent_id == agent_id).order_by(v.version_number)):
        released = r.code_release_at is not None and now >= r.code_release_at
        versions.append({"agent_version_id": r.agent_version_id, "version_number": r.version_number,
                         "agent_version": f"v{r.version_number}", "state": r.state, "state_reason": r.state_reason,
                         "submitted_at": r.created_at, "qualifying_score": _f(r.qualifying_score),
                         "eligible_at": r.eligible_at, "eliminated_in_race_number": r.eliminated_in_race_number,
                         "promoted_at": r.promoted_at, "code_sha256": r.code_sha256,
                         "code_release_at": r.code_release_at,
                         "code_state": "RELEASED" if released else "EMBARGOED",
                         "code": r.code if released else None})
    s = submissions.c
    subs = [_submission(r) for r in conn.execute(
        select(submissions).where(s.hotkey == a.hotkey, s.agent_name == a.name)
        .order_by(s.submitted_at, s.submission_id).limit(200))]
    w, e = work_items.c, eval_runs.c
    ids = [x["agent_version_id"] for x in versions]
    runs = conn.execute(select(e.eval_run_id, e.validator_hotkey, e.status, e.final_score, e.success_rate,
                               e.reasoning_coefficient, e.is_included, e.completed_at, w.kind, w.race_id,
                               w.agent_version_id, races.c.status.label("race_status"))
                        .join(work_items, w.work_item_id == e.work_item_id)
                        .join(races, races.c.race_id == w.race_id)
                        .where(w.agent_version_id.in_(ids)).order_by(e.claimed_at, e.eval_run_id).limit(500)).all()
    evaluations, history = [], []
    for r in runs:
        hide = r.kind == "RACE" and r.race_status != "RACE_COMPLETE"
        score = None if hide else _f(r.final_score)
        evaluations.append({"eval_run_id": r.eval_run_id, "kind": r.kind, "race_id": r.race_id,
                            "agent_version_id": r.agent_version_id, "validator_hotkey": r.validator_hotkey,
                            "status": r.status, "final_score": score, "success_rate": None if hide
                            else _f(r.success_rate), "included": bool(r.is_included), "completed_at": r.completed_at})
        if score is not None and r.completed_at is not None:
            history.append((r.completed_at, score))
    return {"agent_id": a.agent_id, "agent_name": a.name, "miner_hotkey": a.hotkey, "created_at": a.created_at,
            "now": now, "version_count": len(versions),
            "cooldown": None if m is None else {"next_allowed_at": m.next_allowed_at,
                                                  "active": m.next_allowed_at > now,
                                                  "remaining_seconds": max(0.0, round(m.next_allowed_at - now, 1)),
                                                  "banned": bool(m.banned)},
            "versions": versions, "submissions": subs, "evaluations": evaluations,
            "score_history": {"series": {"final score": history}}}
