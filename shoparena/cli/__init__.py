"""The ``shoparena`` command: a thin typer face over the library, one module per command group.

Each command parses its options, makes one library call and renders the result. Library errors
(:class:`shoparena.errors.ShopArenaError`), usage errors and bad files are printed as one ``error:`` line (plus a
hint) without a traceback and exit with their stable code (the table is in the README). A module of an optional
extra that is not installed is a usage error naming the extra to install (:mod:`shoparena.cli._extras`).
"""

from __future__ import annotations

import gzip
import os
import sys
import zlib
from typing import Any, NoReturn

import typer
import typer._click.exceptions as _typer_click

from shoparena.cli import (
    arena,
    catalog,
    corpus,
    demo,
    llm,
    problems,
    run,
    score,
    search,
    submit,
    train,
    validate,
)
from shoparena.cli import evaluate as evaluate_cli
from shoparena.cli import judge as judge_cli
from shoparena.cli import loop as loop_cli
from shoparena.cli import models as models_cli
from shoparena.cli import reproduce as reproduce_cli
from shoparena.cli import store as store_cli
from shoparena.cli import web as web_cli
from shoparena.cli._common import print_error, repeated_option
from shoparena.cli._extras import missing_extra, needs_extra
from shoparena.cli.pipes import exit_if_closed_pipe, flush_stdout
from shoparena.errors import BackendError, ConfigError, DataError, NotFoundError, ShopArenaError

app = typer.Typer(
    name="shoparena",
    help="Agent arenas as a trajectory factory for agentic commerce.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog.app, name="catalog")
app.add_typer(problems.app, name="problems")
app.add_typer(llm.app, name="llm")
app.add_typer(store_cli.app, name="store")
app.add_typer(arena.app, name="arena")
app.add_typer(corpus.app, name="corpus")
app.add_typer(models_cli.app, name="models")
app.add_typer(judge_cli.app, name="judge")
app.add_typer(reproduce_cli.app, name="reproduce")
app.command("serve")(llm.serve)
app.command("run")(run.run)
app.command("validate")(validate.validate)
app.command("submit")(submit.submit)
app.command("search")(search.search)
app.command("score")(score.score)
app.command("demo")(demo.demo)
app.command("train")(needs_extra("train", "train")(train.train))
app.command("evaluate")(evaluate_cli.evaluate)
app.command("loop")(loop_cli.loop)
app.command("web")(web_cli.web)


try:  # typer vendors its own click; a plain click may still raise from third-party callbacks
    import click.exceptions as _click

    _CLICK_ERRORS: tuple[type[Exception], ...] = (_typer_click.ClickException, _click.ClickException)
    _EXITS: tuple[type[Exception], ...] = (typer.Exit, _click.Exit)
    _ABORTS: tuple[type[Exception], ...] = (typer.Abort, _click.Abort)
except ImportError:  # pragma: no cover - click is not a dependency of its own
    _CLICK_ERRORS, _EXITS, _ABORTS = (_typer_click.ClickException,), (typer.Exit,), (typer.Abort,)

EXIT_INTERNAL = 70
"""Exit code of an unexpected exception (a bug): distinct from every user error (EX_SOFTWARE)."""

EXIT_INTERRUPTED = 130
"""Exit code of a real Ctrl-C (SIGINT)."""


def _fail(message: str, hint: str | None, code: int) -> NoReturn:
    """Print one ``error:`` line (and a hint line) on stderr and exit with ``code``."""
    print_error(message, hint)
    sys.exit(code)


def _os_error(exc: OSError) -> tuple[str, str | None, int]:
    """A user-facing message, hint and exit code for a file-system error that escaped a command."""
    where = f": {exc.filename}" if exc.filename else ""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return f"{reason}{where}", "check the path", NotFoundError.exit_code
    if isinstance(exc, IsADirectoryError):
        return f"{reason}{where}", "pass a file, not a directory", ConfigError.exit_code
    if isinstance(exc, NotADirectoryError):
        return f"{reason}{where}", "pass a directory, not a file", ConfigError.exit_code
    if isinstance(exc, PermissionError):
        return f"{reason}{where}", "check the file's permissions", ConfigError.exit_code
    if isinstance(exc, FileExistsError):
        return f"{reason}{where}", "choose another path or remove the existing one", ConfigError.exit_code
    return f"{reason}{where}", None, ShopArenaError.exit_code


def _click_error(exc: Exception) -> tuple[str, str | None, int]:
    """Message, hint and exit code of a (typer-vendored or plain) click usage error."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)  # type: ignore[union-attr]
    ctx = getattr(exc, "ctx", None)
    hint = None
    if ctx is not None:
        hint = f"see `{ctx.command_path} --help`"
    code = getattr(exc, "exit_code", ConfigError.exit_code)
    if _missing_path(exc):  # a file or directory named on the command line that is not there (README: exit 4)
        return message, "check the path", NotFoundError.exit_code
    return message, hint, code if isinstance(code, int) and code else ConfigError.exit_code


def _missing_path(exc: Exception) -> bool:
    """Whether ``exc`` is typer's refusal of a path parameter declared ``exists=True`` that does not exist."""
    import re

    return type(exc).__name__ == "BadParameter" and re.fullmatch(
        r"(path|file|directory) '.*' does not exist\.", str(getattr(exc, "message", "")), re.S) is not None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs one command and turns every outcome into one exit code.

    A command's returned int (or ``typer.Exit``) is the exit code; library errors and usage errors print one
    ``error:`` line (plus a hint) without a traceback; a missing optional extra is exit 2 naming it; anything
    unexpected is an internal error (exit 70) whose traceback ``SHOPARENA_DEBUG=1`` shows. Exit codes are listed
    in the README.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if (repeat := _repeated(args)) is not None:
        flag, how = repeat
        _fail(f"{flag} {how}", f"give {flag} once; {_default_hint(ConfigError.exit_code, args)}",
              ConfigError.exit_code)
    try:
        rv = app(args=args, prog_name="shoparena", standalone_mode=False)
    except ShopArenaError as exc:
        _fail(exc.message, exc.hint or _default_hint(exc.exit_code, args), exc.exit_code)
    except _CLICK_ERRORS as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help is the answer, already printed
            sys.exit(exc.exit_code)
        _fail(*_click_error(exc))
    except _EXITS as exc:
        sys.exit(exc.exit_code)
    except _ABORTS as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, EOFError):  # typer turns EOFError (a truncated gzip, a closed stdin) into Abort
            _fail(*_eof_error(cause))
        if isinstance(cause, KeyboardInterrupt):
            _fail("interrupted", None, EXIT_INTERRUPTED)
        _fail("aborted", None, 1)
    except KeyboardInterrupt:
        _fail("interrupted", None, EXIT_INTERRUPTED)
    except EOFError as exc:
        _fail(*_eof_error(exc))
    except (gzip.BadGzipFile, zlib.error) as exc:
        _fail(f"corrupt compressed file: {exc}", "the file is damaged or not gzip", DataError.exit_code)
    except UnicodeDecodeError as exc:
        _fail(f"not UTF-8 text: {exc}", "pass a UTF-8 text file", DataError.exit_code)
    except OSError as exc:
        exit_if_closed_pipe(exc)  # the reader of our output went away (| head): not an error worth a line
        message, hint, code = _os_error(exc)
        _fail(message, hint or _default_hint(code, args), code)
    except Exception as exc:
        if (needs := missing_extra(exc, _command_path(args))) is not None:
            _fail(needs.message, needs.hint, needs.exit_code)
        if os.environ.get("SHOPARENA_DEBUG"):
            raise
        if _is_transport_error(exc):
            _fail(*_transport_error(exc))
        if _is_validation_error(exc):  # a config model built from option values refused one of them
            first = exc.errors()[0]  # type: ignore[attr-defined]
            where = ".".join(str(part) for part in first.get("loc", ())) or type(exc).__name__
            _fail(f"invalid {where}: {first.get('msg', exc)}", "check the options' values", ConfigError.exit_code)
        _fail(f"internal error: {type(exc).__name__}: {exc}",
              "this is a bug; rerun with SHOPARENA_DEBUG=1 for the traceback and report it", EXIT_INTERNAL)
    flush_stdout()  # a reader that stopped early is met here, not by the interpreter's flush at exit
    if isinstance(rv, int) and not isinstance(rv, bool):
        sys.exit(rv)


