"""Engines for the two backends, chosen by URL: SQLite (WAL, the embedded default) and PostgreSQL (psycopg 3).

SQLite durability: ``journal_mode=WAL`` with ``synchronous=FULL`` (the default here). In WAL mode FULL fsyncs
the log at every commit, so an append that has returned survives a power cut or an OS crash, not only a killed
process; NORMAL+WAL also survives ``kill -9`` (the log is in the page cache) and never corrupts, but may lose the
last commits on power loss — which would break "a returned append is stored". The price is an fsync per commit:
FULL is somewhat slower than NORMAL for a lone writer, and the gap closes when the CPU is busy (appends are then
CPU-bound: sealing and hashing); ``bench/store.py`` measures both side by side. ``?synchronous=normal`` in the URL
opts out. Write transactions start with ``BEGIN IMMEDIATE`` (the write lock
up front, so concurrent writers queue on the 60 s busy timeout instead of failing a lock upgrade), and
:func:`retrying` retries what still escapes. ``sqlite://`` is an in-memory store on one shared connection: fine
for tests, but finish (or drop) a query stream before appending.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.pool import StaticPool

from shoparena.errors import ConfigError, DataError, NotFoundError

T = TypeVar("T")
#: Execution option marking a connection whose transactions write (SQLite then begins IMMEDIATE).
WRITE = {"shoparena_write": True}
BUSY_TIMEOUT_S = 60.0
_SYNC_MODES = ("off", "normal", "full", "extra")
#: The migration tables that mark a database as ours (trajectory store, arena state).
MARKER_TABLES = frozenset({"schema_migrations", "arena_schema_migrations"})
_SQLITE_MAGIC = b"SQLite format 3\x00"


def parse_url(url: str) -> URL:
    """Parse and normalise a store URL (``postgresql://`` and ``postgres://`` get the psycopg 3 driver)."""
    try:
        u = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"not a store URL: {url!r}",
                          hint="use sqlite:///path.db or postgresql://user@host/db") from exc
    if u.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return u.set(drivername="postgresql+psycopg")
    if u.drivername in ("sqlite", "sqlite+pysqlite"):
        return u.set(drivername="sqlite+pysqlite")
    raise ConfigError(f"unsupported store backend {u.drivername!r}",
                      hint="use sqlite:///path.db or postgresql://user@host/db")


def make_engine(url: str, *, readonly: bool = False) -> Engine:
    """An engine for ``url`` configured for this store (pragmas, transaction mode, pool). ``readonly``: for
    commands that only read: a SQLite file must already exist and hold a database (:class:`NotFoundError`
    otherwise; nothing is created, switched to WAL or migrated) and is opened ``mode=ro``; PostgreSQL sessions
    are read-only transactions."""
    u = parse_url(url)
    if u.get_backend_name() == "postgresql":
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise ConfigError("a postgresql:// store needs the 'pg' extra (the psycopg 3 driver is not installed)",
                              hint="pip install 'shoparena[pg]'") from exc
        if readonly:  # every transaction read-only, beside any options the URL sets (a search_path)
            options = " ".join(filter(None, (str(u.query.get("options", "")), "-c default_transaction_read_only=on")))
            u = u.update_query_dict({"options": options})
        engine = create_engine(u, insertmanyvalues_page_size=500)
        _fork_safe(engine)
        return engine
    sync = str(u.query.get("synchronous", "full")).lower()
    if sync not in _SYNC_MODES:
        raise ConfigError(f"bad synchronous={sync!r} in store URL", hint=f"one of {', '.join(_SYNC_MODES)}")
    u = u.difference_update_query(["synchronous"])
    memory = u.database in (None, "", ":memory:")
    path = sqlite_path(url)
    if readonly and path is not None:
        return _readonly_sqlite(path, sync)
    if path is not None:
        check_sqlite_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    kw: dict[str, Any] = {"poolclass": StaticPool} if memory else {}
    engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
                           insertmanyvalues_page_size=200, **kw)
    _sqlite_hooks(engine, sync, wal=not memory)
    _fork_safe(engine)
    return engine


def _readonly_sqlite(path: Path, sync: str) -> Engine:
    """A ``mode=ro`` engine on an existing SQLite database file. The file itself is never written; reading a
    WAL database read-only may leave its ``-wal`` / ``-shm`` sidecars beside it (SQLite's shared-memory index)."""
    if not path.exists():
        raise NotFoundError(f"no database at {path}", hint="check the store URL (sqlite:///path/to/file.db); a "
                            "read-only command never creates one")
    check_sqlite_file(path)
    if path.stat().st_size == 0:
        raise NotFoundError(f"{path} is an empty file, not a database",
                            hint="check the store URL; a read-only command never turns a file into a store")
    uri = f"{path.resolve().as_uri()}?mode=ro"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)

    engine = create_engine(f"sqlite+pysqlite:///{path}", creator=connect)
    _sqlite_hooks(engine, sync, wal=False)  # a read-only file keeps its journal mode
    _fork_safe(engine)
    return engine


