"""Optional extras: which extra installs which module, and the one answer a command gives when one is missing.

``pip install shoparena`` is the base install: the catalog, problems, search, agents with policy or OpenAI-API
models, scoring, the store, the arena, the corpus and the web pages run on it. Heavier jobs need an extra
(``pyproject.toml``'s ``[project.optional-dependencies]``; the README's install table): a command that reaches
a module of a missing extra exits 2 with ``error: shoparena train needs the 'train' extra (No module named
'trl')`` and ``hint: pip install 'shoparena[train]'`` — never an internal error. This module is the one table
of that mapping; ``tests/cli/test_base_install.py`` checks it against ``pyproject.toml``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

from shoparena.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])

#: Top-level module → the extras that install it, smallest first (named when no command says otherwise).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "torch": ("hf", "train"),
    "transformers": ("hf", "train"),
    "tokenizers": ("hf", "train"),
    "safetensors": ("hf", "train"),
    "huggingface_hub": ("hf", "train"),
    "trl": ("train",),
    "peft": ("train",),
    "accelerate": ("train",),
    "datasets": ("train",),
    "gguf": ("train",),
    "llama_cpp": ("llamacpp",),
    "psycopg": ("pg",),
    "bittensor": ("chain",),
    "sentence_transformers": ("embed",),
}

#: Commands whose whole job needs one extra: that extra is the one named for any of its modules (a user told
#: to install ``hf`` for ``train`` would only meet the next missing module).
COMMAND_EXTRAS: dict[str, str] = {
    "train": "train",
    "loop": "train",
    "demo": "train",
    "reproduce": "train",
    "models prepare": "train",
}


class MissingExtraError(ConfigError):
    """A command needs an optional extra that is not installed (exit 2, naming the extra to install)."""

    def __init__(self, command: str, extra: str, module: str) -> None:
        where = f"shoparena {command}" if command else "this command"
        super().__init__(f"{where} needs the {extra!r} extra (No module named {module!r})",
                         hint=install_hint(extra))
        self.extra = extra
        self.module = module


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra``."""
    return f"pip install 'shoparena[{extra}]'"


def extra_for(module: str | None, command: str = "") -> str | None:
    """The extra to install for a missing ``module`` (any dotted name; its top level counts) when ``command``
    (``"train"``, ``"models prepare"``) reached it, or ``None`` when no extra provides it."""
    if not module:
        return None
    extras = EXTRA_MODULES.get(module.partition(".")[0])
    if not extras:
        return None
    preferred = COMMAND_EXTRAS.get(command)
    return preferred if preferred in extras else extras[0]


def modules_of(extra: str) -> tuple[str, ...]:
    """The top-level modules ``extra`` installs (as far as the commands need them)."""
    return tuple(m for m, extras in EXTRA_MODULES.items() if extra in extras)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [m for m in modules_of(extra) if not _importable(m)]


def require_extra(extra: str, command: str) -> None:
    """Raise :class:`MissingExtraError` before a command starts work it cannot finish without ``extra``."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(command, extra, missing[0])


def needs_extra(extra: str, command: str) -> Callable[[F], F]:
    """A command function that checks ``extra`` (:func:`require_extra`) once its options have parsed (``--help``
    and bad options are still answered first) and before it does anything."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            require_extra(extra, command)
            return func(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def missing_extra(exc: BaseException, command: str = "") -> MissingExtraError | None:
    """The user-facing error for ``exc`` when it (or an exception it was raised from) is a missing module that
    an extra installs; ``None`` for anything else."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ModuleNotFoundError):
            extra = extra_for(cur.name, command)
            if extra is not None:
                return MissingExtraError(command, extra, (cur.name or "").partition(".")[0])
        cur = cur.__cause__ or cur.__context__
    return None
