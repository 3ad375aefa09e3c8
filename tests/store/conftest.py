"""Store fixtures: every store test runs on SQLite (a temp file, WAL) and on a real PostgreSQL server.

The server (``pg_server`` in the root conftest) is started once per session (``initdb`` + ``pg_ctl`` into a
private temp dir, Unix socket only, run as the ``postgres`` user when we are root, fsync off for speed) and each
test gets a fresh schema. Where no server
can be started the PostgreSQL cases skip with the reason (install the Debian package ``postgresql``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoparena.store import TrajectoryStore, open_store
from shoparena.store.pg import TempPostgres
from shoparena.store.testing import synthetic_record
from shoparena.store.types import TrajectoryRecord

WRITER = Path(__file__).with_name("_writer.py")
_db_numbers = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store URL on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    server: TempPostgres = request.getfixturevalue("pg_server")
    return server.create_schema(f"t{next(_db_numbers)}")


@pytest.fixture
def store(store_url: str) -> Iterator[TrajectoryStore]:
    with open_store(store_url) as st:
        yield st


def rec(i: int, *, seed: int = 0, size: int = 1_500, **kw: object) -> TrajectoryRecord:
    """A small unsealed synthetic record (deterministic in ``i`` and ``seed``)."""
    return synthetic_record(i, seed=seed, size=size, **kw)  # type: ignore[arg-type]
