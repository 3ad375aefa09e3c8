"""Append-only trajectory records with full provenance, in SQLite (embedded default) or PostgreSQL.

    with open_store("sqlite:///runs/trajectories.db") as store:   # or postgresql://user@host/db
        store.append(record)                                        # False if already stored
        for r in store.query(agent_id="react", min_judge_score=0.7):
            ...
"""

from __future__ import annotations

from shoparena.store.store import TrajectoryStore
from shoparena.store.types import (
    PipelineVersion,
    RecordQuery,
    RecordRow,
    StoreStats,
    TrajectoryRecord,
    VerifyReport,
)

DEFAULT_URL = "sqlite:///runs/trajectories.db"


def open_store(url: str = DEFAULT_URL, *, migrate: bool = True, create: bool = True,
               readonly: bool = False) -> TrajectoryStore:
    """Open the store at ``url`` (``sqlite:///path.db``, ``sqlite://`` in memory, ``postgresql://user@host/db``),
    applying missing schema migrations unless ``migrate=False``. ``create=False`` refuses to create a new
    SQLite file (:class:`~shoparena.errors.NotFoundError`). ``readonly=True``, for commands that only read, opens
    an existing store without writing anything: a missing or empty file, or a database without the store's
    tables, is a :class:`~shoparena.errors.NotFoundError`, and no migration runs. The in-memory store runs on
    one connection: finish (or drop) a query stream before appending to it."""
    return TrajectoryStore(url, migrate=migrate, create=create, readonly=readonly)


__all__ = [
    "DEFAULT_URL",
    "PipelineVersion",
    "RecordQuery",
    "RecordRow",
    "StoreStats",
    "TrajectoryRecord",
    "TrajectoryStore",
    "VerifyReport",
    "open_store",
]
