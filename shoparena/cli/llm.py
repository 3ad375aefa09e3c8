"""``shoparena llm``: serve any model URI as an OpenAI-compatible ``/v1/chat/completions`` server."""

from __future__ import annotations

from typing import Annotated

import typer

from shoparena.cli._common import err_console

app = typer.Typer(help="Language-model backends: serve one over the OpenAI API.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Language-model backends (a group even with one command, so ``llm serve`` keeps its name)."""


@app.command()
def serve(
    model: Annotated[str, typer.Option("--model", help="Model URI: hf:<dir>, policy:<name> or openai:<url>/<model>.")],
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    uds: Annotated[str | None, typer.Option(help="Listen on this Unix socket instead of TCP.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Model name clients send (default: the backend's).")]
    = None,
) -> None:
    """Serve POST /v1/chat/completions, GET /v1/models and GET /health for one model."""
    from shoparena._http import serve_forever
    from shoparena.llm.serve import create_app
    from shoparena.llm.types import get_backend

    backend = get_backend(model)
    if uds is None:  # a port in use is one clear error here, before "serving" is printed
        from shoparena._http import bind_socket

        bind_socket(host, port).close()
    served = name or backend.name
    err_console.print(f"serving {model} as {served!r} on {uds or f'http://{host}:{port}/v1'}")
    serve_forever(create_app(backend, model_name=served), host=host, port=port, uds=uds)
