"""``shoparena web``: serve the read-only pages (leaderboard, races, agents, records, trajectory viewer, corpus
and evaluation) and their JSON under ``/api/…`` over a trajectory store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shoparena.cli._common import persistent_store


def web(
    store: Annotated[str, typer.Option("--store", help="Store URL (sqlite:///path.db or postgresql://…); the arena "
                                       "pages appear when the arena wrote to the same database.",
                                       callback=persistent_store)],
    corpus: Annotated[Path | None, typer.Option(help="A `shoparena corpus build` output directory.")] = None,
    reports: Annotated[Path | None, typer.Option(help="A directory with `shoparena evaluate --report` output.")]
    = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8080,
) -> None:
    """Serve the arena's pages over STORE, read-only."""
    from shoparena._http import bind_socket, serve_forever
    from shoparena.web import Site, create_app

    site = Site(store, corpus=corpus, reports=reports)
    sock = bind_socket(host, port)  # a port in use is one clear error here, before "serving" is printed
    bound = sock.getsockname()[1]
    sock.close()
    print(f"serving {site.url} on http://{host}:{bound}/", file=sys.stderr, flush=True)
    serve_forever(create_app(site), host=host, port=bound)
