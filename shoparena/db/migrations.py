"""Versioned schema migrations, shared by the trajectory store and the arena state (which lives in the same
database, each with its own migrations table and advisory-lock key).

A migration is applied once, in version order, inside one write transaction that on PostgreSQL first takes a
transaction-level advisory lock, so concurrent processes opening the same database migrate it exactly once. A
database whose schema is newer than this code is refused rather than silently misread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Table, func, inspect, select
from sqlalchemy.engine import Connection, Engine

from shoparena.db.engine import WRITE, retrying
from shoparena.errors import DataError

__all__ = ["Migration", "Migrations"]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


@dataclass(frozen=True)
class Migrations:
    """One schema's migration history: its ``table`` (version, name, applied_at), the ``steps`` in version order,
    the PostgreSQL advisory ``lock_key``, and what a too-new database is called in errors (``what``, ``hint``)."""

    table: Table
    steps: Sequence[Migration]
    lock_key: int
    what: str
    hint: str

    @property
    def latest(self) -> int:
        return self.steps[-1].version

    def current_version(self, conn: Connection) -> int:
        """The highest applied migration (0 when none)."""
        if not inspect(conn).has_table(self.table.name):
            return 0
        return int(conn.execute(select(func.coalesce(func.max(self.table.c.version), 0))).scalar_one())

    def migrate(self, engine: Engine) -> list[int]:
        """Bring the database to :attr:`latest`; returns the versions applied now (empty when up to date)."""
        with engine.connect() as conn:
            version = self.current_version(conn)
            conn.rollback()
        self.check_not_newer(version)
        if version == self.latest:
            return []

        def _run() -> list[int]:
            with engine.connect().execution_options(**WRITE) as conn, conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({self.lock_key})")
                self.table.create(conn, checkfirst=True)
                done = set(conn.execute(select(self.table.c.version)).scalars())
                self.check_not_newer(max(done, default=0))
                applied = []
                for m in self.steps:
                    if m.version not in done:
                        m.apply(conn)
                        conn.execute(self.table.insert().values(
                            version=m.version, name=m.name, applied_at=int(time.time() * 1000)))
                        applied.append(m.version)
                return applied

        return retrying(_run)

    def check_not_newer(self, version: int) -> None:
        """Refuse (:class:`DataError`) a database whose schema ``version`` is newer than this code's."""
        if version > self.latest:
            raise DataError(f"{self.what} schema version {version} is newer than this shoparena's ({self.latest})",
                            hint=self.hint)
