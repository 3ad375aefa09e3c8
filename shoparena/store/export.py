"""Streaming export of stored records to JSONL and Parquet, and readers for both.

JSONL: one record per line, the stored canonical JSON byte for byte (``.jsonl.gz`` is gzipped with a fixed
header, so the same records give the same bytes). Parquet (pyarrow, zstd): scalar fields as typed columns;
the nested fields (trace, messages, call log, outcome, verdict, pipeline) as canonical JSON strings, so Arrow
never infers or unifies struct types across rows and a record read back hashes to its id. Both stream in
batches (memory stays flat for millions of records) and write atomically (a temp file renamed into place).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import orjson
import pyarrow as pa

from shoparena import _parquet
from shoparena._io import atomic_write, iter_lines
from shoparena.errors import ConfigError
from shoparena.store.store import TrajectoryStore
from shoparena.store.types import RecordQuery, TrajectoryRecord, canonical_json

#: Fields stored in Parquet as canonical JSON strings.
JSON_FIELDS = ("steps", "messages", "call_log", "outcome", "judge", "pipeline")
_SCALAR_TYPES = {"created_at": pa.int64(), "started_at": pa.int64(), "finished_at": pa.int64(),
                 "success": pa.bool_(), "judge_score": pa.float64(), "coefficient": pa.float64()}
PARQUET_SCHEMA = _parquet.json_schema(
    {name: _parquet.JSON if name in JSON_FIELDS else _SCALAR_TYPES.get(name, pa.string())
     for name in TrajectoryRecord.model_fields},
    fmt="trajectory/1",
    nullable={name: type(None) in get_args(field.annotation) for name, field in TrajectoryRecord.model_fields.items()},
)


def export_records(store: TrajectoryStore, out: str | os.PathLike[str], query: RecordQuery | None = None) -> int:
    """Export the matching records to ``out`` by its suffix (``.jsonl``, ``.jsonl.gz``, ``.parquet``)."""
    name = Path(out).name
    if name.endswith((".jsonl", ".jsonl.gz")):
        return export_jsonl(store, out, query)
    if name.endswith(".parquet"):
        return export_parquet(store, out, query)
    raise ConfigError(f"cannot tell the export format of {name!r}", hint="name it .jsonl, .jsonl.gz or .parquet")


def export_jsonl(store: TrajectoryStore, out: str | os.PathLike[str], query: RecordQuery | None = None) -> int:
    """One canonical-JSON record per line; returns the count."""
    n = 0
    with atomic_write(out, "wb") as raw:
        fh: Any = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) if str(out).endswith(".gz") else raw
        for body in store.bodies(query):
            fh.write(body)
            fh.write(b"\n")
            n += 1
        if fh is not raw:
            fh.close()
    return n


def _canonical(value: Any) -> str:
    return canonical_json(value).decode()


def parquet_row(body: dict[str, Any]) -> dict[str, Any]:
    """A record body as a Parquet row (nested fields as canonical JSON strings)."""
    return {k: (None if body[k] is None else _canonical(body[k])) if k in JSON_FIELDS else body[k]
            for k in PARQUET_SCHEMA.names}


def export_parquet(store: TrajectoryStore, out: str | os.PathLike[str], query: RecordQuery | None = None,
                   *, row_group: int = 1024) -> int:
    """Records as Parquet row groups of ``row_group`` rows (:mod:`shoparena._parquet`); returns the count."""
    rows = (orjson.loads(body) for body in store.bodies(query))
    return _parquet.write_rows(out, PARQUET_SCHEMA, rows, encode=_canonical, row_group=row_group)


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[TrajectoryRecord]:
    """Records from an exported JSONL file (``.gz`` aware), streamed."""
    for _n, line in iter_lines(path):
        yield TrajectoryRecord.model_validate(orjson.loads(line))


def read_parquet(path: str | os.PathLike[str], *, batch_size: int = 1024) -> Iterator[TrajectoryRecord]:
    """Records from an exported Parquet file, streamed by batch."""
    for row in _parquet.iter_rows(path, batch_size=batch_size):
        yield TrajectoryRecord.model_validate(row)
