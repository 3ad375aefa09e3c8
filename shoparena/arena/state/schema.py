"""The arena's tables (SQLAlchemy Core) and their migrations, in the same database as the trajectory store.

Migrations are recorded in their own table, ``arena_schema_migrations`` (the store keeps ``schema_migrations``),
and applied like the store's: one write transaction holding the database's write lock (SQLite ``BEGIN
IMMEDIATE``, PostgreSQL an advisory lock), so concurrent openers apply each step exactly once. Applied steps are
never edited; new ones are appended to :data:`MIGRATIONS`.

Timestamps are unix seconds (floats) from the arena's clock. Ids are deterministic strings (``ag_…``, ``av_…``,
``wi_…``, ``er_…``, ``race-000001``) so a seeded simulation replays identically. Every status change also writes
an ``events`` row in the same transaction.

Invariants held by constraints: one agent name per hotkey, one version number per agent, one racer per hotkey per
race (``qualifiers`` unique on race and hotkey), one work item per (kind, race, version).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Connection, Engine

from shoparena.db.migrations import Migration, Migrations

metadata = MetaData()
_SEQ = BigInteger().with_variant(Integer(), "sqlite")

miners = Table(
    "miners", metadata,
    Column("hotkey", Text, primary_key=True),
    Column("first_seen_at", Float, nullable=False),
    Column("next_allowed_at", Float, nullable=False),
    Column("cooldown_holder", Text),
    Column("submission_count", Integer, nullable=False),
    Column("pinned_version_id", Text),
    Column("banned", Boolean, nullable=False),
)

agents = Table(
    "agents", metadata,
    Column("agent_id", Text, primary_key=True),
    Column("hotkey", Text, ForeignKey("miners.hotkey"), nullable=False),
    Column("name", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("hotkey", "name", name="uq_agents_hotkey_name"),
)

agent_versions = Table(
    "agent_versions", metadata,
    Column("agent_version_id", Text, primary_key=True),
    Column("agent_id", Text, ForeignKey("agents.agent_id"), nullable=False),
    Column("hotkey", Text, nullable=False),
    Column("version_number", Integer, nullable=False),
    Column("code", Text, nullable=False),
    Column("code_sha256", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("state_reason", Text),
    Column("submission_id", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("qualifying_race_id", Text),
    Column("qualifying_score", Float),
    Column("eligible_at", Float),
    Column("eliminated_in_race_number", Integer),
    Column("promoted_at", Float),
    Column("code_release_at", Float),
    UniqueConstraint("agent_id", "version_number", name="uq_versions_number"),
    Index("ix_versions_hotkey", "hotkey"),
    Index("ix_versions_state", "state"),
)

submissions = Table(
    "submissions", metadata,
    Column("submission_id", Text, primary_key=True),
    Column("hotkey", Text, ForeignKey("miners.hotkey"), nullable=False),
    Column("agent_name", Text, nullable=False),
    Column("submitted_at", Float, nullable=False),
    Column("code_sha256", Text, nullable=False),
    Column("admission_status", Text, nullable=False),
    Column("admission_reason", Text),
    Column("cooldown", Text, nullable=False),
    Column("next_allowed_at", Float, nullable=False),
    Column("violations", JSON, nullable=False),
    Column("similarity", Float),
    Column("similar_to", Text),
    Column("agent_version_id", Text),
    Index("ix_submissions_hotkey", "hotkey", "submitted_at"),
)

suites = Table(
    "suites", metadata,
    Column("suite_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("race_id", Text),
    Column("problem_ids", JSON, nullable=False),
    Column("problems", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
)

races = Table(
    "races", metadata,
    Column("race_id", Text, primary_key=True),
    Column("race_number", Integer, nullable=False, unique=True),
    Column("status", Text, nullable=False),
    Column("qualifying_suite_id", Text),
    Column("race_suite_id", Text),
    Column("opened_at", Float, nullable=False),
    Column("qualifying_closes_at", Float, nullable=False),
    Column("race_started_at", Float),
    Column("race_deadline_at", Float),
    Column("race_completed_at", Float),
    Column("qualifying_threshold", Float),
    Column("commitment", Text, nullable=False),
    Column("secret", Text, nullable=False),
    Column("beacon_block", BigInteger),
    Column("beacon", Text),
    Column("beacon_source", Text),
    Column("world_seed", Text),
    Column("incumbent_version_id", Text),
    Column("winner_agent_version_id", Text),
    Column("winner_score", Float),
    Column("promoted", Boolean, nullable=False),
    Column("reign_started_at", Float),
    Column("code_release_at", Float),
    Index("ix_races_status", "status"),
)

qualifiers = Table(
    "qualifiers", metadata,
    Column("race_id", Text, ForeignKey("races.race_id"), primary_key=True),
    Column("agent_version_id", Text, ForeignKey("agent_versions.agent_version_id"), primary_key=True),
    Column("hotkey", Text, nullable=False),
    Column("qualification_type", Text, nullable=False),
    Column("qualifying_score", Float),
    Column("race_score", Float),
    Column("race_rank", Integer),
    Column("eliminated", Boolean, nullable=False),
    UniqueConstraint("race_id", "hotkey", name="uq_qualifiers_one_per_hotkey"),
)

work_items = Table(
    "work_items", metadata,
    Column("work_item_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("race_id", Text, nullable=False),
    Column("agent_version_id", Text, ForeignKey("agent_versions.agent_version_id"), nullable=False),
    Column("suite_id", Text, ForeignKey("suites.suite_id"), nullable=False),
    Column("status", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("required_successes", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("active_leases", Integer, nullable=False),
    Column("successes", Integer, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("score", Float),
    Column("created_at", Float, nullable=False),
    Column("closed_at", Float),
    UniqueConstraint("kind", "race_id", "agent_version_id", name="uq_work_items_target"),
    Index("ix_work_items_open", "status", "priority", "created_at"),
)

eval_runs = Table(
    "eval_runs", metadata,
    Column("eval_run_id", Text, primary_key=True),
    Column("work_item_id", Text, ForeignKey("work_items.work_item_id"), nullable=False),
    Column("validator_hotkey", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", Text, nullable=False),
    Column("claimed_at", Float, nullable=False),
    Column("lease_expires_at", Float, nullable=False),
    Column("heartbeat_at", Float),
    Column("completed_at", Float),
    Column("is_included", Boolean, nullable=False),
    Column("final_score", Float),
    Column("success_rate", Float),
    Column("reasoning_quality", Float),
    Column("reasoning_coefficient", Float),
    Column("score_components", JSON),
    Column("failure_reason", Text),
    Column("validator_run_id", Text),
    Column("sandbox_metadata", JSON),
    Column("progress", JSON),
    UniqueConstraint("work_item_id", "validator_hotkey", "attempt", name="uq_eval_runs_attempt"),
    Index("ix_eval_runs_item", "work_item_id", "status"),
    Index("ix_eval_runs_lease", "status", "lease_expires_at"),
)

weight_submissions = Table(
    "weight_submissions", metadata,
    Column("id", _SEQ, Identity(), primary_key=True),
    Column("validator_hotkey", Text, nullable=False),
    Column("race_id", Text),
    Column("block", BigInteger),
    Column("uids", JSON, nullable=False),
    Column("weights", JSON, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("reason", Text),
    Column("at", Float, nullable=False),
)

events = Table(
    "events", metadata,
    Column("seq", _SEQ, Identity(), primary_key=True),
    Column("at", Float, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("subject_id", Text, nullable=False),
    Column("data", JSON, nullable=False),
    Index("ix_events_subject", "subject", "subject_id"),
)

arena_schema_migrations = Table(
    "arena_schema_migrations", metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),
    Column("applied_at", BigInteger, nullable=False),
)

_V1_TABLES = (miners, agents, agent_versions, submissions, suites, races, qualifiers, work_items, eval_runs,
              weight_submissions, events)


def _create_v1(conn: Connection) -> None:
    # Freeze this definition here once a later step alters a table, so new databases replay the same history.
    for table in _V1_TABLES:
        table.create(conn)


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "arena tables", _create_v1),)
SCHEMA_VERSION = MIGRATIONS[-1].version
_PG_LOCK_KEY = 0x5E0A_A4E7  # advisory lock serialising arena migrations (the store uses its own key)
HISTORY = Migrations(arena_schema_migrations, MIGRATIONS, lock_key=_PG_LOCK_KEY, what="arena",
                     hint="upgrade shoparena to open this arena database")


def current_version(conn: Connection) -> int:
    """The highest applied migration (0 when none)."""
    return HISTORY.current_version(conn)


def migrate(engine: Engine) -> list[int]:
    """Bring the database to :data:`SCHEMA_VERSION`; returns the versions applied now (empty when up to date)."""
    return HISTORY.migrate(engine)
