"""Fixtures: ``url`` runs a test on SQLite (a WAL file) and on a real PostgreSQL server (a fresh schema in a
private server started once per session; skipped with the reason where none can be started)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoparena.store.pg import TempPostgres, unavailable_reason

_n = itertools.count()


@pytest.fixture(scope="session")
def arena_pg() -> Iterator[TempPostgres]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    try:
        server = TempPostgres(fsync=False).start()
    except RuntimeError as exc:
        pytest.skip(f"PostgreSQL tests skipped: could not start a temporary server: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arena.db'}"
    server: TempPostgres = request.getfixturevalue("arena_pg")
    return server.create_schema(f"arena{next(_n)}")
