"""The export directory's ``manifest.json``: versions, sources, stage counts, split hashes, exports and the sha256
of every file, sealed with ``manifest_hash`` (:mod:`shoparena.seal`), and its verification."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from shoparena import __version__
from shoparena.corpus.export.common import EXPORT_FORMAT, MANIFEST_NAME, ExportResult
from shoparena.corpus.split import SplitManifest
from shoparena.corpus.types import Rejection
from shoparena.errors import DataError, NotFoundError
from shoparena.seal import file_errors, file_hashes, read_json, seal, seal_errors, write_json

__all__ = ["TRAINING_FILES", "jsonable", "read_manifest", "training_hash", "write_manifest"]

TRAINING_FILES = ("sft_train.jsonl", "sft_validation.jsonl", "sft_eval.jsonl", "kto_train.jsonl", "grpo_train.jsonl",
                  "split.json")
"""What the training stages read from a corpus directory: the rows they train and hold out, and the split the
teacher stage draws fresh bank problems against. The other files are the same rows in other formats, the rejection
and selection reports, and ``provenance.jsonl``, whose record ids hash each record's clock readings."""


def jsonable(value: Any) -> Any:
    """Plain JSON data of a report part (models, stage reports, counters, manifests, paths); sets sorted."""
    if isinstance(value, SplitManifest):
        return value.hashes()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    if isinstance(value, Rejection):
        return {"stage": value.stage, "reason": value.reason, "message": value.message, "where": value.where}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if isinstance(value, Path):
        return str(value)
    return value


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(), "shoparena": __version__}
    for pkg in ("pyarrow", "orjson", "pydantic", "datasets"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def write_manifest(out_dir: str | os.PathLike[str], *, sources: Any = None, filter_config: Any = None,
                   reports: Sequence[Any] = (), split: SplitManifest | None = None,
                   exports: Sequence[ExportResult] = (), **extra: Any) -> Path:
    """Atomically write ``<out_dir>/manifest.json``: format, package versions, ``sources`` (source records),
    ``filter_config``, ``counts`` (every stage report: seen / kept / rejected by reason), ``split`` (the split
    manifest's hashes and sizes, guard version), ``exports`` (each export's rows, files and report), any ``extra``
    parts, ``files`` (sha256 and size of every file under ``out_dir``) and ``manifest_hash`` (sha256 of the rest).
    No timestamps: the same export gives the same manifest bytes."""
    root = Path(out_dir)
    if not root.is_dir():
        raise NotFoundError(f"export directory {root} does not exist", hint="write the exports first")
    body: dict[str, Any] = {
        "format": EXPORT_FORMAT, "versions": _versions(), "sources": jsonable(sources),
        "filter_config": jsonable(filter_config), "counts": [jsonable(r) for r in reports],
        "split": jsonable(split), "exports": {e.name: jsonable(e) for e in exports},
        **{k: jsonable(v) for k, v in sorted(extra.items())}, "files": file_hashes(root, exclude={MANIFEST_NAME})}
    return write_json(root / MANIFEST_NAME, seal(body, "manifest_hash"))


def read_manifest(out_dir: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """``manifest.json`` of an export directory; with ``verify``, the manifest hash and every listed file's hash
    are re-checked (changed, missing or unlisted files raise :class:`DataError` naming each one)."""
    root = Path(out_dir)
    path = root / MANIFEST_NAME
    body = read_json(path, what=MANIFEST_NAME, hint="is this a corpus directory? build one with `shoparena corpus build`")
    if not isinstance(body, dict) or not isinstance(body.get("files", {}), dict):
        raise DataError(f"{path}: not an export manifest (expected an object with a files map)",
                        hint="re-run the export instead of editing its files")
    if not verify:
        return body
    problems = seal_errors(body, "manifest_hash")
    problems += file_errors(body.get("files") or {}, file_hashes(root, exclude={MANIFEST_NAME}))
    if problems:
        raise DataError(f"{path}: export does not match its manifest ({len(problems)} problems): "
                        + "; ".join(problems), hint="re-run the export instead of editing its files")
    return body


def training_hash(manifest: Mapping[str, Any]) -> str | None:
    """sha256 of the recorded hashes of :data:`TRAINING_FILES` in a corpus ``manifest`` (read with
    :func:`read_manifest`, verified), or None when it lists none of them. Two corpora whose training rows and split
    are byte-identical share it even when their manifests differ elsewhere (the record ids in ``provenance.jsonl``
    of a store rerun with the same seed, the recorded paths of its sources), so a training stage keyed on it is
    reused for either."""
    import hashlib

    files = manifest.get("files") if isinstance(manifest, Mapping) else None
    if not isinstance(files, Mapping):
        return None
    listed = {name: files[name].get("sha256") if isinstance(files[name], Mapping) else files[name]
              for name in TRAINING_FILES if name in files}
    if not listed:
        return None
    blob = "".join(f"{name}\0{sha}\n" for name, sha in sorted(listed.items()))
    return hashlib.sha256(blob.encode()).hexdigest()
