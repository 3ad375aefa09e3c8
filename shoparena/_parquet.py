"""One Parquet writer and reader for rows with nested fields: lists and dicts are stored as JSON string columns.

Arrow would otherwise infer (and unify across rows) struct types for tool arguments, schemas and messages. The
schema's metadata names the JSON columns (``shoparena.json_fields``) and the format (``shoparena.format``), so
:func:`iter_rows` decodes them without knowing the writer. Writes are atomic (temp file renamed into place),
zstd-compressed, with no timestamps: the same rows give the same bytes. Used by the store export and the corpus
exports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from shoparena._io import atomic_write

__all__ = ["JSON", "iter_rows", "json_schema", "read_rows", "write_rows"]

#: Column type marker: a list/dict value stored as a JSON string.
JSON = "json"
FIELDS_KEY = b"shoparena.json_fields"
FORMAT_KEY = b"shoparena.format"


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def json_schema(columns: Mapping[str, pa.DataType | str], *, fmt: str,
                nullable: Mapping[str, bool] | None = None) -> pa.Schema:
    """An Arrow schema from ``{column: arrow type or JSON}``; JSON columns become strings named in the metadata."""
    json_fields = [c for c, t in columns.items() if t == JSON]
    fields = [pa.field(c, pa.string() if t == JSON else t, nullable=(nullable or {}).get(c, True))
              for c, t in columns.items()]
    return pa.schema(fields, metadata={FIELDS_KEY: ",".join(json_fields).encode(), FORMAT_KEY: fmt.encode()})


def json_fields(schema: pa.Schema) -> list[str]:
    return [c for c in (schema.metadata or {}).get(FIELDS_KEY, b"").decode().split(",") if c]


def write_rows(path: str | os.PathLike[str], schema: pa.Schema, rows: Iterable[Mapping[str, Any]], *,
               encode: Callable[[Any], str] = _dumps, row_group: int = 1024) -> int:
    """Write ``rows`` (dicts holding the schema's columns; a missing key is null) to ``path`` in row groups of
    ``row_group``, JSON columns encoded with ``encode`` (compact orjson by default). Returns the row count."""
    cols = set(json_fields(schema))
    n = 0
    with atomic_write(path, "wb") as raw, pq.ParquetWriter(raw, schema, compression="zstd") as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append({c: encode(row[c]) if c in cols and row.get(c) is not None else row.get(c)
                          for c in schema.names})
            if len(batch) >= row_group:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n, batch = n + len(batch), []
        if batch or n == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n


def iter_rows(path: str | os.PathLike[str], *, batch_size: int = 1024) -> Iterator[dict[str, Any]]:
    """Rows of a Parquet file written by :func:`write_rows`, JSON columns decoded, streamed by batch."""
    pf = pq.ParquetFile(path)
    cols = json_fields(pf.schema_arrow)
    for batch in pf.iter_batches(batch_size=batch_size):
        for row in batch.to_pylist():
            for c in cols:
                if row.get(c) is not None:
                    row[c] = orjson.loads(row[c])
            yield row


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of :func:`iter_rows`."""
    return list(iter_rows(path))
