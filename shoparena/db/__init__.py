"""Database plumbing shared by the trajectory store and the arena state: engines by URL (SQLite with WAL /
PostgreSQL), write retries, and one versioned migration runner. Nothing here knows a table of either."""

from shoparena.db.engine import WRITE, make_engine, retrying, safe_url, sqlite_path
from shoparena.db.migrations import Migration, Migrations

__all__ = ["WRITE", "Migration", "Migrations", "make_engine", "retrying", "safe_url", "sqlite_path"]
