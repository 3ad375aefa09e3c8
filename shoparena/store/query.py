"""Translate a :class:`RecordQuery` into SQL, and stored rows back into records."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import Select, and_, select, true
from sqlalchemy.sql.elements import ColumnElement

from shoparena.store.schema import records
from shoparena.store.types import RecordQuery, RecordRow, TrajectoryRecord

_MATCH_FIELDS = ("agent_id", "agent_version", "problem_id", "cluster_id", "suite", "eval_run_id",
                 "pipeline_version", "bucket", "status", "axis")
ROW_COLUMNS = tuple(records.c[name] for name in RecordRow.model_fields)


def make_query(query: RecordQuery | None = None, **filters: Any) -> RecordQuery:
    """``query`` updated with keyword filters (lists become tuples: "any of")."""
    base = query or RecordQuery()
    if not filters:
        return base
    unknown = set(filters) - set(RecordQuery.model_fields)
    if unknown:
        from shoparena.errors import ConfigError

        raise ConfigError(f"unknown record filter(s): {', '.join(sorted(unknown))}",
                          hint=f"filters: {', '.join(RecordQuery.model_fields)}")
    fixed = {k: tuple(v) if isinstance(v, list | set | frozenset) else v for k, v in filters.items()}
    return RecordQuery.model_validate({**base.model_dump(), **fixed})


def where(q: RecordQuery) -> list[ColumnElement[bool]]:
    """The WHERE clauses of a query (ANDed)."""
    c = records.c
    out: list[ColumnElement[bool]] = []
    for name in _MATCH_FIELDS:
        value = getattr(q, name)
        if value is None:
            continue
        out.append(c[name] == value if isinstance(value, str) else c[name].in_(value))
    if q.success is not None:
        out.append(c.success.is_(True) if q.success else c.success.is_(False))
    if q.since is not None:
        out.append(c.created_at >= q.since)
    if q.until is not None:
        out.append(c.created_at < q.until)
    if q.min_judge_score is not None:
        out.append(c.judge_score >= q.min_judge_score)
    if q.max_judge_score is not None:
        out.append(c.judge_score <= q.max_judge_score)
    return out


def select_for(q: RecordQuery, *columns: Any) -> Select[Any]:
    """``SELECT columns FROM trajectory_records WHERE … ORDER BY … LIMIT …``."""
    stmt = select(*columns).where(and_(true(), *where(q)))
    key = records.c[q.order_by]
    order = [key.desc() if q.descending else key.asc()]
    if q.order_by != "seq":
        order.append(records.c.seq.desc() if q.descending else records.c.seq.asc())
    stmt = stmt.order_by(*order)
    return stmt.limit(q.limit) if q.limit is not None else stmt


def record_from_body(body: str | bytes) -> TrajectoryRecord:
    return TrajectoryRecord.model_validate(orjson.loads(body))


def row_from(values: Any) -> RecordRow:
    return RecordRow.model_validate(dict(values._mapping))
