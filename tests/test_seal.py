"""Sealed manifests (:mod:`shoparena.seal`): the self-hash, file hashes, verification naming every changed,
missing and unlisted file, atomic deterministic writes, and clear errors for absent or broken files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from shoparena.errors import DataError, NotFoundError
from shoparena.seal import (
    canonical_hash,
    file_errors,
    file_hashes,
    read_json,
    seal,
    seal_errors,
    sha256_file,
    write_json,
)


def test_canonical_hash_ignores_key_order_but_not_values() -> None:
    assert canonical_hash({"a": 1, "b": [1, 2]}) == canonical_hash({"b": [1, 2], "a": 1})
    assert canonical_hash({"a": 1}) != canonical_hash({"a": 2})
    assert canonical_hash({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()


def test_seal_round_trip_and_tamper() -> None:
    sealed = seal({"format": "x/1", "n": 3}, "manifest_hash")
    assert seal_errors(sealed, "manifest_hash") == []
    assert seal(sealed, "manifest_hash") == sealed  # re-sealing ignores the old hash
    assert seal_errors({**sealed, "n": 4}, "manifest_hash") == ["manifest_hash does not match the manifest"]
    assert seal_errors({"n": 3}, "manifest_hash") == ["manifest_hash does not match the manifest"]


def test_file_hashes_skip_excluded_and_dot_names(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00" * 3)
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / ".a.txt.123.tmp").write_text("half")
    got = file_hashes(tmp_path, exclude={"manifest.json"})
    assert list(got) == ["a.txt", "sub/b.bin"]
    assert got["a.txt"] == {"sha256": hashlib.sha256(b"alpha").hexdigest(), "bytes": 5}
    assert sha256_file(tmp_path / "sub" / "b.bin") == got["sub/b.bin"]["sha256"]


def test_file_errors_list_every_changed_missing_and_unlisted_file(tmp_path: Path) -> None:
    for name in ("keep", "edit", "gone"):
        (tmp_path / name).write_text(name)
    listed = file_hashes(tmp_path)
    (tmp_path / "edit").write_text("edited")
    (tmp_path / "gone").unlink()
    (tmp_path / "new").write_text("new")
    assert file_errors(listed, file_hashes(tmp_path)) == [
        "edit changed since the manifest was written", "gone is missing", "new is not in the manifest"]
    assert file_errors({"x": "abc"}, {"x": {"sha256": "abc"}}) == []  # bare digests and entries compare alike


def test_write_json_is_deterministic_sorted_and_atomic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_json(a, {"z": 1, "a": {"y": 2, "b": 3}})
    write_json(b, {"a": {"b": 3, "y": 2}, "z": 1})
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes().endswith(b"}\n") and a.read_text().index('"a"') < a.read_text().index('"z"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]  # no temp file left behind
    assert read_json(a) == orjson.loads(a.read_bytes())


def test_read_json_errors_are_typed(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no split manifest"):
        read_json(tmp_path / "none.json", what="split manifest")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(DataError, match="not readable JSON"):
        read_json(tmp_path / "bad.json")
