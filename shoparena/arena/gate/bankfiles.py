"""Problem files for the gate's bank-aware checks: directories and files of upstream JSONL / ORO suites / ours."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.tasks.loader import load_problems
from shoparena.tasks.types import Problem

PATTERNS = ("*.jsonl", "*.json", "*.jsonl.gz", "*.json.gz")


def bank_files(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, bool]]:
    """``(file, named)`` for every path: a file as given (``named``), a directory expanded recursively to its
    problem files in sorted order."""
    out: list[tuple[Path, bool]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted({f for pattern in PATTERNS for f in p.rglob(pattern) if f.is_file()})
            out.extend((f, False) for f in found)
        elif p.is_file():
            out.append((p, True))
        else:
            raise NotFoundError(f"no bank file or directory at {p}", hint="pass directories of problem files "
                                "(*.jsonl, ORO suite *.json) or the files themselves")
    return out


def _is_bank_set(path: Path) -> bool:
    """A directory written by ``arena banks build`` (its ``manifest.json`` says ``shoparena-banks/…``)."""
    import orjson

    manifest = path / "manifest.json"
    if not path.is_dir() or not manifest.is_file():
        return False
    try:
        body = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(body, dict) and str(body.get("format", "")).startswith("shoparena-banks/")


def load_banks(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Problem], list[str]]:
    """All problems of the banks and the files skipped (non-problem JSON found while expanding a directory).
    A saved bank set (``arena banks build``) is loaded through its manifest, every hash re-checked (an edited one
    raises :class:`DataError`). A file named explicitly that cannot be loaded raises :class:`DataError`; no
    problem at all raises :class:`ConfigError`."""
    problems: list[Problem] = []
    skipped: list[str] = []
    plain: list[str | os.PathLike[str]] = []
    for raw in paths:
        if _is_bank_set(Path(raw)):  # a saved bank set is read through its seal, never around it
            from shoparena.tasks.banks import BankSet

            problems.extend(BankSet.load(raw, verify=False).all_problems())
        else:
            plain.append(raw)
    for path, named in bank_files(plain):
        try:
            problems.extend(load_problems(path))
        except DataError:
            if named:
                raise
            skipped.append(str(path))
    if not problems:
        raise ConfigError("the banks hold no problems", hint="pass directories or files of upstream JSONL, "
                          "ORO suite JSON or `shoparena problems` JSONL")
    return problems, skipped
