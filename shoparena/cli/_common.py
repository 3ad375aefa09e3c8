"""Shared CLI plumbing: consoles, progress bars, JSON output, and the checks of untrusted option values."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
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


def print_error(message: str, hint: str | None = None) -> None:
    """The one ``error:`` line (and an indented ``hint:`` line) on stderr, unwrapped, markup in it escaped."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    if hint:
        err_console.print(f"  [dim]hint:[/] {escape(hint)}", soft_wrap=True)


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


MS_MAX = 2**63 - 1
"""The latest instant a store can hold: its timestamps are signed 64-bit integers of ms (SQLite, PostgreSQL)."""


def ms_option(value: str | None, flag: str) -> int | None:
    """ms since the epoch from an integer or an ISO-8601 date/time (UTC when no zone is given); a value past what
    a store's 64-bit timestamps can hold is a :class:`~shoparena.errors.ConfigError`."""
    from shoparena.errors import ConfigError

    if value is None:
        return None
    hint = "ms since the epoch (at most 2**63-1) or ISO-8601, e.g. 2026-05-01T12:00"
    if value.isdigit():
        ms = int(value)
    else:
        try:
            dt = datetime.fromisoformat(value)
            ms = int((dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp() * 1000)
        except (ValueError, OverflowError):
            raise ConfigError(f"bad {flag} {value!r}", hint=hint) from None
    if not -MS_MAX - 1 <= ms <= MS_MAX:
        raise ConfigError(f"{flag} {value!r} is outside the range a store's timestamps can hold", hint=hint)
    return ms


SEED_MAX = 2**64 - 1
"""The largest seed: seeds are unsigned 64-bit integers (numpy's and torch's generators take no more)."""


def episode_tokens_option() -> Any:
    """The ``--episode-tokens`` option of the commands that run episodes (``run``, ``evaluate``): the episode clock in
    generated tokens (:attr:`shoparena.validator.run.RunConfig.episode_tokens`), a whole number ≥ 1."""
    import typer

    from shoparena.validator import EPISODE_TOKENS_MAX

    return typer.Option("--episode-tokens", min=1, max=EPISODE_TOKENS_MAX, help="Completion tokens per episode; one that asks for more is "
                                                        "timed out. A clock that does not depend on --concurrency "
                                                        "(default: the wall clock --timeout only).")


def seed_option(help: str, *names: str) -> Any:
    """The ``--seed`` option every seeded command takes: a whole number in 0 … 2**64-1, checked at parsing (a
    usage error naming the range) before any work starts."""
    import typer

    def check(value: int | None) -> int | None:
        if value is not None and not 0 <= value <= SEED_MAX:
            raise typer.BadParameter(f"{value} is outside 0 … 2**64-1 ({SEED_MAX})")
        return value

    return typer.Option(*(names or ("--seed",)), help=help, callback=check)


def finite(low: float | None = None, *, above: bool = False) -> Callable[[float | None], float | None]:
    """A typer callback for float options: refuses NaN and ±inf, and values below ``low`` (or equal to it when
    ``above``), as a usage error naming the option."""
    import math

    import typer

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value):
            raise typer.BadParameter(f"{value} is not a finite number")
        if low is not None and (value <= low if above else value < low):
            raise typer.BadParameter(f"{value} must be {'>' if above else '≥'} {low:g}")
        return value

    return check


def persistent_store(url: str | None) -> str | None:
    """``url`` if it names a store that outlives the process; an in-memory SQLite URL (``sqlite://``) is a
    :class:`~shoparena.errors.ConfigError` for commands whose records must be kept (they would all be lost)."""
    from shoparena.db.engine import parse_url
    from shoparena.errors import ConfigError

    if url is None:
        return None
    u = parse_url(url)
    if u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:"):
        raise ConfigError(f"store {url!r} is in memory: every record would be lost at exit",
                          hint="use a file, e.g. sqlite:///runs/trajectories.db, or postgresql://…")
    return url


