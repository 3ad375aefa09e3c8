"""Run the ``shoparena`` command as a base install (``pip install shoparena``, no extras) would.

``python tests/cli/base_install.py ARGS…`` makes the finders of :data:`sys.meta_path` blind to every top-level
module named in ``SHOPARENA_BLOCK`` (comma-separated) — ``find_spec`` answers ``None`` and ``import`` raises the
``ModuleNotFoundError`` of a missing distribution — then runs the CLI's entry point with ``ARGS``. :func:`blocked_modules` computes what to block: every
importable top-level module that no distribution of the base install provides (the base dependencies and
their own requirements, read from the installed metadata), so an extra's modules — and a light dependency
that is only there because ``.[dev]`` is installed — are absent as they would be after a bare install.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from importlib.abc import MetaPathFinder
from pathlib import Path
from types import ModuleType
from typing import Any


class Hide(MetaPathFinder):
    """A finder of :data:`sys.meta_path` that does not see the ``hidden`` top-level modules (nor their
    submodules): ``importlib.util.find_spec`` answers ``None`` for them and ``import`` raises the same
    ``ModuleNotFoundError`` an absent distribution raises."""

    def __init__(self, finder: Any, hidden: frozenset[str]) -> None:
        self.finder = finder
        self.hidden = hidden

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname.partition(".")[0] in self.hidden:
            return None
        find = getattr(self.finder, "find_spec", None)
        return None if find is None else find(fullname, path, target)

    def invalidate_caches(self) -> None:
        invalidate = getattr(self.finder, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()


def hide_modules(hidden: set[str]) -> None:
    """Make every finder of :data:`sys.meta_path` blind to ``hidden`` (call before anything imports them)."""
    frozen = frozenset(hidden)
    sys.meta_path[:] = [Hide(f, frozen) for f in sys.meta_path]


PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _applicable(lines: list[str], extras: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
    """``(name, extras)`` of the requirement ``lines`` that apply here with ``extras`` asked for."""
    from packaging.requirements import Requirement

    out = []
    for line in lines:
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
            continue
        out.append((req.name, frozenset(req.extras)))
    return out


def project_requirements(extras: tuple[str, ...] = ()) -> list[str]:
    """The requirement lines of the repository's ``pyproject.toml``: the base dependencies and ``extras``'."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(line for e in extras for line in optional[e])]


def base_distributions(extras: tuple[str, ...] = ()) -> set[str]:
    """The normalised names of the distributions ``pip install .`` (with ``extras``) brings: the requirements of
    ``pyproject.toml`` and, transitively, theirs as the installed distributions declare them."""
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = _applicable(project_requirements(extras), frozenset())
    names = {"shoparena"}
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        name, wanted = item
        names.add(canonicalize_name(name))
        try:
            todo.extend(_applicable(metadata.requires(name) or [], wanted))
        except metadata.PackageNotFoundError:
            continue  # not installed here (another platform's marker, say): nothing to walk
    return names


def blocked_modules(extras: tuple[str, ...] = ()) -> set[str]:
    """Top-level modules installed here that no distribution of the base install (plus ``extras``) provides."""
    from packaging.utils import canonicalize_name

    base = base_distributions(extras)
    blocked: set[str] = set()
    for module, dists in metadata.packages_distributions().items():
        if module.startswith("_") or module in sys.stdlib_module_names:
            continue
        if not any(canonicalize_name(d) in base for d in dists):
            blocked.add(module)
    return blocked


def main(argv: list[str]) -> None:
    hide_modules({m for m in os.environ.get("SHOPARENA_BLOCK", "").split(",") if m})
    from shoparena.cli import main as cli_main

    cli_main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
