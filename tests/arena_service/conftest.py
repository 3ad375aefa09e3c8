"""Fixtures: ``url`` runs a test on SQLite (a WAL file) and on a real PostgreSQL server (a fresh schema in a
private server started once per session; skipped with the reason where none can be started)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from shoparena.store.pg import TempPostgres

_n = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arena.db'}"
    server: TempPostgres = request.getfixturevalue("pg_server")
    return server.create_schema(f"arena{next(_n)}")
