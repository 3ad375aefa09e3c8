"""The gateway's HTTP face (FastAPI): one catch-all route, so every request is answered and logged by our code.

Routes: ``GET /health`` (no auth); ``GET /search/find_product`` and ``GET /search/view_product_information``
(upstream parameter strings); ``POST /inference/chat/completions`` (OpenAI-compatible, ``stream`` too).
``/search/get_product_raw`` is 403 for everyone, any other ``/search/*`` path 403, anything else 404, a known path
with the wrong method 405.
Every request except ``/health`` needs ``Authorization: Bearer <run token>`` (401 otherwise). Bodies over the
run's ``max_body_bytes`` are refused with 413 before they are read in full: by ``Content-Length`` before a byte
is read, a chunked body as soon as the count passes the cap (the limit is per run, so it is checked here, after
the token, rather than by :class:`shoparena._http.BodyLimit`; an unauthenticated body is never read). Every
answer, an unexpected failure included (500, no traceback), carries :func:`~shoparena.llm.gateway.core.error_body`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from shoparena import __version__
from shoparena._http import BackgroundServer, guard
from shoparena.env.tools import SEARCH_TOOLS
from shoparena.llm.gateway.core import Gateway, error_body

__all__ = ["GatewayServer", "create_app"]

SEARCH_PATHS = {f"/search/{name}": name for name in sorted(SEARCH_TOOLS)}
"""Gateway path → the search tool it answers (one endpoint per search primitive)."""
RAW_PATH = "/search/get_product_raw"
CHAT_PATH = "/inference/chat/completions"
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_JSON = "application/json"


class _TooLarge(Exception):
    pass


def _error(status: int, message: str) -> Response:
    return Response(error_body(status, message), status_code=status, media_type=_JSON)


async def _read_body(request: Request, cap: int) -> bytes:
    """The body, refusing (``_TooLarge``) as soon as it is known to exceed ``cap`` bytes."""
    length = request.headers.get("content-length")
    if length is not None and (not length.strip().isdigit() or int(length) > cap):
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(gateway: Gateway) -> FastAPI:
    """The ASGI app serving ``gateway``."""
    app = FastAPI(title="shoparena gateway", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    guard(app, _error, max_body_bytes=None)

    async def dispatch(request: Request) -> Response:
        t0 = time.perf_counter()
        started = int(time.time() * 1000)
        path: str = request.scope["path"]
        method: str = request.scope["method"]
        if path == "/health" and method == "GET":
            return Response(orjson.dumps({"status": "ok", "version": __version__}), media_type=_JSON)
        params: dict[str, Any] = dict(request.query_params)
        auth = request.headers.get("authorization")
        state = gateway.authenticate(auth)
        token = auth[7:].strip() if auth and auth.startswith("Bearer ") else None
        kind = "search" if path.startswith("/search/") else "inference" if path.startswith("/inference/") else "other"

        def refuse(status: int, message: str) -> Response:
            code, body, media = gateway.refuse(state, kind, method, path, params, status, message, started, t0,
                                               token=token)
            return Response(body, status_code=code, media_type=media)

        if path == RAW_PATH:
            return refuse(403, "get_product_raw is not available to agents")
        if state is None:
            return refuse(401, "missing, unknown or closed run token (send Authorization: Bearer <token>)")
        tool = SEARCH_PATHS.get(path)
        if tool is not None:
            if method != "GET":
                return refuse(405, f"{path} accepts GET only")
            code, body, media = gateway.search_call(state, tool, params, started, t0)
            return Response(body, status_code=code, media_type=media)
        if path == CHAT_PATH:
            if method != "POST":
                return refuse(405, f"{path} accepts POST only")
            try:
                raw = await _read_body(request, state.limits.max_body_bytes)
            except _TooLarge:
                response = refuse(413, f"request body over {state.limits.max_body_bytes} bytes "
                                       "(or a Content-Length that is not a number)")
                response.headers["Connection"] = "close"  # the rest of the upload is not read
                return response
            code, body, media = await gateway.inference_call(state, raw, started, t0)
            return Response(body, status_code=code, media_type=media)
        if kind == "search":
            return refuse(403, f"{path} is not available to agents")
        return refuse(404, f"no such endpoint {path}")

    app.add_route("/{path:path}", dispatch, methods=_METHODS)
    app.state.gateway = gateway
    return app


class GatewayServer(BackgroundServer):
    """A gateway served on a background thread; ``address`` is what ``SHOPARENA_GATEWAY`` should be set to."""

    def __init__(self, gateway: Gateway, *, host: str = "127.0.0.1", port: int = 0, uds: str | None = None,
                 uds_mode: int | None = None) -> None:
        self.gateway = gateway
        super().__init__(create_app(gateway), host=host, port=port, uds=uds)
        if uds is not None and uds_mode is not None:  # e.g. 0o666 when the sandbox runs as another uid
            os.chmod(uds, uds_mode)

    @property
    def address(self) -> str:
        """``unix:/path.sock`` or ``http://host:port``."""
        return f"unix:{self.uds}" if self.uds is not None else self.url

    def env(self, handle: Any, model: str | None = None) -> dict[str, str]:
        """The SDK environment of run ``handle`` on this server."""
        return handle.sdk_env(self.address, model)


