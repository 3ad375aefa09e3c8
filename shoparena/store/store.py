"""The trajectory store: append-only, content-addressed records behind one interface for SQLite and PostgreSQL.

Writes: :meth:`TrajectoryStore.append` and :meth:`~TrajectoryStore.append_many` seal unsealed records, check
sealed ones (their id must be the hash of their content), and insert with ``ON CONFLICT DO NOTHING``: a record
whose idempotency key (``eval_run_id|problem_id|pipeline_version``) is already stored is skipped, never
duplicated, so re-running an interrupted evaluation is safe. Each call is one transaction and returns only after
it has committed. Reads stream: one transaction (a consistent snapshot) over a server-side cursor on PostgreSQL or
a stepping cursor on SQLite, fetched ``chunk`` rows at a time, so memory stays flat however many records match.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from shoparena.db.engine import connection_error, make_engine, safe_url, sqlite_path
from shoparena.errors import DataError, NotFoundError
from shoparena.store import schema
from shoparena.store.query import ROW_COLUMNS, make_query, record_from_body, row_from, select_for
from shoparena.store.schema import RECORD_COLUMNS, records
from shoparena.store.types import (
    RecordQuery,
    RecordRow,
    StoreStats,
    TrajectoryRecord,
    VerifyReport,
    body_problems,
    canonical_json,
)
from shoparena.store.writer import Writer

CHUNK = 256


def now_ms() -> int:
    return int(time.time() * 1000)


def to_row(record: TrajectoryRecord) -> dict[str, Any]:
    """The table row of a record: sealed now if it is not yet, checked if it is (:class:`DataError` if its id
    or hashes do not match its content)."""
    if not record.is_sealed:
        body = record.sealed_body(now_ms())
    else:
        body = record.model_dump()
        problems = body_problems(body)
        if problems:
            raise DataError(f"record {record.record_id[:16]}… does not match its content: {problems[0]}",
                            hint="append the unsealed record, or reseal it with record.sealed(created_at)")
    row = {name: body[name] for name in RECORD_COLUMNS}
    row["body"] = canonical_json(body).decode()
    return row


class TrajectoryStore:
    """Append-only trajectory records in SQLite or PostgreSQL; open with :func:`shoparena.store.open_store`."""

    def __init__(self, url: str, *, migrate: bool = True, create: bool = True, readonly: bool = False) -> None:
        self.url = safe_url(url)
        path = sqlite_path(url)
        if (readonly or not create) and path is not None and not path.exists():
            raise NotFoundError(f"no trajectory store at {path}", hint="check --store (sqlite:///path.db)")
        self._engine: Engine = make_engine(url, readonly=readonly)
        self.dialect: str = self._engine.dialect.name
        self._writer = Writer(self._engine)
        try:
            if readonly:
                self._check_readable()
            elif migrate:
                self.migrate()
            elif self.dialect == "postgresql":
                self._engine.connect().close()  # fail here, clearly, not at the first query
        except OperationalError as exc:
            self._engine.dispose()
            raise connection_error(url, exc) from None
        except (DataError, NotFoundError):
            self._engine.dispose()
            raise

    def _check_readable(self) -> None:
        """A read-only open: the database must already hold a store (none of its migrations is applied here);
        one newer than this code is refused."""
        with self._engine.connect() as conn:
            version = schema.current_version(conn)
        if version == 0:
            raise NotFoundError(f"{self.url} holds no trajectory store",
                                hint="check the store URL: a database written by shoparena (validate, arena "
                                     "simulate); a read-only command never creates one")
        schema.HISTORY.check_not_newer(version)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply missing schema migrations (idempotent); returns the versions applied now."""
        return schema.migrate(self._engine)

    def schema_version(self) -> int:
        with self._engine.connect() as conn:
            return schema.current_version(conn)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> TrajectoryStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TrajectoryStore({self.url!r})"

    # -- writes ------------------------------------------------------------------------------------------------
    def append(self, record: TrajectoryRecord) -> bool:
        """Store one record (sealing it if needed); False, and nothing written, when its idempotency key is
        already stored. Returns after the commit."""
        return self._writer.insert_one(to_row(record))

    def append_many(self, records_: Iterable[TrajectoryRecord]) -> int:
        """Store many records in one transaction; returns how many were new (duplicates of stored or earlier
        records in the batch are skipped)."""
        rows: dict[str, dict[str, Any]] = {}
        for record in records_:
            row = to_row(record)
            rows.setdefault(row["idempotency_key"], row)
        return self._writer.insert_many(list(rows.values())) if rows else 0

    # -- reads -------------------------------------------------------------------------------------------------
    def _stream(self, stmt: Any, chunk: int) -> Iterator[Any]:
        with self._engine.connect() as conn, conn.begin():
            yield from conn.execution_options(yield_per=chunk).execute(stmt)

    def query(self, query: RecordQuery | None = None, *, chunk: int = CHUNK, **filters: Any
              ) -> Iterator[TrajectoryRecord]:
        """Full records matching ``query`` and keyword filters (see :class:`RecordQuery`), streamed."""
        q = make_query(query, **filters)
        for (body,) in self._stream(select_for(q, records.c.body), chunk):
            yield record_from_body(body)

    def rows(self, query: RecordQuery | None = None, *, chunk: int = 2048, **filters: Any) -> Iterator[RecordRow]:
        """Lightweight rows (indexed columns only) matching the query, streamed."""
        q = make_query(query, **filters)
        for values in self._stream(select_for(q, *ROW_COLUMNS), chunk):
            yield row_from(values)

    def bodies(self, query: RecordQuery | None = None, *, chunk: int = CHUNK, **filters: Any) -> Iterator[bytes]:
        """The stored canonical JSON of each matching record, streamed (what export writes)."""
        q = make_query(query, **filters)
        for (body,) in self._stream(select_for(q, records.c.body), chunk):
            yield body.encode()

    def get(self, record_id: str) -> TrajectoryRecord | None:
        with self._engine.connect() as conn:
            body = conn.execute(select(records.c.body).where(records.c.record_id == record_id)).scalar()
        return None if body is None else record_from_body(body)

    def count(self, query: RecordQuery | None = None, **filters: Any) -> int:
        q = make_query(query, **filters)
        inner = select_for(q, records.c.seq).subquery()
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(inner)).scalar_one())

    def stats(self) -> StoreStats:
        """Counts by status, axis, bucket and pipeline version."""
        c = records.c
        with self._engine.connect() as conn, conn.begin():
            groups = {name: dict(conn.execute(select(c[col], func.count()).group_by(c[col])).all())
                      for name, col in (("by_status", "status"), ("by_axis", "axis"), ("by_bucket", "bucket"),
                                        ("by_pipeline", "pipeline_version"))}
            n, first, last = conn.execute(select(func.count(), func.min(c.created_at), func.max(c.created_at))).one()
        return StoreStats(url=self.url, schema_version=self.schema_version(), records=n, first_created_at=first,
                          last_created_at=last, **groups)

    def verify(self, query: RecordQuery | None = None, *, chunk: int = CHUNK, **filters: Any) -> VerifyReport:
        """Recompute each matching record's id and hashes from its stored body, and check that the query
        columns agree with the body; reports every mismatch."""
        q = make_query(query, **filters)
        checked, bad = 0, []
        for values in self._stream(select_for(q, records.c.body, *(records.c[n] for n in RECORD_COLUMNS)), chunk):
            checked += 1
            row = values._mapping
            try:
                body = orjson.loads(row["body"])
            except orjson.JSONDecodeError as exc:
                bad.append((row["record_id"], f"body is not JSON: {exc}"))
                continue
            problems = body_problems(body)
            problems += [f"column {n} is {row[n]!r}, body has {body.get(n)!r}"
                         for n in RECORD_COLUMNS if row[n] != body.get(n)]
            bad.extend((row["record_id"], p) for p in problems)
        return VerifyReport(checked=checked, mismatches=bad)
