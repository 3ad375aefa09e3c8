"""The arena tables live in the trajectory store's database with their own migrations table."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from shoparena.arena.state import schema
from shoparena.arena.state.db import ArenaDB
from shoparena.errors import DataError
from shoparena.store import open_store
from tests.arena_service import make_arena


def test_same_database_as_the_trajectory_store(url: str) -> None:
    with open_store(url) as store:
        arena = make_arena(url)
        assert store.schema_version() >= 1
        tables = set(inspect(arena.db.engine).get_table_names())
        assert {"trajectory_records", "schema_migrations", "arena_schema_migrations", "miners", "agents",
                "agent_versions", "submissions", "suites", "races", "qualifiers", "work_items", "eval_runs",
                "weight_submissions", "events"} <= tables
        assert schema.migrate(arena.db.engine) == []  # idempotent
        with arena.db.engine.connect() as conn:
            assert schema.current_version(conn) == schema.SCHEMA_VERSION
        arena.close()


def test_a_newer_schema_is_refused(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    db = ArenaDB(url)
    db.write(lambda c: c.execute(schema.arena_schema_migrations.insert().values(
        version=schema.SCHEMA_VERSION + 1, name="future", applied_at=0)))
    db.close()
    with pytest.raises(DataError, match="newer"):
        ArenaDB(url)
