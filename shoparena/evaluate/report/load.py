"""Reading and checking what a report is made from: ``evaluation.json``, a training manifest, a corpus manifest.

Every input is untrusted: a missing file is a :class:`NotFoundError`, one that is not what it claims a
:class:`DataError`, each naming the file. The checks here are of the shape every section relies on; the sections
check the values they read (:func:`num`, :func:`interval`, :func:`obj`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoparena.errors import DataError, NotFoundError

__all__ = ["ReportInputs", "interval", "load_inputs", "num", "obj"]


@dataclass(frozen=True)
class ReportInputs:
    """What one report shows: the evaluation body, and optionally a training manifest and a corpus funnel."""

    evaluation: dict[str, Any]
    evaluation_file: Path
    train: dict[str, Any] | None = None
    train_file: Path | None = None
    corpus: list[dict[str, Any]] | None = None
    """The corpus manifest's ``counts``: ``{stage, seen, kept, rejected: {reason: n}}`` per filter stage."""
    corpus_file: Path | None = None


def _read_json(path: Path, what: str, hint: str | None = None) -> Any:
    if not path.is_file():
        raise NotFoundError(f"{path}: no {what}", hint=hint)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path}: {what} is not UTF-8 text") from None
    except ValueError as exc:
        raise DataError(f"{path}: {what} is not JSON ({exc})") from None


def num(x: Any, what: str) -> float:
    """``x`` as a float; :class:`DataError` naming ``what`` when it is not a number."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise DataError(f"{what}: expected a number, got {type(x).__name__}")
    return float(x)


def interval(x: Any, what: str) -> tuple[float, float]:
    """``x`` as an interval ``(low, high)``; :class:`DataError` naming ``what`` otherwise."""
    if not isinstance(x, list | tuple) or len(x) != 2:
        raise DataError(f"{what}: expected an interval [low, high]")
    return num(x[0], what), num(x[1], what)


def obj(x: Any, what: str) -> dict[str, Any]:
    """``x`` when it is a JSON object; :class:`DataError` naming ``what`` otherwise."""
    if not isinstance(x, dict):
        raise DataError(f"{what}: expected an object, got {type(x).__name__}")
    return x


def load_evaluation(path: Path) -> dict[str, Any]:
    """The body of an ``evaluation.json`` (format and top-level keys checked)."""
    from shoparena.evaluate.core import FORMAT

    body = obj(_read_json(path, "evaluation.json", hint="run `shoparena evaluate --out DIR` first"), str(path))
    if body.get("format") != FORMAT:
        raise DataError(f"{path}: not a shoparena evaluation (format {body.get('format')!r}, expected {FORMAT!r})")
    for key, kind in (("config", dict), ("problems", dict), ("models", dict), ("comparisons", list)):
        if not isinstance(body.get(key), kind):
            raise DataError(f"{path}: key {key!r} is missing or not a{'n object' if kind is dict else ' list'}")
    if not body["models"]:
        raise DataError(f"{path}: no model in the evaluation")
    return body


def _manifest_file(spec: str | os.PathLike[str]) -> Path:
    path = Path(spec)
    return path / "manifest.json" if path.is_dir() else path


def load_train(path: Path) -> dict[str, Any]:
    """A ``shoparena train`` manifest, validated as :class:`~shoparena.train.recipe.TrainManifest`."""
    from pydantic import ValidationError

    from shoparena.train.recipe import TrainManifest

    body = _read_json(path, "training manifest", hint="pass the manifest.json of `shoparena train` (or its directory)")
    try:
        return TrainManifest.model_validate(body).model_dump(mode="json")
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"{path}: not a training manifest ({loc}: {first['msg']})") from None


def _default_corpus(train_file: Path, corpus: str) -> Path | None:
    """``<corpus>/manifest.json`` relative to the training manifest's folder (as runs record it), else as given (older
    runs recorded it relative to the working directory), else relative to a folder above."""
    rel = Path(corpus)
    candidates = [rel] if rel.is_absolute() else [*(d / rel for d in train_file.resolve().parents[:1]), rel,
                                                  *(d / rel for d in train_file.resolve().parents[1:])]
    for c in candidates:
        if (c / "manifest.json").is_file():
            return c / "manifest.json"
    return None


def load_corpus(path: Path) -> list[dict[str, Any]]:
    """The funnel of a ``shoparena corpus build`` manifest: its ``counts``, every number checked."""
    body = obj(_read_json(path, "corpus manifest", hint="pass the manifest.json of `shoparena corpus build`"),
               str(path))
    counts = body.get("counts")
    if not isinstance(counts, list):
        raise DataError(f"{path}: not a corpus manifest (no counts list)")
    out = []
    for i, row in enumerate(counts):
        row = obj(row, f"{path}: counts[{i}]")
        rejected = obj(row.get("rejected") or {}, f"{path}: counts[{i}].rejected")
        out.append({"stage": str(row.get("stage", "?")), "seen": int(num(row.get("seen"), f"{path}: counts[{i}].seen")),
                    "kept": int(num(row.get("kept"), f"{path}: counts[{i}].kept")),
                    "rejected": {str(k): int(num(v, f"{path}: counts[{i}].rejected.{k}"))
                                 for k, v in rejected.items()}})
    return out


def load_inputs(out: str | os.PathLike[str], *, train_manifest: str | os.PathLike[str] | None = None,
                corpus_manifest: str | os.PathLike[str] | None = None) -> ReportInputs:
    """Everything :func:`shoparena.evaluate.report.write_report` renders: ``<out>/evaluation.json``, the training
    manifest (a ``manifest.json`` or its directory) and the corpus manifest (default: the training manifest's
    ``corpus`` when its ``manifest.json`` exists)."""
    evaluation_file = Path(out) / "evaluation.json"
    body = load_evaluation(evaluation_file)
    train = train_file = None
    if train_manifest is not None:
        train_file = _manifest_file(train_manifest)
        train = load_train(train_file)
    corpus_file: Path | None = None
    if corpus_manifest is not None:
        corpus_file = _manifest_file(corpus_manifest)
    elif train is not None and train_file is not None:
        corpus_file = _default_corpus(train_file, train["corpus"])
    counts = load_corpus(corpus_file) if corpus_file is not None else None
    return ReportInputs(evaluation=body, evaluation_file=evaluation_file, train=train, train_file=train_file,
                        corpus=counts, corpus_file=corpus_file)