def check_sqlite_file(path: Path) -> None:
    """Refuse, read-only and before anything connects (which would switch the file to WAL and migrate it), a
    path that is a directory, not a SQLite file, unreadable or corrupt, or another application's database (tables
    but none of :data:`MARKER_TABLES`). A missing or empty file is fine: it becomes a new database."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, not a database file", hint="use sqlite:///path/to/file.db")
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with path.open("rb") as fh:
            magic = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", hint="check the file's permissions") from exc
    if magic != _SQLITE_MAGIC:
        raise DataError(f"{path} is not a SQLite database", hint="check --store; the file was not written by "
                        "shoparena (or is damaged)")
    tables = _sqlite_tables(path)
    if tables and not tables & MARKER_TABLES:
        shown = ", ".join(sorted(tables)[:5]) + (" …" if len(tables) > 5 else "")
        raise DataError(f"{path} is not a shoparena database (it holds the tables {shown})",
                        hint="check --store; shoparena never writes into another application's database")


def _sqlite_tables(path: Path, attempts: int = 4) -> set[str]:
    """The table names of a SQLite file, read without writing anything: ``immutable`` (no lock, no -wal / -shm
    sidecar) unless a live database's log exists (then ``mode=ro`` reads it). An immutable read can see a file
    another process is creating at that moment, so a failed read is retried briefly before it is called damaged."""
    query = "mode=ro" if Path(f"{path}-wal").exists() else "mode=ro&immutable=1"
    for attempt in range(attempts):
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if attempt == attempts - 1:
                raise DataError(f"{path} is a damaged SQLite database: {exc}",
                                hint="restore it from a copy; a truncated file cannot be read") from exc
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def connection_error(url: str, exc: Exception) -> NotFoundError:
    """The error for a database that cannot be reached or opened (server down, wrong host, port or name)."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return NotFoundError(f"cannot connect to the database {safe_url(url)}: {reason}",
                         hint="check the URL and that the server is running")


def _sqlite_hooks(engine: Engine, sync: str, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver stops managing transactions; the "begin" hook does
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if wal:
            _set_wal(cur)
        cur.execute(f"PRAGMA synchronous = {sync.upper()}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("shoparena_write") else "BEGIN")


def _set_wal(cur: Any, attempts: int = 50) -> None:
    """Switch to WAL. SQLite may answer ``database is locked`` at once, without calling the busy handler, while
    another connection is creating the same file; that answer is retried with backoff (seen under load when
    several processes open a new store together)."""
    for attempt in range(attempts):
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc).lower() and "busy" not in str(exc).lower()) or attempt == attempts - 1:
                raise
            time.sleep(min(0.2, 0.005 * 2 ** attempt) * (0.5 + random.random()))


def _fork_safe(engine: Engine) -> None:
    """SQLAlchemy's recipe: a process forked after connecting never uses (or closes) its parent's connections."""

    @event.listens_for(engine, "connect")
    def _connect(_dbapi_conn: Any, record: Any) -> None:
        record.info["pid"] = os.getpid()

    @event.listens_for(engine, "checkout")
    def _checkout(_dbapi_conn: Any, record: Any, proxy: Any) -> None:
        if record.info.get("pid", os.getpid()) != os.getpid():
            record.dbapi_connection = proxy.dbapi_connection = None
            raise DisconnectionError("connection belongs to the parent process")


def _retryable(exc: DBAPIError) -> bool:
    if exc.connection_invalidated:  # the server dropped us: the pool has been refreshed
        return True
    if getattr(exc.orig, "sqlstate", None) in ("40P01", "40001"):  # PostgreSQL deadlock / serialization failure
        return True
    text = str(exc.orig).lower()
    return isinstance(exc, OperationalError) and ("locked" in text or "busy" in text)


def retrying(fn: Callable[[], T], *, attempts: int = 5) -> T:
    """Run a transaction, retrying with jittered backoff what a second try can fix: SQLite ``database is
    locked`` past the busy timeout, a PostgreSQL deadlock between two batches that overlap in opposite orders,
    a dropped connection."""
    for attempt in range(attempts):
        try:
            return fn()
        except DBAPIError as exc:
            if attempt == attempts - 1 or not _retryable(exc):
                raise
            time.sleep(min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for in-memory databases and other backends)."""
    u = parse_url(url)
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:") or u.database.startswith("file:"):
        return None
    return Path(u.database).expanduser()


def safe_url(url: str) -> str:
    """The URL as given with any password masked, for display."""
    parse_url(url)
    return make_url(url).render_as_string(hide_password=True)