def output_file(path: Path, flag: str = "--out", *, force: bool = True,
                inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = ()) -> Path:
    """``path`` if a file can be written there: a directory, a path inside an artefact directory (its files belong
    to the command that wrote it), one of ``inputs`` (``(flag, path)``) or a path inside one, and an existing file
    unless ``force`` are a :class:`~shoparena.errors.ConfigError`."""
    from shoparena.artefact import claim_file
    from shoparena.errors import ConfigError

    claim_file(path, inputs=inputs, flag=flag)
    if path.exists() and not force:
        raise ConfigError(f"{flag} {path} already exists", hint="pass --force to overwrite it, or another path")
    return path


def http_url(value: str | None) -> str | None:
    """A typer callback for a server's base URL: ``http(s)://host[:port]`` (a usage error otherwise, before any
    request is tried)."""
    from urllib.parse import urlsplit

    import typer

    if value is None:
        return None
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in 0 … 65535
    except ValueError:
        raise typer.BadParameter(f"{value!r} has a bad port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(f"{value!r} is not an http(s) URL, e.g. http://127.0.0.1:8090")
    return value


def sandbox_name(value: str | None) -> str | None:
    """A typer callback for ``--sandbox``: a registered sandbox backend (or an alias of one), checked at parsing so
    that a typo is a usage error before anything is created."""
    import typer

    from shoparena.errors import closest
    from shoparena.validator import SANDBOXES, sandbox_names

    if value is not None and value not in SANDBOXES:
        names = sandbox_names()
        near = closest(value, names)
        raise typer.BadParameter(f"{value!r} is not a sandbox backend: one of {', '.join(names)}"
                                 + (f" (did you mean {near!r}?)" if near else ""))
    return value


def one_of(valid: tuple[str, ...]) -> Callable[[Any], Any]:
    """A typer callback for a string option (or a repeatable one): every value must be one of ``valid`` (a usage
    error naming the closest valid value otherwise)."""
    import typer

    from shoparena.errors import closest

    def check(values: Any) -> Any:
        for value in [values] if isinstance(values, str) else values or []:
            if value not in valid:
                near = closest(value, valid)
                raise typer.BadParameter(f"{value!r} is not one of {', '.join(valid)}"
                                         + (f" (did you mean {near!r}?)" if near else ""))
        return values

    return check


def repeated_option(command: Any, args: list[str]) -> tuple[str, str] | None:
    """The first single-valued option ``args`` give twice to ``command``, and how: ``None`` if there is none.

    Click keeps the last value of a repeated option that is not declared ``multiple``, so ``--model A --model B``
    would run B alone and report success. Refusing the repeat is the only reading that loses nothing. ``command``
    is the (typer-built) click command the arguments are for; they are parsed with its own parser, so an option's
    value that looks like an option name is not mistaken for one. A flag repeated with the same spelling means the
    same thing and passes; a flag and its negation (``--report --no-report``) are refused. Returns the option as
    spelled first and a description of the conflict; arguments the parser refuses are left to the command to report.
    """
    import typer._click.core as click_core

    ctx = click_core.Context(command, info_name=command.name, resilient_parsing=True)
    try:
        parser = command.make_parser(ctx)
        _, _, order = parser.parse_args(args=list(args))
    except Exception:  # the real parse reports what is wrong, with the command's own message
        return None
    seen: set[int] = set()
    for param in order:
        if getattr(param, "param_type_name", "") != "option" or param.multiple or param.count:
            continue
        if id(param) not in seen:
            seen.add(id(param))
            continue
        name = max(param.opts, key=len)
        if not param.is_flag:
            return name, "given more than once; it takes one value (the last would silently win)"
        tokens = set(args[: args.index("--")] if "--" in args else args)
        if tokens & set(param.opts) and tokens & set(param.secondary_opts):
            other = max(param.secondary_opts, key=len)
            return name, f"given together with {other}; they contradict each other"
    return None
