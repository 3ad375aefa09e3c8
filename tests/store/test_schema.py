"""Migrations are versioned and idempotent; the database itself refuses to change or remove a record."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from shoparena.errors import DataError
from shoparena.store import TrajectoryStore, open_store
from shoparena.store.schema import SCHEMA_VERSION
from tests.store.conftest import rec


def _versions(store: TrajectoryStore) -> list[int]:
    with store._engine.connect() as conn:
        return list(conn.execute(text("SELECT version FROM schema_migrations ORDER BY version")).scalars())


def test_migrate_is_idempotent(store_url: str) -> None:
    with open_store(store_url, migrate=False) as st:
        assert st.schema_version() == 0
        assert st.migrate() == list(range(1, SCHEMA_VERSION + 1))
        assert st.migrate() == []
    with open_store(store_url) as st:
        assert st.migrate() == []
        assert st.schema_version() == SCHEMA_VERSION
        assert _versions(st) == list(range(1, SCHEMA_VERSION + 1))


def test_concurrent_openers_apply_each_migration_once(store_url: str) -> None:
    def _open(_: int) -> list[int]:
        st = open_store(store_url, migrate=False)
        try:
            return st.migrate()
        finally:
            st.close()

    with ThreadPoolExecutor(4) as pool:
        applied = list(pool.map(_open, range(4)))
    assert sorted(v for a in applied for v in a) == list(range(1, SCHEMA_VERSION + 1))
    with open_store(store_url) as st:
        assert _versions(st) == list(range(1, SCHEMA_VERSION + 1))


def test_a_newer_schema_is_refused(store: TrajectoryStore, store_url: str) -> None:
    with store._engine.begin() as conn:
        conn.execute(text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, 'future', 0)"),
                     {"v": SCHEMA_VERSION + 1})
    with pytest.raises(DataError, match="newer"):
        open_store(store_url)


@pytest.mark.parametrize("sql", [
    "UPDATE trajectory_records SET success = NOT success",
    "UPDATE trajectory_records SET body = '{}' WHERE seq = 1",
    "DELETE FROM trajectory_records",
    "DELETE FROM trajectory_records WHERE seq = 1",
])
def test_raw_update_and_delete_are_refused_by_the_database(store: TrajectoryStore, sql: str) -> None:
    store.append_many([rec(i) for i in range(3)])
    before = list(store.bodies())
    with pytest.raises(DBAPIError, match="append-only"), store._engine.begin() as conn:
        conn.execute(text(sql))
    assert list(store.bodies()) == before and store.verify().ok


def test_upsert_cannot_overwrite_a_record(store: TrajectoryStore) -> None:
    """PostgreSQL: DO UPDATE fires the update guard. SQLite: the insert guard skips the row before any conflict."""
    store.append(rec(1))
    [row] = list(store.rows())
    sql = ("INSERT INTO trajectory_records SELECT * FROM trajectory_records WHERE true "
           "ON CONFLICT (record_id) DO UPDATE SET judge_score = 0")
    try:
        with store._engine.begin() as conn:
            conn.execute(text(sql))
        assert store.dialect == "sqlite"
    except DBAPIError as exc:
        assert "append-only" in str(exc)
    assert list(store.rows()) == [row]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_postgresql_truncate_is_refused(store: TrajectoryStore) -> None:
    store.append(rec(1))
    with pytest.raises(DBAPIError, match="append-only"), store._engine.begin() as conn:
        conn.execute(text("TRUNCATE trajectory_records"))
    assert store.count() == 1


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_sqlite_insert_or_replace_cannot_swap_a_record(store: TrajectoryStore) -> None:
    """REPLACE deletes the old row without firing delete triggers; the insert guard turns it into a no-op."""
    store.append(rec(1))
    before = list(store.bodies())
    with store._engine.begin() as conn:
        conn.execute(text("INSERT OR REPLACE INTO trajectory_records SELECT * FROM trajectory_records"))
        conn.execute(text("INSERT OR REPLACE INTO trajectory_records (record_id, idempotency_key, eval_run_id, "
                          "agent_id, agent_version, agent_code_sha256, problem_id, bucket, status, axis, success, "
                          "pipeline_version, trace_sha256, call_log_sha256, created_at, body, seq) SELECT "
                          "'x', 'y', eval_run_id, agent_id, agent_version, agent_code_sha256, problem_id, bucket, "
                          "status, axis, success, pipeline_version, trace_sha256, call_log_sha256, created_at, "
                          "'{}', seq FROM trajectory_records"))
    assert list(store.bodies()) == before and store.count() == 1
