"""Read-only commands never write: ``judge audit``, ``store rescore --dry-run``, ``corpus build --from``, ``web`` and
``store stats | verify | export`` refuse a path that holds no store (exit 4 with a hint) and leave the file
byte-identical (a missing one is not created); ``store rescore`` refuses an ``--out`` it could not write before it
appends anything. Each case runs through the CLI's entry point (:func:`shoparena.cli.main`)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from shoparena.store import open_store
from shoparena.store.testing import synthetic_record

NOT_FOUND, USAGE = 4, 2


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code and stderr of ``shoparena ARGS``, run in-process through the real entry point."""
    from shoparena.cli import main

    try:
        main(list(args))
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().err


def read_only_commands(url: str, tmp: Path, catalog: Path, problems: Path) -> dict[str, list[str]]:
    return {
        "judge audit": ["judge", "audit", "--store", url, "--judge", "rubric", "--sample", "2"],
        "store rescore --dry-run": ["store", "rescore", "--store", url, "--catalog", str(catalog), "--problems",
                                    str(problems), "--dry-run"],
        "corpus build --from": ["corpus", "build", "--from", url, "--catalog", str(catalog), "--out",
                                str(tmp / "corpus")],
        "web": ["web", "--store", url, "--port", "0"],
        "store stats": ["store", "stats", "--store", url],
        "store verify": ["store", "verify", "--store", url],
        "store export": ["store", "export", "--store", url, "--out", str(tmp / "out.jsonl")],
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """``(catalog, problems.jsonl, store.db)``: two problems, each run by the seed world's three agents."""
    from shoparena.corpus.testing import seed_world
    from shoparena.tasks.loader import dump_problems

    root = tmp_path_factory.mktemp("ro")
    w = seed_world(root, catalog_size=300, n_problems=2)
    dump_problems(w.problems, root / "problems.jsonl")
    return w.catalog, root / "problems.jsonl", root / "store.db"


def stamp(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.mark.parametrize("command", list(read_only_commands("", Path(), Path(), Path())))
def test_an_empty_file_is_refused_and_left_as_it_was(world: tuple[Path, Path, Path], tmp_path: Path, command: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    os.utime(empty, ns=(1_000_000_000, 1_000_000_000))
    args = read_only_commands(f"sqlite:///{empty}", tmp_path, *world[:2])[command]
    code, err = cli(capsys, *args)
    assert code == NOT_FOUND, err
    assert err.startswith("error:") and "hint:" in err and "Traceback" not in err
    assert stamp(empty) == (b"", 1_000_000_000)
    assert not {"empty.db-wal", "empty.db-shm", "empty.db-journal", "out.jsonl"} & {p.name for p in tmp_path.iterdir()}


@pytest.mark.parametrize("command", list(read_only_commands("", Path(), Path(), Path())))
def test_a_missing_file_is_not_created(world: tuple[Path, Path, Path], tmp_path: Path, command: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    args = read_only_commands(f"sqlite:///{tmp_path / 'sub' / 'missing.db'}", tmp_path, *world[:2])[command]
    code, err = cli(capsys, *args)
    assert code == NOT_FOUND and "hint:" in err, err
    assert not (tmp_path / "sub").exists()


def test_a_foreign_database_keeps_its_tables(world: tuple[Path, Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A SQLite file of the right kind with no store in it (an arena-state-only or just-created database):
    refused, no store tables added."""
    path = tmp_path / "bare.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at INTEGER)")
    conn.commit()
    conn.close()
    before = stamp(path)
    for command, args in read_only_commands(f"sqlite:///{path}", tmp_path, *world[:2]).items():
        code, err = cli(capsys, *args)
        assert code == NOT_FOUND and "holds no trajectory store" in err and "hint:" in err, (command, err)
    assert stamp(path) == before


def test_a_real_store_is_read_and_its_file_left_byte_identical(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "store.db"
    with open_store(f"sqlite:///{path}") as st:
        st.append_many([synthetic_record(i, size=800).sealed(1_700_000_000_000 + i) for i in range(3)])
    before = stamp(path)
    for args in (["store", "stats", "--store", f"sqlite:///{path}"], ["store", "verify", "--store", f"sqlite:///{path}"]):
        code, err = cli(capsys, *args)
        assert code == 0, err
    assert stamp(path) == before


def _rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM trajectory_records").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("where", ["under a file", "the store itself", "the problem file"])
def test_rescore_refuses_an_unwritable_out_before_appending(world: tuple[Path, Path, Path], tmp_path: Path,
                                                            where: str, capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems, seeded = world
    path = tmp_path / "store.db"
    shutil.copy(seeded, path)
    n = _rows(path)
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    out = {"under a file": tmp_path / "a_file" / "report.json", "the store itself": path,
           "the problem file": problems}[where]
    store_before, problems_before = stamp(path), stamp(problems)
    code, err = cli(capsys, "store", "rescore", "--store", f"sqlite:///{path}", "--catalog", str(catalog),
                    "--problems", str(problems), "--out", str(out))
    assert code == USAGE and "hint:" in err, err
    assert stamp(path) == store_before and stamp(problems) == problems_before
    assert _rows(path) == n == 6
    # the same command with a writable --out appends the re-scored records and writes the report
    code, err = cli(capsys, "store", "rescore", "--store", f"sqlite:///{path}", "--catalog", str(catalog),
                    "--problems", str(problems), "--out", str(tmp_path / "new" / "report.json"))
    assert code == 0 and _rows(path) == 2 * n and (tmp_path / "new" / "report.json").is_file(), err


def test_a_read_only_store_reads_and_cannot_write(store_url: str) -> None:
    """On both backends: a read-only open sees the records, and the database itself refuses an append."""
    from sqlalchemy.exc import DBAPIError

    with open_store(store_url) as st:
        st.append_many([synthetic_record(i, size=800).sealed(1_700_000_000_000 + i) for i in range(2)])
    with open_store(store_url, readonly=True) as ro:
        assert ro.count() == 2
        with pytest.raises(DBAPIError, match=r"read-only|readonly"):
            ro.append(synthetic_record(9, size=800))
    with open_store(store_url) as st:
        assert st.count() == 2
