"""Saving and loading banks: round trip, content hashes, tamper detection (hash-pinned, verifiable)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest

from shoparena.errors import DataError, NotFoundError
from shoparena.tasks.banks import BankSet, BankState
from tests.banks import suites, synthetic_bank, upstream


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[BankSet, Path]:
    banks = BankSet.build(upstream(), static={k: list(v) for k, v in suites().items()}, seed=2)
    banks.mark_used(p.problem_id for p in banks.draw("held_out", 15, seed="r1"))
    banks.rotate(1)
    directory = tmp_path_factory.mktemp("bank")
    banks.save(directory)
    return banks, directory


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _rewrite(d: Path, manifest: dict, *, rehash: bool) -> None:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    if rehash:
        manifest["manifest_sha256"] = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    (d / "manifest.json").write_text(json.dumps(manifest))


def test_round_trip(saved: tuple[BankSet, Path]) -> None:
    banks, directory = saved
    loaded = BankSet.load(directory)
    assert loaded.state == banks.state and loaded.config == banks.config
    assert loaded.partition_map() == banks.partition_map() and loaded.static_hashes == banks.static_hashes
    assert loaded.static_suites() == banks.static_suites()
    assert loaded.draw("held_out", 12, seed=7) == banks.draw("held_out", 12, seed=7)
    assert loaded.cluster_report == banks.cluster_report
    manifest = _manifest(directory)
    assert manifest["config"]["cluster"]["version"] == "leak-guard/1"
    assert set(manifest["static"]) == set(suites()) and all(len(s["sha256"]) == 64 for s in manifest["static"].values())


def test_save_is_deterministic_and_replaces_old_files(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    banks, directory = saved
    banks.save(tmp_path)
    assert (tmp_path / "manifest.json").read_bytes() == (directory / "manifest.json").read_bytes()
    banks2 = BankSet.load(tmp_path)
    banks2.extend(synthetic_bank(3, seed=1))
    banks2.save(tmp_path)
    assert len(list(tmp_path.glob("problems-*.jsonl"))) == 1
    assert BankSet.load(tmp_path).partition_map() == banks2.partition_map()


def test_edited_problem_file_is_detected(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    d = _copy(saved[1], tmp_path / "b")
    f = next(d.glob("problems-*.jsonl"))
    f.write_bytes(f.read_bytes().replace(b"budget is only", b"budget is just", 1))
    with pytest.raises(DataError, match="content hash mismatch"):
        BankSet.load(d)


def test_edited_manifest_is_detected(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    d = _copy(saved[1], tmp_path / "b")
    manifest = _manifest(d)
    cid = next(k for k, c in manifest["state"]["clusters"].items() if c["partition"] == "held_out")
    manifest["state"]["clusters"][cid]["partition"] = "open"
    _rewrite(d, manifest, rehash=False)
    with pytest.raises(DataError, match="manifest hash mismatch"):
        BankSet.load(d)
    _rewrite(d, manifest, rehash=True)  # a careful forger fixes the manifest hash: the partition pins differ
    with pytest.raises(DataError, match=r"partition .* does not match"):
        BankSet.load(d)


def test_forged_leak_with_every_hash_fixed_fails_the_guard(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    d = _copy(saved[1], tmp_path / "b")
    manifest = _manifest(d)
    clusters = manifest["state"]["clusters"]
    cid = next(k for k, c in clusters.items() if c["partition"] == "held_out" and len(c["members"]) > 1)
    moved = clusters[cid]["members"].pop()
    clusters["forged"] = {**clusters[cid], "partition": "open", "members": [moved]}
    state = BankState.model_validate(manifest["state"])
    part = {pid: c.partition for c in state.clusters.values() for pid in c.members}
    # the forger also recomputes the partition pins and the manifest hash
    manifest["partitions"] = {p: hashlib.sha256("\n".join(sorted(i for i, q in part.items() if q == p)).encode())
                              .hexdigest() for p in manifest["partitions"]}
    _rewrite(d, manifest, rehash=True)
    with pytest.raises(DataError, match="leak guard fails"):
        BankSet.load(d)
    report = BankSet.load(d, verify=False).verify()
    assert not report.ok and "whole_clusters" in {v.check for v in report.violations}


def test_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        BankSet.load(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable bank"):
        BankSet.load(tmp_path)


def test_manifest_that_is_not_an_object_or_names_a_path(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    d = _copy(saved[1], tmp_path / "b")
    (d / "manifest.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="unreadable bank"):
        BankSet.load(d)
    d2 = _copy(saved[1], tmp_path / "c")
    manifest = _manifest(d2)
    manifest["files"]["problems"]["name"] = "../elsewhere.jsonl"
    _rewrite(d2, manifest, rehash=True)
    with pytest.raises(DataError, match="unreadable bank"):
        BankSet.load(d2)


def test_missing_problems_file_is_named(saved: tuple[BankSet, Path], tmp_path: Path) -> None:
    d = _copy(saved[1], tmp_path / "b")
    f = next(d.glob("problems-*.jsonl"))
    f.unlink()
    with pytest.raises(DataError, match=rf"{f.name} is missing"):
        BankSet.load(d)
