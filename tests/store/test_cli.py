"""``shoparena store export | stats | verify`` over a filled store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoparena.cli.store import app
from shoparena.errors import NotFoundError
from shoparena.store import open_store
from shoparena.store.export import read_jsonl, read_parquet
from tests.store.conftest import rec

runner = CliRunner()


@pytest.fixture
def url(store_url: str) -> str:
    with open_store(store_url) as st:
        st.append_many([rec(i).sealed(1_700_000_000_000 + i * 60_000) for i in range(30)])
    return store_url


@pytest.mark.parametrize("name", ["out.jsonl", "out.parquet"])
def test_export_all(url: str, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    result = runner.invoke(app, ["export", "--store", url, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"out": str(out), "records": 30}
    with open_store(url) as st:
        assert list(read_parquet(out) if name.endswith(".parquet") else read_jsonl(out)) == list(st.query())


def test_export_with_filters(url: str, tmp_path: Path) -> None:
    out = tmp_path / "f.jsonl"
    args = ["export", "--store", url, "--out", str(out), "--agent", "agent-1", "--agent", "agent-2", "--success",
            "--since", "2023-11-14T22:15:00", "--until", str(1_700_000_000_000 + 25 * 60_000), "--min-judge", "0.3",
            "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    got = list(read_jsonl(out))
    with open_store(url) as st:
        want = [r for r in st.query() if r.agent_id in ("agent-1", "agent-2") and r.success
                and 1_699_999_700_000 <= r.created_at < 1_700_000_000_000 + 25 * 60_000
                and (r.judge_score or 0) >= 0.3]
    assert got == want and json.loads(result.stdout)["records"] == len(want)


def test_stats(url: str) -> None:
    result = runner.invoke(app, ["stats", "--store", url, "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["records"] == 30 and sum(stats["by_status"].values()) == 30
    assert set(stats) >= {"by_status", "by_axis", "by_bucket", "by_pipeline"}
    text = runner.invoke(app, ["stats", "--store", url])
    flat = " ".join(text.stdout.split())
    assert text.exit_code == 0 and "30 records" in flat and "by axis" in flat


def test_verify(url: str) -> None:
    result = runner.invoke(app, ["verify", "--store", url])
    assert result.exit_code == 0 and "30 records verified" in result.stdout


def test_read_commands_do_not_create_a_missing_sqlite_store(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = runner.invoke(app, ["stats", "--store", f"sqlite:///{missing}"])
    assert isinstance(result.exception, NotFoundError)
    assert not missing.exists()
