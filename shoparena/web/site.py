"""The read-only data source behind the web pages: one database URL (a trajectory store, with the arena tables
when the arena wrote to the same database), an optional corpus directory and reports directory, and a clock.

:class:`Site` owns the read engine, knows which tables exist (a bare trajectory store has no arena tables, so the
arena pages say so instead of failing) and holds the one cache the pages keep: the per-agent record aggregates
(:mod:`shoparena.web.board`), kept current incrementally because the store is append-only.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from shoparena.clock import Clock, SystemClock
from shoparena.db.engine import connection_error, make_engine, safe_url, sqlite_path
from shoparena.errors import ConfigError, NotFoundError

__all__ = ["Site"]

_ARENA_TABLES = ("agents", "agent_versions", "races", "qualifiers", "submissions", "eval_runs", "work_items",
                 "weight_submissions", "suites")


class Site:
    """Everything a page reads. ``url``: the database (``sqlite:///…`` or ``postgresql://…``); ``corpus``: a
    ``shoparena corpus build`` output directory (its ``manifest.json``); ``reports``: a directory holding
    ``shoparena evaluate --report`` outputs (``report.html``, searched two levels deep); ``clock``: what "now"
    is for the code embargo (the arena's clock when mounted on an arena)."""

    def __init__(self, url: str, *, corpus: str | Path | None = None, reports: str | Path | None = None,
                 clock: Clock | None = None, engine: Engine | None = None) -> None:
        path = sqlite_path(url)
        if engine is None and path is not None and not path.exists():
            raise NotFoundError(f"no trajectory store at {path}", hint="check --store (sqlite:///path.db)")
        self.url = safe_url(url)
        self.engine: Engine = engine or make_engine(url, readonly=True)
        self.clock: Clock = clock or SystemClock()
        self.corpus = Path(corpus) if corpus else None
        self.reports = Path(reports) if reports else None
        for name, where in (("--corpus", self.corpus), ("--reports", self.reports)):
            if where is not None and not where.is_dir():
                raise ConfigError(f"{name} {where} is not a directory", hint="pass an existing directory")
        try:
            tables = set(inspect(self.engine).get_table_names())
        except OperationalError as exc:
            if path is not None:
                raise
            raise connection_error(url, exc) from exc  # a server that is down: exit 4, as every store command
        if "trajectory_records" not in tables:
            raise NotFoundError(f"{self.url} holds no trajectory store",
                                hint="point --store at a database written by shoparena (validate, arena simulate)")
        self.has_arena = all(t in tables for t in _ARENA_TABLES)
        self.lock = threading.Lock()
        self.cache: dict[str, Any] = {}

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def now(self) -> float:
        return self.clock.now()

    def connect(self) -> Connection:
        """A connection for one request's reads (use as a context manager)."""
        return self.engine.connect()

    def close(self) -> None:
        self.engine.dispose()
