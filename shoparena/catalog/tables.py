"""Memory-mapped on-disk tables the search index is made of: byte-string tables and hash lookups.

Everything is a flat file (``.bin`` bytes, ``.npy`` arrays) opened with ``mmap`` so that a second process serving
the same index shares the page cache instead of copying it: read-only search replicas cost almost no extra RAM.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

__all__ = ["BlobWriter", "HashLookup", "StringTable", "hash64"]


def hash64(key: bytes) -> int:
    """A stable 64-bit hash (BLAKE2b-64): the same key hashes the same in every process and version."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


class BlobWriter:
    """Streams byte strings to ``NAME.bin`` and records their offsets in ``NAME.off.npy`` on close."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self._fh: BinaryIO = open(directory / f"{name}.bin", "wb")
        self._buf = bytearray()
        self._offsets = array("q", [0])
        self._pos = 0

    def add(self, data: bytes) -> None:
        self._buf += data
        self._pos += len(data)
        self._offsets.append(self._pos)
        if len(self._buf) > 1 << 20:
            self._fh.write(self._buf)
            self._buf.clear()

    def close(self) -> None:
        self._fh.write(self._buf)
        self._fh.close()
        np.save(self.directory / f"{self.name}.off.npy", np.asarray(self._offsets, dtype=np.int64))


class StringTable:
    """Read side of a :class:`BlobWriter` table: ``table[i]`` is the i-th byte string."""

    def __init__(self, directory: Path, name: str) -> None:
        self.offsets: np.ndarray = np.load(directory / f"{name}.off.npy", mmap_mode="r")
        path = directory / f"{name}.bin"
        size = path.stat().st_size
        self.blob: np.ndarray = (
            np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, dtype=np.uint8)
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes:
        start, end = self.offsets[i], self.offsets[i + 1]
        return self.blob[start:end].tobytes()

    @staticmethod
    def write(directory: Path, name: str, items: Iterable[bytes]) -> None:
        writer = BlobWriter(directory, name)
        for item in items:
            writer.add(item)
        writer.close()


class HashLookup:
    """Exact key → row lookup through a sorted array of 64-bit hashes (binary search, then a byte compare).

    Written as ``NAME.hash.npy`` (sorted hashes) and ``NAME.row.npy`` (the row of each hash).
    """

    def __init__(self, directory: Path, name: str, keys: StringTable) -> None:
        self.hashes: np.ndarray = np.load(directory / f"{name}.hash.npy", mmap_mode="r")
        self.rows: np.ndarray = np.load(directory / f"{name}.row.npy", mmap_mode="r")
        self.keys = keys

    def find(self, key: bytes) -> int:
        """The row holding ``key``, or -1."""
        h = np.uint64(hash64(key))
        i = int(np.searchsorted(self.hashes, h))
        n = len(self.hashes)
        while i < n and self.hashes[i] == h:
            row = int(self.rows[i])
            if self.keys[row] == key:
                return row
            i += 1
        return -1

    @staticmethod
    def write(directory: Path, name: str, keys: list[bytes]) -> None:
        hashes = np.fromiter((hash64(k) for k in keys), dtype=np.uint64, count=len(keys))
        order = np.argsort(hashes, kind="stable")
        np.save(directory / f"{name}.hash.npy", hashes[order])
        np.save(directory / f"{name}.row.npy", order.astype(np.int32))
