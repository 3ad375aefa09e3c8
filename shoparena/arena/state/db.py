"""The arena's database handle: the store's engine helpers (SQLite WAL / PostgreSQL), its own migrations, and
transaction helpers.

Every mutation runs in :meth:`ArenaDB.write`: one transaction that takes the write lock up front (SQLite
``BEGIN IMMEDIATE``: writers queue on the busy timeout) and is retried on lock timeouts, deadlocks and dropped
connections, so a mutation's read-check-write sequence is atomic across threads and processes. On PostgreSQL the
hot paths additionally use conditional ``UPDATE … WHERE`` statements and ``SELECT … FOR UPDATE`` row locks, which
are atomic under READ COMMITTED. The in-memory ``sqlite://`` database shares one connection, so its transactions
are serialised by a process-local lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Engine

from shoparena.arena.state import schema
from shoparena.db.engine import WRITE, make_engine, parse_url, retrying, safe_url

__all__ = ["ArenaDB", "short_id"]

T = TypeVar("T")


def short_id(prefix: str, *parts: object) -> str:
    """A deterministic id: ``prefix_`` + 20 hex chars of sha256 over the parts."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\0")
    return f"{prefix}_{h.hexdigest()[:20]}"


class ArenaDB:
    """Engine + migrations + transactions for the arena tables at ``url`` (same URL forms as the store)."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = safe_url(url)
        u = parse_url(url)
        self._memory = u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:")
        self.engine: Engine = make_engine(url)
        self.dialect: str = self.engine.dialect.name
        self._lock = threading.RLock() if self._memory else None
        if migrate:
            schema.migrate(self.engine)

    @contextlib.contextmanager
    def _serial(self) -> Iterator[None]:
        if self._lock is None:
            yield
        else:
            with self._lock:
                yield

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one committed write transaction, retrying what a second try can fix."""
        def _once() -> T:
            with self._serial(), self.engine.connect().execution_options(**WRITE) as conn, conn.begin():
                return fn(conn)

        return retrying(_once)

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot)."""
        def _once() -> T:
            with self._serial(), self.engine.connect() as conn, conn.begin():
                return fn(conn)

        return retrying(_once)

    @property
    def postgres(self) -> bool:
        return self.dialect == "postgresql"

    def close(self) -> None:
        self.engine.dispose()


def event(conn: Connection, at: float, kind: str, subject: str, subject_id: str, **data: Any) -> None:
    """Append one row to the event log (inside the caller's transaction)."""
    conn.execute(schema.events.insert().values(at=at, kind=kind, subject=subject, subject_id=subject_id,
                                               data=data))
