"""Small I/O helpers shared by every package: transparent gzip, JSONL streaming, atomic durable writes."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a text file for reading, transparently decompressing ``.gz``; decoding is UTF-8 strict."""
    p = Path(path)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", newline="\n")
    return open(p, encoding="utf-8", newline="\n")


def iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_bytes)`` for each non-empty line (1-based numbers), ``.gz`` aware.

    Bytes, not text, so one undecodable line is reported as bad data instead of aborting the stream.
    """
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            line = raw.strip()
            if line:
                yield n, line


def dumps(obj: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text (orjson; non-str keys allowed)."""
    opt = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    return orjson.dumps(obj, option=opt).decode()


def loads(data: str | bytes) -> Any:
    return orjson.loads(data)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Write to a temp file beside ``path``, fsync, then rename over it: readers never see a half file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
        with contextlib.suppress(OSError):
            dfd = os.open(p.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class JsonlWriter:
    """Row-at-a-time JSONL writer over an open binary file (gzip with a fixed header for ``.gz`` names)."""

    def __init__(self, raw: IO[bytes], gz: bool) -> None:
        self._raw = raw
        self._fh: IO[bytes] = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) if gz else raw
        self.count = 0

    def write(self, row: Any) -> None:
        self._fh.write(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS))
        self._fh.write(b"\n")
        self.count += 1

    def close(self) -> None:
        if self._fh is not self._raw:
            self._fh.close()


@contextlib.contextmanager
def jsonl_writer(path: str | os.PathLike[str]) -> Iterator[JsonlWriter]:
    """Atomically write a JSONL file row by row (see :func:`write_jsonl`)."""
    p = Path(path)
    with atomic_write(p, "wb") as raw:
        writer = JsonlWriter(raw, p.suffix == ".gz")
        try:
            yield writer
        finally:
            writer.close()


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> int:
    """Atomically write rows as JSONL (gzip when the name ends in ``.gz``, with a fixed mtime so the same
    rows give the same bytes). Returns the row count."""
    with jsonl_writer(path) as writer:
        for row in rows:
            writer.write(row)
    return writer.count