_DEFAULT_HINTS = {
    DataError.exit_code: "the file or store is malformed, truncated or of another kind: check it, or make it again "
                         "with the command that writes it",
    NotFoundError.exit_code: "check the path, name or URL",
    BackendError.exit_code: "check that the model or HTTP server is running and reachable, and its logs",
}


def _default_hint(code: int, args: list[str]) -> str:
    """The hint of an error raised without one: what its exit code means (README, "Exit codes")."""
    if code == ConfigError.exit_code or code not in _DEFAULT_HINTS:
        return f"see `{' '.join(['shoparena', *_command_path(args).split()])} --help`"
    return _DEFAULT_HINTS[code]


def _repeated(args: list[str]) -> tuple[str, str] | None:
    """A single-valued option given twice to the command ``args`` name (see :func:`repeated_option`)."""
    command, path = _resolve(args)
    if getattr(command, "commands", None) is not None:  # a group: no command named, nothing to check
        return None
    return repeated_option(command, args[len(path):])


def _resolve(args: list[str]) -> tuple[Any, list[str]]:
    """The (typer-built click) command ``args`` name, and the names leading to it after ``shoparena``."""
    command = typer.main.get_command(app)
    path: list[str] = []
    for arg in args:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            break
        path.append(arg)
        command = sub
    return command, path


def _command_path(args: list[str]) -> str:
    """The command ``args`` name, as typed after ``shoparena`` (``"train"``, ``"models prepare"``)."""
    return " ".join(_resolve(args)[1])


def _is_transport_error(exc: Exception) -> bool:
    """An httpx connection failure or timeout (a server that is down, a wrong URL) — checked without importing
    httpx when no command did."""
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(exc, httpx.TransportError)


def _is_validation_error(exc: Exception) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


def _transport_error(exc: Exception) -> tuple[str, str | None, int]:
    try:
        url = f" {exc.request.url}"  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        url = ""
    return (f"cannot reach{url}: {exc or type(exc).__name__}", "check the URL and that the server is running",
            BackendError.exit_code)


def _eof_error(exc: EOFError) -> tuple[str, str | None, int]:
    text = str(exc) or "unexpected end of input"
    return f"truncated input: {text}", "the file is cut short (an interrupted download or copy?)", DataError.exit_code
