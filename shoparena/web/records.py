"""Record search and lookup for the pages: a bounded filter model, keyset-paginated listing of record rows
(indexed columns only, newest first), and one record by id for the trajectory viewer.

Listing never counts or scans the table: it reads ``limit + 1`` rows ordered by the primary key (``seq``)
below the ``before`` cursor, with the filters as WHERE clauses (the store's own :func:`shoparena.store.query.where`
over its indexed columns), and returns the cursor of the next page.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import and_, select, true
from sqlalchemy.engine import Connection

from shoparena.errors import NotFoundError
from shoparena.store.query import where
from shoparena.store.schema import records
from shoparena.store.types import RecordQuery
from shoparena.types import Axis, Status
from shoparena.web.site import Site
from shoparena.web.trace import record_view

__all__ = ["MAX_LIMIT", "RecordFilter", "get_record", "list_records"]

MAX_LIMIT = 100
_Id = Field(default=None, min_length=1, max_length=200)


class RecordFilter(BaseModel):
    """The record search of the records page and ``/api/records``: every set field must match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str | None = _Id
    """``agent_id``."""
    version: str | None = _Id
    """``agent_version`` (e.g. ``v1``)."""
    problem: str | None = _Id
    cluster: str | None = _Id
    run: str | None = _Id
    """``eval_run_id``."""
    bucket: str | None = Field(default=None, min_length=1, max_length=40)
    outcome: Literal["success", "failure"] | None = None
    axis: Axis | None = None
    status: Status | None = None
    min_judge: float | None = Field(default=None, ge=0.0, le=1.0)
    max_judge: float | None = Field(default=None, ge=0.0, le=1.0)
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)
    before: int | None = Field(default=None, ge=1, le=2**62)
    """Keyset cursor: only records with ``seq`` below it (the ``next_before`` of the previous page)."""

    @field_validator("min_judge", "max_judge")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    def query(self) -> RecordQuery:
        return RecordQuery(agent_id=self.agent, agent_version=self.version, problem_id=self.problem,
                           cluster_id=self.cluster, eval_run_id=self.run, bucket=self.bucket, axis=self.axis,
                           status=self.status, success=None if self.outcome is None else self.outcome == "success",
                           min_judge_score=self.min_judge, max_judge_score=self.max_judge)

    def params(self, **override: Any) -> dict[str, Any]:
        """The query-string parameters of this filter (for links), with overrides; unset ones left out."""
        data = {**self.model_dump(exclude_none=True), **override}
        return {k: v for k, v in data.items() if v is not None and not (k == "limit" and v == 50)}


_ROW = ("record_id", "eval_run_id", "agent_id", "agent_version", "problem_id", "cluster_id", "bucket", "status",
        "axis", "success", "judge_score", "coefficient", "created_at")


def list_records(site: Site, conn: Connection, f: RecordFilter) -> dict[str, Any]:
    """One page of record rows, newest first: ``{items, limit, next_before, filter}``."""
    c = records.c
    clauses = where(f.query())
    if f.before is not None:
        clauses.append(c.seq < f.before)
    stmt = (select(c.seq, *(c[n] for n in _ROW)).where(and_(true(), *clauses))
            .order_by(c.seq.desc()).limit(f.limit + 1))
    rows = conn.execute(stmt).all()
    items = [{"seq": r.seq, **{n: getattr(r, n) for n in _ROW}} for r in rows[:f.limit]]
    nxt = items[-1]["seq"] if len(rows) > f.limit else None
    return {"items": items, "limit": f.limit, "next_before": nxt,
            "filter": f.model_dump(exclude_none=True, exclude={"limit", "before"})}


def get_record(site: Site, conn: Connection, record_id: str) -> dict[str, Any]:
    """The trajectory viewer's data for one record (:func:`shoparena.web.trace.record_view`);
    :class:`NotFoundError` for an unknown id."""
    if not (1 <= len(record_id) <= 128):
        raise NotFoundError("no such record")
    row = conn.execute(select(records.c.seq, records.c.body).where(records.c.record_id == record_id)).first()
    if row is None:
        raise NotFoundError(f"no record {record_id}")
    return record_view(orjson.loads(row.body), row.seq)
