"""What the sandbox may see of the host: the Python installation, the venv, the package source, system libraries.

Everything is bound read-only at the same path as on the host, so the interpreter and its ``sys.prefix`` work
unchanged. The agent imports the validator's own copy of the package: the entry puts :data:`PACKAGE_PARENT` first
on ``sys.path`` (an editable install's finder, or a ``PYTHONPATH`` the sandbox never sees, could name another
copy or a path outside the binds). Never the repository root (it holds ``tests/data`` with ground truth),
never a catalog: :func:`python_binds` refuses a bind that contains any path the validator marks as forbidden.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from shoparena.errors import ConfigError

__all__ = ["ENTRY", "PACKAGE_DIR", "PACKAGE_PARENT", "SYSTEM_DIRS", "python_binds", "system_layout"]

#: The package source directory (``…/shoparena``), bound so agents can import ``shoparena.sdk`` and friends.
PACKAGE_DIR = Path(__file__).resolve().parents[2]
#: The directory holding :data:`PACKAGE_DIR`: the sandbox's first ``sys.path`` entry, so ``import shoparena`` inside
#: finds the very package the validator imported. Bubblewrap binds only :data:`PACKAGE_DIR` (and the Python
#: directories of :func:`python_binds`) under it, so no other file of a checkout becomes visible or importable.
PACKAGE_PARENT = PACKAGE_DIR.parent
#: The script that runs inside (stdlib only).
ENTRY = Path(__file__).resolve().parent / "entry.py"
#: Top-level system directories bound read-only when they are real directories.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: Files from /etc that the dynamic loader uses (nothing else of /etc is visible).
SYSTEM_FILES = ("/etc/ld.so.cache",)


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _dedupe(paths: Iterable[Path]) -> list[Path]:
    """Resolved, existing, without paths nested inside another one of the list."""
    real = sorted({Path(os.path.realpath(p)) for p in paths if Path(p).exists()}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in real:
        if not any(_within(p, q) for q in out):
            out.append(p)
    return out


def python_binds(forbidden: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The interpreter installation (``sys.base_prefix``), the venv (``sys.prefix``) and :data:`PACKAGE_DIR`,
    minus anything under ``/usr`` (bound anyway). Raises :class:`ConfigError` when one of them contains a
    forbidden path (a catalog, a problem bank, the repository's ``tests/data``)."""
    usr = Path("/usr")
    wanted = [Path(sys.base_prefix), Path(sys.prefix), Path(os.path.realpath(sys.executable)).parent.parent,
              PACKAGE_DIR]
    binds = [p for p in _dedupe(wanted) if not _within(p, usr) or _within(p, usr / "local")]
    bad = [Path(os.path.realpath(f)) for f in forbidden]
    if (PACKAGE_DIR.parent / "tests" / "data").exists():
        bad.append(PACKAGE_DIR.parent / "tests" / "data")
    for b in binds:
        for f in bad:
            if _within(f, b):
                raise ConfigError(f"the sandbox would expose {f} through the bind of {b}",
                                  hint="install the package and venv outside data directories; never bind a repo "
                                       "root or a folder holding catalogs or ground truth")
    return binds


def system_layout(root: Path = Path("/")) -> tuple[list[Path], list[tuple[str, Path]], list[Path]]:
    """``(directories to bind, (symlink target, link) pairs, files to bind)`` mirroring the host's top-level
    system directories (merged-/usr systems have ``/bin -> usr/bin`` links)."""
    dirs: list[Path] = []
    links: list[tuple[str, Path]] = []
    for name in SYSTEM_DIRS:
        p = root / name
        if p.is_symlink():
            links.append((os.readlink(p), Path("/") / name))
        elif p.is_dir():
            dirs.append(Path("/") / name)
    files = [Path(f) for f in SYSTEM_FILES if Path(f).is_file()]
    return dirs, links, files
