"""Sealed manifests: a JSON body hashed over itself, with the sha256 of the files it vouches for.

One helper for every manifest that is written once and verified on read (the problem banks, the corpus split, the
corpus export): :func:`canonical_hash` (sha256 of sorted-key compact JSON), :func:`seal` / :func:`seal_errors` (the
self-hash under a caller-chosen key), :func:`sha256_file` / :func:`file_hashes` / :func:`file_errors` (every
changed, missing or unlisted file, each named) and :func:`write_json` / :func:`read_json` (atomic, sorted keys,
indented, so the same manifest gives the same bytes). Each caller keeps its own JSON shape.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Container, Mapping
from pathlib import Path
from typing import Any

import orjson

from shoparena._io import atomic_write
from shoparena.errors import DataError, NotFoundError

__all__ = ["canonical_hash", "file_errors", "file_hashes", "read_json", "seal", "seal_errors", "sha256_bytes",
           "sha256_file", "to_bytes", "weights_sha256", "write_json"]

_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 hex of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_sha256(model_dir: str | os.PathLike[str]) -> str | None:
    """sha256 over a checkpoint's weight files (``*.safetensors`` / ``*.bin``: names and bytes, sorted by name);
    ``None`` when the directory holds none."""
    root = Path(model_dir)
    files = sorted(p for p in root.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def canonical_hash(obj: Any) -> str:
    """sha256 hex of ``obj`` as compact JSON with sorted keys."""
    return sha256_bytes(orjson.dumps(obj, option=_CANONICAL))


def seal(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``body`` plus ``key`` = :func:`canonical_hash` of ``body`` (without ``key``)."""
    rest = {k: v for k, v in body.items() if k != key}
    return {**rest, key: canonical_hash(rest)}


def seal_errors(manifest: Mapping[str, Any], key: str) -> list[str]:
    """``["<key> does not match the manifest"]`` when the self-hash is wrong or absent, else ``[]``."""
    rest = {k: v for k, v in manifest.items() if k != key}
    return [] if manifest.get(key) == canonical_hash(rest) else [f"{key} does not match the manifest"]


def file_hashes(root: str | os.PathLike[str], *, exclude: Container[str] = ()) -> dict[str, dict[str, Any]]:
    """``{relative/posix/path: {"sha256", "bytes"}}`` of every file under ``root`` (sorted), skipping names in
    ``exclude`` and anything under a dot-name (temp files of atomic writes)."""
    base = Path(root)
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(base.rglob("*")):
        rel = f.relative_to(base)
        if not f.is_file() or rel.as_posix() in exclude or any(p.startswith(".") for p in rel.parts):
            continue
        out[rel.as_posix()] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
    return out


def file_errors(listed: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """Every file that differs between the manifest's ``listed`` entries and ``actual`` ones (both
    ``{path: {"sha256": …}}`` or ``{path: sha256}``): missing, unlisted, or changed — one message each."""
    def digest(entry: Any) -> Any:
        return entry.get("sha256") if isinstance(entry, Mapping) else entry

    out: list[str] = []
    for rel in sorted(set(listed) | set(actual)):
        if rel not in actual:
            out.append(f"{rel} is missing")
        elif rel not in listed:
            out.append(f"{rel} is not in the manifest")
        elif digest(listed[rel]) != digest(actual[rel]):
            out.append(f"{rel} changed since the manifest was written")
    return out


def to_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The manifest as indented sorted-key JSON with a final newline."""
    return orjson.dumps(manifest, option=_CANONICAL | orjson.OPT_INDENT_2) + b"\n"


def write_json(path: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Path:
    """Atomically write ``manifest`` (:func:`to_bytes`); returns the path."""
    with atomic_write(path, "wb") as fh:
        fh.write(to_bytes(manifest))
    return Path(path)


def read_json(path: str | os.PathLike[str], *, what: str = "manifest", hint: str | None = None) -> Any:
    """Parse a manifest file: :class:`NotFoundError` when absent, :class:`DataError` when not JSON."""
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(f"no {what} at {p}", hint=hint)
    try:
        return orjson.loads(p.read_bytes())
    except (orjson.JSONDecodeError, OSError) as exc:
        raise DataError(f"{p}: {what} is not readable JSON: {exc}", hint=hint) from None
