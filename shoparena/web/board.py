"""The leaderboard: arena standing (version, state, qualifying and race scores, wins, the top agent) beside what
the records say (ASR with its bootstrap interval, per-bucket ASR, mean judge score), and whether each row is
separable from its neighbour below.

Record aggregates are sums per ``(agent_id, agent_version, bucket)``. The store is append-only, so on SQLite they
are kept current incrementally: each request reads ``max(seq)`` (the primary key's last entry) and aggregates only
the rows appended since the last request (a range scan of the primary key); the first request after start-up pays
for one pass. PostgreSQL assigns ``seq`` before commit, so a concurrent append may land below the watermark; there
the aggregates are recomputed whenever ``max(seq)`` moves.

The interval of a success rate is the percentile bootstrap of the mean of ``n`` 0/1 outcomes with ``k``
successes: :func:`shoparena.scoring.metrics.binary_bootstrap_ci` (the package's one bootstrap, its default
resamples, 95 %, seed 0).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from shoparena.scoring.metrics import binary_bootstrap_ci
from shoparena.store.schema import records
from shoparena.web.site import Site

__all__ = ["BUCKETS", "asr_interval", "leaderboard", "record_aggregates"]

BUCKETS = ("product", "shop", "voucher", "knowledge")
def asr_interval(k: int, n: int) -> tuple[float, float] | None:
    """The leaderboard's interval of ``k`` successes in ``n`` records (module docstring), to 4 decimals."""
    ci = binary_bootstrap_ci(k, n)
    return None if ci is None else (round(ci[0], 4), round(ci[1], 4))


def _aggregate(conn: Connection, after_seq: int) -> list[Any]:
    c = records.c
    return conn.execute(
        select(c.agent_id, c.agent_version, c.bucket, func.count(), func.sum(case((c.success, 1), else_=0)),
               func.count(c.judge_score), func.sum(c.judge_score), func.max(c.created_at))
        .where(c.seq > after_seq).group_by(c.agent_id, c.agent_version, c.bucket)).all()


def record_aggregates(site: Site, conn: Connection) -> dict[tuple[str, str], dict[str, Any]]:
    """``(agent_id, agent_version) -> {n, k, judged, judge_sum, last_at, buckets: {bucket: [n, k]}}``, current
    as of this request (module docstring)."""
    top = conn.execute(select(func.max(records.c.seq))).scalar() or 0
    with site.lock:
        state = site.cache.get("aggregates")
        if state is not None and state["seq"] == top:
            return state["by_agent"]
        incremental = state is not None and site.dialect == "sqlite" and state["seq"] < top
        by_agent: dict[tuple[str, str], dict[str, Any]] = (
            {k: {**v, "buckets": {b: list(x) for b, x in v["buckets"].items()}} for k, v in state["by_agent"].items()}
            if incremental else {})
        for agent_id, version, bucket, n, k, judged, jsum, last in _aggregate(conn, state["seq"] if incremental
                                                                             else 0):
            a = by_agent.setdefault((agent_id, version), {"n": 0, "k": 0, "judged": 0, "judge_sum": 0.0,
                                                          "last_at": 0, "buckets": {}})
            a["n"] += int(n)
            a["k"] += int(k or 0)
            a["judged"] += int(judged or 0)
            a["judge_sum"] += float(jsum or 0.0)
            a["last_at"] = max(a["last_at"], int(last or 0))
            b = a["buckets"].setdefault(bucket, [0, 0])
            b[0] += int(n)
            b[1] += int(k or 0)
        site.cache["aggregates"] = {"seq": top, "by_agent": by_agent}
        return by_agent


def _record_stats(agg: dict[str, Any] | None) -> dict[str, Any]:
    if not agg:
        return {"records": 0, "asr": None, "asr_ci": None, "judge_mean": None, "buckets": {}}
    n, k = agg["n"], agg["k"]
    return {"records": n, "asr": round(k / n, 4), "asr_ci": asr_interval(k, n),
            "judge_mean": round(agg["judge_sum"] / agg["judged"], 4) if agg["judged"] else None,
            "buckets": {b: {"records": bn, "asr": round(bk / bn, 4)} for b, (bn, bk) in sorted(agg["buckets"].items())}}


def _arena_rows(site: Site, conn: Connection) -> list[dict[str, Any]]:
    from shoparena.web.arena import arena_versions

    return arena_versions(site, conn)


def _separable(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    if a is None or b is None:
        return None
    return a[0] > b[1] or b[0] > a[1]


def leaderboard(site: Site, conn: Connection, *, sort: str = "rank") -> dict[str, Any]:
    """Rows (one per agent version; arena versions first in arena order when the database has the arena, then
    versions seen only in records), the buckets present, and the top agent."""
    aggs = record_aggregates(site, conn)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    if site.has_arena:
        for r in _arena_rows(site, conn):
            key = (r["agent_id"], f"v{r['version_number']}")
            seen.add(key)
            rows.append({**r, "agent_version": key[1], **_record_stats(aggs.get(key))})
    rest = sorted(((key, a) for key, a in aggs.items() if key not in seen),
                  key=lambda kv: (-(kv[1]["k"] / kv[1]["n"]), kv[0]))
    for (agent_id, version), a in rest:
        rows.append({"agent_id": agent_id, "agent_version": version, "agent_name": None, "miner_hotkey": None,
                     "agent_version_id": None, "version_number": None, "state": None, "qualifying_score": None,
                     "last_race_number": None, "last_race_score": None, "races_won": 0, "is_top_agent": False,
                     **_record_stats(a)})
    if not site.has_arena and rows:
        rows[0]["is_top_agent"] = True  # a bare store: the top agent is the best ASR
    if sort == "asr":
        rows.sort(key=lambda r: (r["asr"] is None, -(r["asr"] or 0.0), r["agent_id"], r["agent_version"]))
    for i, r in enumerate(rows):
        r["rank"] = i + 1
        below = rows[i + 1] if i + 1 < len(rows) else None
        r["separable_from_next"] = None if below is None else _separable(r["asr_ci"], below["asr_ci"])
    buckets = sorted({b for r in rows for b in r["buckets"]}, key=lambda b: (b not in BUCKETS, BUCKETS.index(b)
                                                                              if b in BUCKETS else 0, b))
    top = next((r for r in rows if r["is_top_agent"]), None)
    return {"rows": rows, "buckets": buckets, "top_agent": None if top is None else
            {"agent_id": top["agent_id"], "agent_version": top["agent_version"], "agent_name": top["agent_name"]},
            "has_arena": site.has_arena, "sort": sort}
