"""The error tree: every user-fixable failure is a ``ShopArenaError`` carrying a hint.

The CLI renders these without a traceback and exits with ``exit_code``. Failures inside an episode
(a bad tool argument, a crashed agent) are *data* — observations and record fields — never exceptions.
"""

from __future__ import annotations


class ShopArenaError(Exception):
    """Base class. ``hint`` tells the user how to fix it; ``exit_code`` is stable per subclass."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(ShopArenaError):
    """A bad option, argument or configuration value."""

    exit_code = 2


class DataError(ShopArenaError):
    """Input data that cannot be used (a malformed file, a record that fails validation)."""

    exit_code = 3


class NotFoundError(ShopArenaError):
    """A named thing (file, index, registry entry, product) does not exist."""

    exit_code = 4


class BackendError(ShopArenaError):
    """A model backend failed: unreachable server, HTTP error status, timeout, unusable answer.

    ``status`` is the HTTP status the server answered (None when there was no answer)."""

    exit_code = 5

    def __init__(self, message: str, *, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class IndexFormatError(DataError):
    """An on-disk search index is missing files, corrupt, or of another format version."""


class LeakError(DataError):
    """A split or export that would cross the leak-cluster guard (a cluster, problem, GT product or canonical
    query shared between partitions, or a frozen split manifest edited after it was sealed). ``violations``
    holds one readable line per failed check."""

    def __init__(self, message: str, *, hint: str | None = None, violations: list[str] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.violations = list(violations or [])


def closest(name: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The closest valid name to ``name`` (for 'did you mean' hints), or None."""
    import difflib

    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return found[0] if found else None
