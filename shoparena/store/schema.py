"""The store's tables (SQLAlchemy Core) and its versioned, idempotent migrations.

``trajectory_records`` holds one row per record: the indexed query columns plus ``body``, the record's
canonical JSON exactly as hashed (the source of truth; the columns are copies for querying). ``seq`` is the
append order. Migrations are numbered steps recorded in ``schema_migrations`` (1: table and indexes, 2: the
append-only guards, 3: lz4 body compression on PostgreSQL); :func:`migrate` applies the missing ones in order
inside one transaction holding the database's write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL an advisory
lock), so concurrent openers apply each step exactly once. A store whose schema is newer than this code is
refused. New steps are appended to :data:`MIGRATIONS`; applied steps are never edited.

Append-only is enforced by the database itself (migration 2), not only by this package:
- PostgreSQL: a ``BEFORE UPDATE OR DELETE`` row trigger and a ``BEFORE TRUNCATE`` statement trigger raise.
- SQLite: ``BEFORE UPDATE`` / ``BEFORE DELETE`` triggers ``RAISE(ABORT)``, and a ``BEFORE INSERT`` trigger turns
  any insert that collides with a stored row (same record id, idempotency key or seq) into a no-op — which also
  stops ``INSERT OR REPLACE`` from deleting the old row behind the delete trigger's back.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Identity,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from shoparena.db.migrations import Migration, Migrations

metadata = MetaData()

records = Table(
    "trajectory_records", metadata,
    Column("seq", BigInteger().with_variant(Integer(), "sqlite"), Identity(), primary_key=True),
    Column("record_id", Text, nullable=False, unique=True),
    Column("idempotency_key", Text, nullable=False, unique=True),
    Column("eval_run_id", Text, nullable=False),
    Column("agent_id", Text, nullable=False),
    Column("agent_version", Text, nullable=False),
    Column("agent_code_sha256", Text, nullable=False),
    Column("miner_hotkey", Text),
    Column("validator_hotkey", Text),
    Column("problem_id", Text, nullable=False),
    Column("suite", Text),
    Column("cluster_id", Text),
    Column("bucket", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("axis", Text, nullable=False),
    Column("success", Boolean, nullable=False),
    Column("judge_score", Float),
    Column("coefficient", Float),
    Column("pipeline_version", Text, nullable=False),
    Column("trace_sha256", Text, nullable=False),
    Column("call_log_sha256", Text, nullable=False),
    Column("started_at", BigInteger),
    Column("finished_at", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_records_agent", "agent_id", "agent_version"),
    Index("ix_records_problem", "problem_id"),
    Index("ix_records_cluster", "cluster_id"),
    Index("ix_records_suite", "suite"),
    Index("ix_records_eval_run", "eval_run_id"),
    Index("ix_records_created_at", "created_at"),
    Index("ix_records_pipeline", "pipeline_version"),
    Index("ix_records_judge_score", "judge_score"),
)

#: Columns copied out of the record body (everything but ``seq`` and ``body``).
RECORD_COLUMNS = tuple(c.name for c in records.columns if c.name not in ("seq", "body"))

schema_migrations = Table(
    "schema_migrations", metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),
    Column("applied_at", BigInteger, nullable=False),
)


def _create_records(conn: Connection) -> None:
    # ``records`` is still the table as of this step; once a later step alters it, freeze the version-1
    # definition here so that a new database replays the same history.
    records.create(conn)


_PG_GUARDS = """
CREATE FUNCTION shoparena_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'trajectory_records is append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER trajectory_records_append_only BEFORE UPDATE OR DELETE ON trajectory_records
  FOR EACH ROW EXECUTE FUNCTION shoparena_append_only();
CREATE TRIGGER trajectory_records_no_truncate BEFORE TRUNCATE ON trajectory_records
  FOR EACH STATEMENT EXECUTE FUNCTION shoparena_append_only();
"""

_SQLITE_GUARDS = (
    """CREATE TRIGGER trajectory_records_no_update BEFORE UPDATE ON trajectory_records
       BEGIN SELECT RAISE(ABORT, 'trajectory_records is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER trajectory_records_no_delete BEFORE DELETE ON trajectory_records
       BEGIN SELECT RAISE(ABORT, 'trajectory_records is append-only: DELETE refused'); END""",
    """CREATE TRIGGER trajectory_records_insert_once BEFORE INSERT ON trajectory_records
       WHEN EXISTS (SELECT 1 FROM trajectory_records WHERE record_id = NEW.record_id)
         OR EXISTS (SELECT 1 FROM trajectory_records WHERE idempotency_key = NEW.idempotency_key)
         OR EXISTS (SELECT 1 FROM trajectory_records WHERE seq = NEW.seq)
       BEGIN SELECT RAISE(IGNORE); END""",
)


def _append_only_guards(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text(_PG_GUARDS))
    else:
        for ddl in _SQLITE_GUARDS:
            conn.exec_driver_sql(ddl)


def _lz4_bodies(conn: Connection) -> None:
    """PostgreSQL compresses large ``body`` values (TOAST) with pglz by default; lz4 makes 20 KB appends ~1.5x
    faster. Affects new rows only; skipped where the server lacks lz4 (PostgreSQL < 14 or built without it)."""
    if conn.dialect.name != "postgresql":
        return
    try:
        with conn.begin_nested():
            conn.execute(text("ALTER TABLE trajectory_records ALTER COLUMN body SET COMPRESSION lz4"))
    except DBAPIError:
        pass


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "trajectory_records table and query indexes", _create_records),
    Migration(2, "append-only guards (triggers)", _append_only_guards),
    Migration(3, "lz4 compression of record bodies (PostgreSQL)", _lz4_bodies),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
_PG_LOCK_KEY = 0x5E0A_7E57  # advisory lock serialising migrations
HISTORY = Migrations(schema_migrations, MIGRATIONS, lock_key=_PG_LOCK_KEY, what="store",
                     hint="upgrade shoparena to read this store")


def current_version(conn: Connection) -> int:
    """The highest applied migration (0 when none)."""
    return HISTORY.current_version(conn)


def migrate(engine: Engine) -> list[int]:
    """Bring the database to :data:`SCHEMA_VERSION`; returns the versions applied now (empty when up to date)."""
    return HISTORY.migrate(engine)
