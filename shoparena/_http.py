"""HTTP plumbing shared by every service: run an ASGI app on a socket (TCP or Unix) in-process or in the foreground,
and guard it against bad input.

Tests and embedded deployments start real servers on loopback through :class:`BackgroundServer`; nothing here
ever binds a non-loopback address unless the caller asks for it.

:func:`guard` gives a FastAPI app the same answers to bad input everywhere, each in the service's own error shape
(``render(status, message) -> Response``): a request body over the service's limit is refused with 413 by
:class:`BodyLimit` (by ``Content-Length`` before anything is read; a chunked body is counted as it streams, so a
connection never holds more than the limit); a body that is not JSON where FastAPI expects JSON gets 400 and its
validation errors one 422 line naming the fields (never echoing the input); HTTP errors (404, 405, …) keep their
status; an unexpected exception becomes a 500 without a traceback in the body (the server logs it). Apps that let
FastAPI parse JSON add :class:`StrictJSON`, so ``NaN`` and ``Infinity`` are refused rather than read as numbers.

Limits per service: search 64 KiB (GET only), model server 16 MiB (``create_app(max_body_bytes=…)``), arena API
max(8 MiB, ``max_code_bytes`` + 1 MiB), gateway the run's own ``Limits.max_body_bytes`` (checked in its app).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["BackgroundServer", "BodyLimit", "BodyTooLarge", "ErrorRenderer", "MiB", "StrictJSON", "bind_socket",
           "guard", "serve_forever"]

MiB = 1024 * 1024
ErrorRenderer = Callable[[int, str], Response]
"""``(HTTP status, one-line message) -> Response`` in a service's own error shape."""
ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """A request body over the limit (an ``HTTPException``, so FastAPI's body parsing lets it through as 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes", headers={"Connection": "close"})


class BodyLimit:
    """ASGI middleware refusing request bodies over ``max_bytes`` with a 413 rendered by ``render``.

    A ``Content-Length`` over the limit is refused before the body is read (and one that is not a number with
    400); a chunked body is counted as the app reads it and :class:`BodyTooLarge` is raised once it passes the
    limit. The 413 closes the connection, so the rest of an upload is not read."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, render: ErrorRenderer) -> None:
        self.app, self.max_bytes, self.render = app, max_bytes, render

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        if length is not None:
            text = length.decode("latin-1").strip()
            if not text.isdigit():
                await self._refuse(400, f"Content-Length {text[:40]!r} is not a number", scope, receive, send)
                return
            if int(text) > self.max_bytes:
                await self._refuse(413, f"request body over {self.max_bytes} bytes", scope, receive, send)
                return
        seen = 0
        started = False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(413, f"request body over {self.max_bytes} bytes", scope, receive, send)

    async def _refuse(self, status: int, message: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
        response = self.render(status, message)
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


class StrictJSON:
    """ASGI middleware refusing, with 400, a body declared as JSON that strict JSON parsing rejects (``NaN``,
    ``Infinity``, a number beyond a double, bad UTF-8, truncated text) before the app sees it: Python's ``json``
    (FastAPI's parser) would accept ``NaN`` and let it reach a score. The body is buffered once (put
    :class:`BodyLimit` outside this middleware) and replayed to the app."""

    def __init__(self, app: ASGIApp, *, render: ErrorRenderer) -> None:
        self.app, self.render = app, render

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        media = next((v for k, v in scope.get("headers", ()) if k == b"content-type"), b"")
        media = media.split(b";")[0].strip().lower()
        if scope["type"] != "http" or not (media == b"application/json" or media.endswith(b"+json")):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        if body.strip():
            import orjson

            try:
                orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                await self.render(400, f"the request body is not valid JSON: {exc}")(scope, receive, send)
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _validation_line(errors: Any) -> str:
    parts = []
    for err in list(errors)[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def guard(app: Any, render: ErrorRenderer, *, max_body_bytes: int | None, strict_json: bool = False) -> Any:
    """Give the FastAPI ``app`` the shared answers to bad input (module docstring), rendered by ``render``;
    ``max_body_bytes=None`` leaves body limits to the app; ``strict_json`` adds :class:`StrictJSON` (for apps whose
    routes let FastAPI parse JSON bodies). Returns ``app``."""
    from fastapi.exceptions import RequestValidationError

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        response = render(exc.status_code, str(exc.detail))
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        return response

    async def invalid(_request: Request, exc: Exception) -> Response:
        errors = getattr(exc, "errors", list)()
        if any(err.get("type") == "json_invalid" for err in errors):
            return render(400, "the request body is not valid JSON")
        return render(422, _validation_line(errors))

    async def crashed(_request: Request, exc: Exception) -> Response:  # Starlette re-raises it: uvicorn logs it
        return render(500, f"internal server error ({type(exc).__name__}); the server log has the details")

    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, crashed)
    if strict_json:
        app.add_middleware(StrictJSON, render=render)
    if max_body_bytes is not None:  # added last: the outermost, so it counts what StrictJSON reads
        app.add_middleware(BodyLimit, max_bytes=max_body_bytes, render=render)
    return app


def _clear_stale_socket(path: Path) -> None:
    """Remove a Unix socket a stopped server left at ``path``; anything else there (a file, a directory, a socket a
    live server still answers on) is a :class:`ConfigError`, never deleted."""
    from shoparena.errors import ConfigError

    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"cannot listen on {path}: it exists and is not a socket",
                          hint="choose another --uds path; nothing there was touched")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # nobody answers: a stopped server's leftover
        return
    finally:
        probe.close()
    raise ConfigError(f"cannot listen on {path}: a server is already listening there",
                      hint="stop it first, or choose another --uds path")


