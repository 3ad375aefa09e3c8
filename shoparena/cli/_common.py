"""Shared CLI plumbing: consoles, progress bars, JSON output, catalog directory resolution."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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
