"""Streaming JSONL and Parquet export: byte-exact round trips, filters, atomic files, flat memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shoparena.errors import ConfigError
from shoparena.store import RecordQuery, TrajectoryStore
from shoparena.store.export import (
    JSON_FIELDS,
    export_jsonl,
    export_parquet,
    export_records,
    read_jsonl,
    read_parquet,
)
from shoparena.store.types import body_problems, canonical_json
from tests.store.conftest import rec


@pytest.fixture
def stored(store: TrajectoryStore) -> TrajectoryStore:
    store.append_many([rec(i) for i in range(25)])
    return store


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz", "out.parquet"])
def test_export_round_trip(stored: TrajectoryStore, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert export_records(stored, out) == 25
    back = list(read_parquet(out) if name.endswith(".parquet") else read_jsonl(out))
    assert back == list(stored.query())
    assert all(body_problems(r.model_dump()) == [] for r in back)  # every id still the hash of its content


def test_jsonl_lines_are_the_stored_canonical_bytes(stored: TrajectoryStore, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    export_jsonl(stored, out)
    lines = out.read_bytes().splitlines()
    assert lines == list(stored.bodies())
    assert lines == [canonical_json(r.model_dump()) for r in stored.query()]


def test_gzip_export_is_reproducible(stored: TrajectoryStore, tmp_path: Path) -> None:
    export_jsonl(stored, tmp_path / "a.jsonl.gz")
    export_jsonl(stored, tmp_path / "b.jsonl.gz")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()


def test_parquet_keeps_nested_fields_as_json_strings(stored: TrajectoryStore, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    export_parquet(stored, out, row_group=10)
    f = pq.ParquetFile(out)
    assert f.metadata.num_rows == 25 and f.metadata.num_row_groups == 3
    schema = f.schema_arrow
    for name in JSON_FIELDS:
        assert str(schema.field(name).type) == "string"
    assert str(schema.field("judge_score").type) == "double" and str(schema.field("success").type) == "bool"


def test_export_with_a_filter_and_an_empty_result(stored: TrajectoryStore, tmp_path: Path) -> None:
    n = export_records(stored, tmp_path / "b.parquet", RecordQuery(axis="B"))
    assert n == stored.count(axis="B") > 0
    assert {r.axis for r in read_parquet(tmp_path / "b.parquet")} == {"B"}
    assert export_records(stored, tmp_path / "none.parquet", RecordQuery(problem_id="nope")) == 0
    assert list(read_parquet(tmp_path / "none.parquet")) == []
    assert export_records(stored, tmp_path / "none.jsonl", RecordQuery(problem_id="nope")) == 0
    assert (tmp_path / "none.jsonl").read_bytes() == b""


def test_unknown_suffix_is_a_config_error(stored: TrajectoryStore, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="format"):
        export_records(stored, tmp_path / "out.csv")


def test_a_failed_export_leaves_no_file(stored: TrajectoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    out = tmp_path / "exports" / "out.jsonl"
    out.parent.mkdir()
    out.write_text("previous export\n")
    first = next(iter(stored.bodies()))

    def broken(*_a: object, **_k: object) -> object:
        yield first
        raise OSError("connection lost")

    monkeypatch.setattr(stored, "bodies", broken)
    with pytest.raises(OSError, match="connection lost"):
        export_jsonl(stored, out)
    assert out.read_text() == "previous export\n"
    assert [p.name for p in out.parent.iterdir()] == ["out.jsonl"]


def test_export_streams_in_flat_memory(store: TrajectoryStore, tmp_path: Path) -> None:
    """~19 MB of records exported while Python holds only a few chunks of them at a time."""
    for k in range(0, 1000, 250):
        store.append_many([rec(i, size=20_000) for i in range(k, k + 250)])
    total = sum(len(b) for b in store.bodies())
    tracemalloc.start()
    try:
        parquet = lambda s, o: export_parquet(s, o, row_group=128)  # noqa: E731
        for name, writer in (("out.jsonl", export_jsonl), ("out.parquet", parquet)):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            assert writer(store, tmp_path / name) == 1000
            peak = tracemalloc.get_traced_memory()[1] - base
            assert peak < total / 3, (name, peak, total)
    finally:
        tracemalloc.stop()
    assert (tmp_path / "out.jsonl").stat().st_size == total + 1000
