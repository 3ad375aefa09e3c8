"""Bad input, tried as a new user would: every command answers with one ``error:`` line and its documented exit code
(README, "exit code" table), never a traceback, a hang or a silent success (issue 9 §1).

Each case runs ``python -m shoparena …`` as a real subprocess (the console entry point and its exception handling
are what is under test) with a timeout. The fixtures — a 300-product catalog, problems, a small store, a bank,
and the broken variants of each — are built once for the module through the library.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.gate import SAMPLES

DATA = Path(__file__).resolve().parents[1] / "data"
TIMEOUT_S = 60  # a case that runs longer hangs (each one takes about a second)

# The documented exit codes.
OK, FAILED, USAGE, DATA_ERROR, NOT_FOUND, BACKEND, INTERNAL, INTERRUPTED = 0, 1, 2, 3, 4, 5, 70, 130


class Fx(NamedTuple):
    """Paths of the module's fixtures (see :func:`fx`)."""

    root: Path
    port: int


def shoparena(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess, stdin closed; a hang fails the test through ``TimeoutExpired``."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200", **(env or {})}
    full_env.pop("SHOPARENA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "shoparena", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


def _tamper_store(path: Path) -> None:
    """Change one stored record body behind the append-only triggers (what an attacker with the file can do)."""
    conn = sqlite3.connect(path)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("UPDATE trajectory_records SET body = replace(body, '\"success\":true', '\"success\":false') "
                 "WHERE seq = (SELECT min(seq) FROM trajectory_records)")
    conn.execute("UPDATE trajectory_records SET body = replace(body, '\"agent_version\":\"v1\"', "
                 "'\"agent_version\":\"v2\"')")
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fx]:
    from shoparena.catalog.directory import create_catalog
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.store import open_store
    from shoparena.store.testing import synthetic_record
    from shoparena.tasks.banks import BankSet
    from shoparena.tasks.generator import generate_problems
    from shoparena.tasks.loader import dump_problems

    root = tmp_path_factory.mktemp("bad_input")
    index = create_catalog(generate_catalog(300, 0), root / "cat")
    create_catalog(generate_catalog(200, 1), root / "tiny")
    problems = generate_problems(index, n=30, seed=0)
    dump_problems(problems, root / "problems.jsonl")
    (root / "rollouts.jsonl").write_text("[]\n" * 3, encoding="utf-8")
    with open_store(f"sqlite:///{root / 'store.db'}") as st:
        st.append_many([synthetic_record(i, size=1500).sealed(1_700_000_000_000 + i) for i in range(4)])
    shutil.copy(root / "store.db", root / "tampered.db")
    _tamper_store(root / "tampered.db")
    conn = sqlite3.connect(root / "foreign.db")
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('ada', '123')")
    conn.commit()
    conn.close()
    (root / "random.db").write_bytes(os.urandom(8192))
    whole = (root / "store.db").read_bytes()
    (root / "half.db").write_bytes(whole[: len(whole) // 2])
    docs = (root / "cat" / "documents.jsonl.gz").read_bytes()
    (root / "truncated.jsonl.gz").write_bytes(docs[: len(docs) // 2])
    (root / "problems.jsonl.gz").write_bytes(gzip.compress((root / "problems.jsonl").read_bytes())[:200])
    (root / "garbage.bin").write_bytes(os.urandom(3000))
    (root / "no_valid_line.jsonl").write_text("{not json\n[1, 2]\n", encoding="utf-8")
    (root / "a_dir").mkdir()
    (root / "existing.jsonl").write_text("keep me\n", encoding="utf-8")
    BankSet.build(problems, seed=0).save(root / "bank")
    shutil.copytree(root / "bank", root / "tampered_bank")
    bank_file = next((root / "tampered_bank").glob("problems-*.jsonl"))
    text = bank_file.read_text(encoding="utf-8")
    bank_file.write_text(text.replace("a", "A", 1), encoding="utf-8")
    shutil.copy(SAMPLES / "leak_phrase.py", root / "leaky_agent.py")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        yield Fx(root, busy.getsockname()[1])
    finally:
        busy.close()


class Case(NamedTuple):
    name: str
    args: str
    """Arguments, split on spaces after ``{f}`` (the fixture directory) and ``{port}`` are filled in."""
    code: int


CASES = [
    # usage errors of every kind (typer's vendored click exceptions)
    Case("missing option", "catalog generate", USAGE),
    Case("no such option", "catalog generate --out {f}/x --bogus", USAGE),
    Case("no such command", "catalogue", USAGE),
    Case("size 0", "catalog generate --size 0 --out {f}/x", USAGE),
    Case("n 0", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react -n 0", USAGE),
    Case("page not a number", "search --catalog {f}/cat violin --page abc", USAGE),
    Case("page 0", "search --catalog {f}/cat violin --page 0", USAGE),
    Case("missing path", "problems stats {f}/nowhere.jsonl", NOT_FOUND),
    # values that make no sense
    Case("limit 0", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --limit 0", USAGE),
    Case("limit -1", "validate --catalog {f}/cat --problems {f}/problems.jsonl --agent react --limit -1", USAGE),
    Case("timeout 0", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --timeout 0", USAGE),
    Case("workers 0", "validate --catalog {f}/cat --problems {f}/problems.jsonl --agent react --workers 0", USAGE),
    Case("temperature nan", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --temperature nan",
         USAGE),
    Case("temperature inf", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --temperature inf",
         USAGE),
    Case("temperature -1", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --temperature -1",
         USAGE),
    Case("suite size 0", "score --catalog {f}/cat --problems {f}/problems.jsonl --rollouts {f}/rollouts.jsonl "
         "--suite-size 0", USAGE),
    Case("suite size below the problems", "score --catalog {f}/cat --problems {f}/problems.jsonl --rollouts "
         "{f}/rollouts.jsonl --suite-size 3", USAGE),
    Case("k above n", "score --catalog {f}/cat --problems {f}/problems.jsonl --rollouts {f}/rollouts.jsonl --k 5",
         USAGE),
    Case("status BOGUS", "store export --store sqlite:///{f}/store.db --out {f}/x.jsonl --status BOGUS", USAGE),
    Case("export limit 0", "store export --store sqlite:///{f}/store.db --out {f}/x.jsonl --limit 0", USAGE),
    Case("empty buckets", "problems generate --catalog {f}/cat --out {f}/x.jsonl --buckets ,", USAGE),
    Case("unknown scoring mode", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --mode bogus",
         USAGE),
    Case("in-memory store", "validate --catalog {f}/cat --problems {f}/problems.jsonl --agent react "
         "--store sqlite://", USAGE),
    Case("in-memory simulation store", "arena simulate --store sqlite://", USAGE),
    Case("bank fractions", "arena banks build --problems {f}/problems.jsonl --out {f}/b2 --held-out-fraction 0.7 "
         "--open-fraction 0.7", USAGE),
    Case("tiny catalog", "problems generate --catalog {f}/tiny --out {f}/tiny.jsonl --n 600", DATA_ERROR),
    # output paths that exist or are directories, directories as input files
    Case("export over a directory", "store export --store sqlite:///{f}/store.db --out {f}/a_dir", USAGE),
    Case("export over a file", "store export --store sqlite:///{f}/store.db --out {f}/existing.jsonl", USAGE),
    Case("problems out a directory", "problems generate --catalog {f}/cat --out {f}/a_dir", USAGE),
    Case("catalog out a file", "catalog generate --size 300 --out {f}/existing.jsonl", USAGE),
    Case("import a directory", "catalog import {f}/a_dir --out {f}/imp", USAGE),
    Case("rollouts a directory", "score --catalog {f}/cat --problems {f}/problems.jsonl --rollouts {f}/a_dir",
         USAGE),
    Case("problems a directory", "problems stats {f}/a_dir", NOT_FOUND),
    Case("agent a directory", "submit --check {f}/a_dir", NOT_FOUND),
    Case("store a directory", "store stats --store sqlite:///{f}/a_dir", USAGE),
    # corrupted, truncated, random, foreign input
    Case("truncated gzip catalog", "catalog import {f}/truncated.jsonl.gz --out {f}/imp2", DATA_ERROR),
    Case("truncated gzip problems", "problems stats {f}/problems.jsonl.gz", DATA_ERROR),
    Case("random bytes problems", "problems stats {f}/garbage.bin", DATA_ERROR),
    Case("random bytes rollouts", "score --catalog {f}/cat --problems {f}/problems.jsonl --rollouts {f}/garbage.bin",
         DATA_ERROR),
    Case("no valid line over a catalog", "catalog import {f}/no_valid_line.jsonl --out {f}/tiny --force",
         DATA_ERROR),
    Case("import over a catalog", "catalog import {f}/cat/documents.jsonl.gz --out {f}/tiny", USAGE),
    Case("random-bytes store", "store stats --store sqlite:///{f}/random.db", DATA_ERROR),
    Case("half-truncated store", "store verify --store sqlite:///{f}/half.db", DATA_ERROR),
    Case("foreign store", "store export --store sqlite:///{f}/foreign.db --out {f}/f.jsonl", DATA_ERROR),
    Case("missing store", "store stats --store sqlite:///{f}/nowhere.db", NOT_FOUND),
    Case("unreachable store", "store stats --store postgresql://nobody@127.0.0.1:1/x", NOT_FOUND),
    Case("bad store URL", "store stats --store bogus://x", USAGE),
    Case("not a catalog", "search --catalog {f}/a_dir violin", NOT_FOUND),
    Case("unreachable arena", "arena validator --api http://127.0.0.1:1 --catalog {f}/cat "
         "--store sqlite:///{f}/v.db --max-items 1", BACKEND),
    # servers: ports out of range or in use
    Case("catalog port out of range", "catalog serve --catalog {f}/cat --port 70000", USAGE),
    Case("catalog port in use", "catalog serve --catalog {f}/cat --port {port}", USAGE),
    Case("llm port in use", "serve --model policy:expert --port {port}", USAGE),
    Case("llm port -1", "llm serve --model policy:expert --port -1", USAGE),
    # tampered or rejected: the exit code a command returns reaches the shell
    Case("tampered store", "store verify --store sqlite:///{f}/tampered.db", DATA_ERROR),
    Case("tampered bank", "arena banks verify {f}/tampered_bank", DATA_ERROR),
    Case("rejected submission", f"submit --check {{f}}/leaky_agent.py --banks {DATA / 'shoppingbench'} "
         "--exit-code --json", FAILED),
    Case("strict search error", "search --catalog {f}/cat violin --price abc --mode strict", USAGE),
    # a single-valued option twice: click would keep the last one and succeed
    Case("repeated option", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --seed 1 --seed 2",
         USAGE),
    Case("repeated model", "run --catalog {f}/cat --problems {f}/problems.jsonl --agent react --model policy:expert "
         "--model policy:random --limit 1", USAGE),
    Case("flag and its negation", f"submit --no-check --check {{f}}/leaky_agent.py --banks {DATA / 'shoppingbench'} "
         "--json", USAGE),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_error_line_and_its_exit_code(case: Case, fx: Fx) -> None:
    args = case.args.format(f=fx.root, port=fx.port).split()
    result = shoparena(*args, cwd=fx.root)
    output = result.stdout + result.stderr
    assert result.returncode == case.code, output
    assert "Traceback" not in output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "internal error" not in errors[0]


def test_good_input_still_succeeds(fx: Fx) -> None:
    """The same fixtures with sane values: the checks above refuse the bad value, not the command."""
    ok = shoparena("store", "verify", "--store", f"sqlite:///{fx.root / 'store.db'}", cwd=fx.root)
    assert ok.returncode == OK and "4 records verified" in ok.stdout, ok.stderr
    banks = shoparena("arena", "banks", "verify", str(fx.root / "bank"), cwd=fx.root)
    assert banks.returncode == OK, banks.stdout + banks.stderr


def test_read_commands_never_modify_a_foreign_or_damaged_sqlite_file(fx: Fx) -> None:
    for name in ("foreign.db", "random.db", "half.db"):
        path = fx.root / name
        before = path.read_bytes()
        for command in (["stats"], ["verify"], ["export", "--out", str(fx.root / f"{name}.jsonl")]):
            result = shoparena("store", *command, "--store", f"sqlite:///{path}", cwd=fx.root)
            assert result.returncode == DATA_ERROR and "Traceback" not in result.stderr, result.stderr
        assert path.read_bytes() == before, f"{name} was modified"
        assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
        assert not (fx.root / f"{name}.jsonl").exists()
    conn = sqlite3.connect(fx.root / "foreign.db")
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == [("contacts",)]
    conn.close()


def test_a_failed_import_leaves_the_catalog_it_would_replace(fx: Fx, tmp_path: Path) -> None:
    catalog = tmp_path / "cat"
    shutil.copytree(fx.root / "cat", catalog)
    meta = (catalog / "index" / "meta.json").read_bytes()
    result = shoparena("catalog", "import", str(fx.root / "no_valid_line.jsonl"), "--out", str(catalog), "--force",
                       cwd=tmp_path)
    assert result.returncode == DATA_ERROR and "--allow-empty" in result.stderr
    assert (catalog / "index" / "meta.json").read_bytes() == meta
    assert sorted(p.name for p in catalog.iterdir()) == ["documents.jsonl.gz", "index"]  # no temp dir left
    found = shoparena("search", "--catalog", str(catalog), "set", "--json", cwd=tmp_path)
    assert found.returncode == OK and found.stdout.strip().startswith("[")
    # --force replaces it for real, and drops the documents that no longer match the index
    source = tmp_path / "docs.jsonl.gz"
    shutil.copy(fx.root / "tiny" / "documents.jsonl.gz", source)
    replaced = shoparena("catalog", "import", str(source), "--out", str(catalog), "--force", cwd=tmp_path)
    assert replaced.returncode == OK, replaced.stderr
    assert not (catalog / "documents.jsonl.gz").exists()
    assert (catalog / "source.txt").read_text(encoding="utf-8").strip() == str(source.resolve())
    info = shoparena("catalog", "info", "--catalog", str(catalog), "--json", cwd=tmp_path)
    assert '"n_docs": 200' in info.stdout


def test_refusals_write_nothing(fx: Fx) -> None:
    """A refused export keeps the existing file; a refused generation writes no problem file."""
    existing = fx.root / "existing.jsonl"
    assert existing.read_text(encoding="utf-8") == "keep me\n"  # after the "export over a file" case, if it ran
    refused = shoparena("store", "export", "--store", f"sqlite:///{fx.root / 'store.db'}", "--out", str(existing),
                        cwd=fx.root)
    assert refused.returncode == USAGE and existing.read_text(encoding="utf-8") == "keep me\n"
    forced = shoparena("store", "export", "--store", f"sqlite:///{fx.root / 'store.db'}", "--out",
                       str(fx.root / "forced.jsonl"), "--force", cwd=fx.root)
    assert forced.returncode == OK and len((fx.root / "forced.jsonl").read_text().splitlines()) == 4
    out = fx.root / "tiny_refused.jsonl"
    tiny = shoparena("problems", "generate", "--catalog", str(fx.root / "tiny"), "--out", str(out), "--n", "600",
                     cwd=fx.root)
    assert tiny.returncode == DATA_ERROR and "share ground truths" in tiny.stderr and not out.exists()


def test_submit_without_exit_code_reports_the_verdict_and_exits_0(fx: Fx) -> None:
    result = shoparena("submit", "--check", str(fx.root / "leaky_agent.py"), "--banks", str(DATA / "shoppingbench"),
                       "--json", cwd=fx.root)
    assert result.returncode == OK and '"accepted": false' in result.stdout


def test_internal_errors_and_interrupts(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    """A bug is one ``internal error`` line, exit 70 (the traceback with SHOPARENA_DEBUG=1); Ctrl-C exits 130."""
    import shoparena.cli.search as search_cli
    from shoparena.cli import main

    def boom(_catalog: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.delenv("SHOPARENA_DEBUG", raising=False)
    monkeypatch.setattr(search_cli, "index_path", boom)
    with pytest.raises(SystemExit) as exc:
        main(["search", "--catalog", str(tmp_path), "x"])
    assert exc.value.code == INTERNAL
    err = capsys.readouterr().err
    assert "error: internal error: RuntimeError: kaboom" in err and "SHOPARENA_DEBUG=1" in err
    monkeypatch.setenv("SHOPARENA_DEBUG", "1")
    with pytest.raises(RuntimeError, match="kaboom"):
        main(["search", "--catalog", str(tmp_path), "x"])

    def invalid(_catalog: object) -> None:
        from shoparena.validator import RunConfig

        RunConfig(agent="react", model="policy:expert", score_mode="bogus")  # type: ignore[arg-type]

    monkeypatch.delenv("SHOPARENA_DEBUG")
    monkeypatch.setattr(search_cli, "index_path", invalid)
    with pytest.raises(SystemExit) as exc:
        main(["search", "--catalog", str(tmp_path), "x"])
    assert exc.value.code == USAGE and "error: invalid score_mode" in capsys.readouterr().err

    def interrupted(_catalog: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(search_cli, "index_path", interrupted)
    with pytest.raises(SystemExit) as exc:
        main(["search", "--catalog", str(tmp_path), "x"])
    assert exc.value.code == INTERRUPTED


def test_cli_choices_match_the_store_types() -> None:
    from typing import get_args

    from shoparena.cli.store import AXES, STATUSES
    from shoparena.store.types import Axis, Status

    assert STATUSES == get_args(Status) and AXES == get_args(Axis)


def test_a_bare_group_prints_its_help_not_an_empty_error(fx: Fx) -> None:
    result = shoparena("store", cwd=fx.root)
    assert result.returncode == USAGE and "Usage" in result.stdout
    assert "error" not in result.stderr and "Traceback" not in result.stderr
