"""The one Parquet-with-JSON-columns writer (:mod:`shoparena._parquet`): nested values stored as JSON strings
(never Arrow structs), decoded back to the same rows, deterministic bytes, row groups, atomic writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from shoparena import _parquet

COLUMNS: dict[str, Any] = {"id": pa.string(), "n": pa.int64(), "args": _parquet.JSON, "tags": _parquet.JSON}
ROWS = [{"id": "a", "n": 1, "args": {"q": "bow", "filters": {"price": [1, None]}}, "tags": ["x"]},
        {"id": "b", "n": 2, "args": {"other": [{"color": "red"}]}, "tags": None}]


def test_nested_fields_are_json_strings_and_round_trip(tmp_path: Path) -> None:
    schema = _parquet.json_schema(COLUMNS, fmt="test/1")
    assert _parquet.write_rows(tmp_path / "t.parquet", schema, ROWS) == 2
    arrow = pq.read_schema(tmp_path / "t.parquet")
    assert arrow.field("args").type == pa.string() and arrow.field("n").type == pa.int64()
    assert arrow.metadata[b"shoparena.json_fields"] == b"args,tags"
    assert arrow.metadata[b"shoparena.format"] == b"test/1"
    assert _parquet.read_rows(tmp_path / "t.parquet") == ROWS


def test_same_rows_same_bytes_and_custom_encoder(tmp_path: Path) -> None:
    schema = _parquet.json_schema(COLUMNS, fmt="test/1")
    _parquet.write_rows(tmp_path / "a.parquet", schema, ROWS)
    _parquet.write_rows(tmp_path / "b.parquet", schema, ROWS)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    _parquet.write_rows(tmp_path / "c.parquet", schema, ROWS, encode=lambda v: '{"fixed": true}')
    assert _parquet.read_rows(tmp_path / "c.parquet")[0]["args"] == {"fixed": True}


def test_row_groups_empty_files_and_no_temp_left(tmp_path: Path) -> None:
    schema = _parquet.json_schema(COLUMNS, fmt="test/1", nullable={"id": False})
    rows = [{"id": str(i), "n": i, "args": {"i": i}, "tags": []} for i in range(5)]
    assert _parquet.write_rows(tmp_path / "g.parquet", schema, rows, row_group=2) == 5
    assert pq.ParquetFile(tmp_path / "g.parquet").num_row_groups == 3
    assert list(_parquet.iter_rows(tmp_path / "g.parquet", batch_size=2)) == rows
    assert _parquet.write_rows(tmp_path / "e.parquet", schema, []) == 0
    assert _parquet.read_rows(tmp_path / "e.parquet") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.parquet", "g.parquet"]