def bind_socket(host: str = "127.0.0.1", port: int = 0, *, uds: str | os.PathLike[str] | None = None) -> socket.socket:
    """A listening socket: TCP on ``host:port`` (port 0 = any free port) or a Unix socket at ``uds``.

    A port in use, out of range or not ours to take, or an unusable socket path, is a :class:`ConfigError`."""
    from shoparena.errors import ConfigError

    where = str(uds) if uds is not None else f"{host}:{port}"
    if uds is None and not 0 <= port <= 65535:
        raise ConfigError(f"port {port} is out of range", hint="use a TCP port from 1 to 65535")
    sock = None
    try:
        if uds is not None:
            path = Path(uds)
            _clear_stale_socket(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        if sock is not None:
            sock.close()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"cannot listen on {where}: {reason}",
                          hint="choose another --port (or --host / --uds), or stop what is using it") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class BackgroundServer:
    """An ASGI app served by uvicorn on its own thread; ``url`` is ready when the constructor returns.

    Use as a context manager (``with BackgroundServer(app) as srv: httpx.get(srv.url + "/health")``).
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0,
                 uds: str | os.PathLike[str] | None = None, log_level: str = "warning") -> None:
        self.sock = bind_socket(host, port, uds=uds)
        self.uds = str(uds) if uds is not None else None
        self._socket_file = _socket_identity(uds)
        if self.uds is None:
            bound_host, bound_port = self.sock.getsockname()[:2]
            self.url = f"http://{bound_host}:{bound_port}"
        else:
            self.url = "http://localhost"
        config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        _remove_socket_file(self.uds, self._socket_file)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(app: Any, *, host: str = "127.0.0.1", port: int = 0,
                  uds: str | os.PathLike[str] | None = None, log_level: str = "info") -> None:
    """Serve ``app`` in the foreground until interrupted (the CLI's ``serve`` commands)."""
    sock = bind_socket(host, port, uds=uds)
    ours = _socket_identity(uds)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        _remove_socket_file(uds, ours)


def _socket_identity(uds: str | os.PathLike[str] | None) -> tuple[int, int] | None:
    """(device, inode) of the socket file a server just bound, so that only that file is removed at its stop."""
    if uds is None:
        return None
    try:
        st = os.lstat(uds)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def _remove_socket_file(uds: str | os.PathLike[str] | None, ours: tuple[int, int] | None) -> None:
    """Remove the socket file a stopped server bound, unless something else has taken its path since."""
    if uds is None or ours is None or _socket_identity(uds) != ours:
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(uds)
