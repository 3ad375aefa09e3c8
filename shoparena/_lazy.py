"""Lazy public names for a package ``__init__`` (PEP 562): the name is imported from its module on first use.

A package's public interface can then list everything its callers need without making ``import shoparena.x``
(and so ``shoparena --help``) pay for the heavy modules behind those names::

    __getattr__, __dir__ = lazy_exports(__name__, {"SearchIndex": "index", "serve_index": "server:serve"})

A value ``"module"`` imports the same name from ``<package>.module``; ``"module:attr"`` imports ``attr``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` resolving each name of ``exports`` on first access (then cached
    in the package's namespace); an unknown name raises ``AttributeError`` as usual."""

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = target.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), attr or name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*exports, *importlib.import_module(package).__dict__})

    return __getattr__, __dir__
