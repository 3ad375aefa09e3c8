"""One small generic registry for every plugin kind (model backends, sandboxes, judges, similarity backends,
tools, built-in agents): names → entries, a ``register(name)`` decorator, lookups that fail with one clear
error naming the closest valid name, and lazy entries.

    SIMILARITIES: Registry[Factory] = Registry("similarity backend", error=ConfigError)

    @SIMILARITIES.register("lexical")
    def _lexical(arg): ...

    SIMILARITIES.lazy("embedding", "shoparena.scoring.embed:make", install="pip install 'shoparena[embed]'")
    SIMILARITIES.get("lexcial")  # ConfigError: unknown similarity backend 'lexcial' / did you mean lexical?

A lazy entry is a ``"package.module:attribute"`` path imported on first :meth:`Registry.get`, so an optional
heavy dependency (torch, sentence-transformers) is imported only by the run that uses it; a missing one
becomes a :class:`~shoparena.errors.ConfigError` with the install hint. A name is registered once: a second
registration (eager or lazy, under a name or an alias) is refused.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from shoparena.errors import ConfigError, NotFoundError, ShopArenaError, closest

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one ``kind``. ``error``: the error class an unknown name raises (``NotFoundError`` by
    default; ``ConfigError`` where the name comes from an option); ``usage``: appended to that error's hint;
    ``loader``: run once before the first lookup, for entries that register themselves when their modules are
    imported (the built-in tools)."""

    def __init__(self, kind: str, *, error: type[ShopArenaError] = NotFoundError, usage: str | None = None,
                 loader: Callable[[], object] | None = None) -> None:
        self.kind = kind
        self.error = error
        self.usage = usage
        self._loader = loader
        self._loaded = loader is None
        self._loading = False
        self._load_lock = threading.RLock()
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, tuple[str, str | None]] = {}
        self._aliases: dict[str, str] = {}
        self._lock = threading.Lock()

    # ── registration ─────────────────────────────────────────────────────────────────────────────────────
    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering the decorated object as ``name`` (returned unchanged)."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        """Register ``obj`` as ``name``."""
        with self._lock:
            self._claim(name)
            self._entries[name] = obj

    def lazy(self, name: str, target: str, *, install: str | None = None) -> None:
        """Register ``name`` as ``"package.module:attribute"``, imported on first use; ``install`` tells the
        user how to get a missing dependency (e.g. ``pip install 'shoparena[hf]'``)."""
        module, sep, attr = target.partition(":")
        if not (module and sep and attr):
            raise ConfigError(f"lazy {self.kind} {name!r}: {target!r} is not 'package.module:attribute'")
        with self._lock:
            self._claim(name)
            self._lazy[name] = (target, install)

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` resolve to the registered ``name`` (aliases are not listed by :meth:`names`)."""
        with self._lock:
            if name not in self._entries and name not in self._lazy:
                raise self.unknown(name)
            self._claim(alias)
            self._aliases[alias] = name

    def _claim(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._entries or name in self._lazy or name in self._aliases:
            raise ConfigError(f"{self.kind} {name!r} is already registered",
                              hint=f"register it under another name; taken: {', '.join(self.names())}")

    # ── lookup ───────────────────────────────────────────────────────────────────────────────────────────
    def _load_all(self) -> None:
        """Run the loader once; other threads wait for it, a lookup made by the loader itself does not."""
        if self._loaded:
            return
        with self._load_lock:
            if self._loaded or self._loading or self._loader is None:
                return
            self._loading = True
            try:
                self._loader()
                self._loaded = True
            finally:
                self._loading = False

    def names(self) -> list[str]:
        """The registered names (eager and lazy, aliases left out), sorted."""
        self._load_all()
        return sorted({*self._entries, *self._lazy})

    def __contains__(self, name: object) -> bool:
        self._load_all()
        return isinstance(name, str) and any(name in d for d in (self._entries, self._lazy, self._aliases))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load_all()
        return len(self._entries) + len(self._lazy)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def get(self, name: str) -> T:
        """The entry ``name`` (or an alias of it), importing a lazy one; an unknown name raises :attr:`error`
        with the closest valid name."""
        self._load_all()
        key = self._aliases.get(name, name) if isinstance(name, str) else name
        if key in self._entries:
            return self._entries[key]
        lazy = self._lazy.get(key)
        if lazy is None:
            raise self.unknown(name)
        return self._load(key, *lazy)

    def unknown(self, name: object, *, also: list[str] | tuple[str, ...] = (), shown: str | None = None,
                ) -> ShopArenaError:
        """The error for a name that is not registered (raise it): ``also`` are further valid choices for the
        hint, ``shown`` what the message quotes instead of ``name`` (the whole spec a name was cut from)."""
        choices = [*self.names(), *also]
        near = closest(name, choices) if isinstance(name, str) and name else None
        hint = (f"did you mean {near}? " if near else "") + f"choose one of: {', '.join(choices) or '(none)'}"
        if self.usage:
            hint += f"; {self.usage}"
        return self.error(f"unknown {self.kind} {shown if shown is not None else name!r}", hint=hint)

    def _load(self, name: str, target: str, install: str | None) -> T:
        module, _, attr = target.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            missing = exc.name or module
            if missing.split(".")[0] == "shoparena":
                raise  # a broken module of ours, not a missing optional dependency: keep the traceback
            raise ConfigError(f"{self.kind} {name!r} needs {missing!r}, which is not installed",
                              hint=install or f"install {missing}") from exc
        except AttributeError as exc:
            raise ConfigError(f"{self.kind} {name!r}: {module} has no {attr!r}",
                              hint="fix the registration's target path") from exc
        with self._lock:
            if self._lazy.pop(name, None) is not None:
                self._entries[name] = obj
        return self._entries[name]
