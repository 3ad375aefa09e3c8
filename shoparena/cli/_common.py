"""Shared CLI plumbing: consoles, progress bars, JSON output, catalog directory resolution."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

console = Console()
if not console.is_terminal:
    console.width = 120  # logs and pipes: wide enough for the tables, still readable
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Machine-readable output on stdout (no rich markup, no wrapping)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Any]:
    """A rich progress bar on stderr; yields ``advance(n)``. Silent when stderr is not a terminal."""
    prog = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    with prog:
        task = prog.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            prog.advance(task, n)

        yield advance


def ms_option(value: str | None, flag: str) -> int | None:
    """ms since the epoch from an integer or an ISO-8601 date/time (UTC when no zone is given)."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        from shoparena.errors import ConfigError

        raise ConfigError(f"bad {flag} {value!r}", hint="ms since the epoch or ISO-8601, e.g. 2026-05-01T12:00") from None
    return int((dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp() * 1000)
