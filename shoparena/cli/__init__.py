"""The ``shoparena`` command: a thin typer face over the library, one module per command group.

Each command parses its options, makes one library call and renders the result. Library errors
(:class:`shoparena.errors.ShopArenaError`) are printed without a traceback and exit with their stable code.
"""

from __future__ import annotations

import sys

import typer

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
from shoparena.cli import store as store_cli
from shoparena.cli._common import err_console
from shoparena.errors import ShopArenaError

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
app.command("serve")(llm.serve)
app.command("run")(run.run)
app.command("validate")(validate.validate)
app.command("submit")(submit.submit)
app.command("search")(search.search)
app.command("score")(score.score)
app.command("demo")(demo.demo)
app.command("train")(train.train)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        app(args=argv, prog_name="shoparena", standalone_mode=False)
    except ShopArenaError as exc:
        err_console.print(f"[bold red]error:[/] {exc.message}", soft_wrap=True)  # one line, however long
        if exc.hint:
            err_console.print(f"  [dim]hint:[/] {exc.hint}", soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
