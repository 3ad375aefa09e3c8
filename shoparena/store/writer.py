"""The store's write path: each call is one transaction that returns after its commit.

``INSERT … ON CONFLICT DO NOTHING RETURNING seq`` on both backends: a record whose record id or idempotency key
is already stored is skipped (never duplicated, never an error), and the returned rows count what was really
inserted. Single appends run the insert as SQL compiled once from its Core statement, which halves the
per-append overhead — it matters because with SQLite every microsecond between ``BEGIN IMMEDIATE`` and
``COMMIT`` is spent holding the database's only write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from shoparena.db.engine import WRITE, retrying
from shoparena.store.schema import RECORD_COLUMNS, records

T = TypeVar("T")


class Writer:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        ins = pg_insert(records) if engine.dialect.name == "postgresql" else sqlite_insert(records)
        self.stmt = ins.on_conflict_do_nothing().returning(records.c.seq)
        compiled = self.stmt.compile(dialect=engine.dialect, column_keys=[*RECORD_COLUMNS, "body"])
        self._sql = str(compiled)
        self._order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None

    def transaction(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one committed write transaction (SQLite: ``BEGIN IMMEDIATE``), with retries."""
        def _once() -> T:
            with self._engine.connect().execution_options(**WRITE) as conn, conn.begin():
                return fn(conn)

        return retrying(_once)

    def insert_one(self, row: dict[str, Any]) -> bool:
        params = tuple(row[k] for k in self._order) if self._order else row
        return self.transaction(lambda conn: conn.exec_driver_sql(self._sql, params).first() is not None)

    def insert_many(self, rows: list[dict[str, Any]]) -> int:
        return self.transaction(lambda conn: len(conn.execute(self.stmt, rows).all()))
