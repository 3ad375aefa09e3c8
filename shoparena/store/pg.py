"""A throwaway PostgreSQL server for tests and benches: ``initdb`` into a private temp dir, listening only on a
Unix socket there (no TCP), stopped and deleted on exit.

PostgreSQL refuses to run as root, so under root the server binaries run as the ``postgres`` system user (the
Debian package creates it). :func:`unavailable_reason` says why no server can be started here (no binaries, no
such user), for a clear skip message.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

INSTALL_HINT = "install the Debian package postgresql (apt-get install -y postgresql)"


def pg_bin_dir() -> Path | None:
    """The directory holding ``initdb``/``pg_ctl`` (``$PG_BIN``, the PATH, or Debian's /usr/lib/postgresql/N/bin)."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def unavailable_reason() -> str | None:
    """Why a temporary server cannot be started here, or None if it can."""
    bin_dir = pg_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        return f"PostgreSQL server binaries not found: {INSTALL_HINT}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return f"running as root and there is no 'postgres' user to run the server as: {INSTALL_HINT}"
    return None


class TempPostgres:
    """``with TempPostgres() as pg: url = pg.create_database("t1")``: a private server, gone afterwards.

    ``fsync=False`` speeds up tests (a crash of the *server* could then lose data; client crashes cannot)."""

    def __init__(self, *, fsync: bool = True, settings: dict[str, str] | None = None) -> None:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self.bin = pg_bin_dir()
        self.fsync = fsync
        self.settings = settings or {}
        self.root: Path | None = None
        self._run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            self._run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    @property
    def socket_dir(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root / "sock"

    def _pg(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None and self.root is not None
        return subprocess.run([str(self.bin / args[0]), *args[1:]], cwd=self.root, capture_output=True, text=True,
                              check=False, env={**os.environ, "LC_ALL": "C"}, **self._run_as)

    def start(self) -> TempPostgres:
        # /tmp, not $TMPDIR: the postgres user must be able to reach it, and a socket path has at most 107 bytes
        self.root = Path(tempfile.mkdtemp(prefix="shoparena-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
        self.socket_dir.mkdir()
        if self._run_as:
            for p in (self.root, self.socket_dir):
                os.chown(p, self._run_as["user"], self._run_as["group"])
        data = self.root / "data"
        done = self._pg("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                        "--locale=C", "--no-sync")
        if done.returncode:
            self._cleanup()
            raise RuntimeError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        conf = {"listen_addresses": "''", "unix_socket_directories": f"'{self.socket_dir}'",
                "fsync": "on" if self.fsync else "off", "full_page_writes": "on" if self.fsync else "off",
                "max_connections": "200", **self.settings}
        with open(data / "postgresql.conf", "a", encoding="utf-8") as fh:
            fh.write("".join(f"{k} = {v}\n" for k, v in conf.items()))
        done = self._pg("pg_ctl", "-D", str(data), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")
        if done.returncode:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            self._cleanup()
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}\n{log}")
        atexit.register(self.stop)
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{dbname}?host={self.socket_dir}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute(sql)  # type: ignore[arg-type]

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_schema(self, name: str) -> str:
        """Create schema ``name`` in the ``postgres`` database and return a URL whose connections use it (as
        their ``search_path``): an isolated store in ~5 ms, where a new database takes 100–400 ms."""
        self._admin(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}&options=-csearch_path%3D{name}"

    def stop(self) -> None:
        if self.root is None:
            return
        self._pg("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        self._cleanup()

    def _cleanup(self) -> None:
        if self.root is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.root)
        self.root = None

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
