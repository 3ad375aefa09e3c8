"""HTTP plumbing shared by every service: run an ASGI app on a socket (TCP or Unix) in-process or in the foreground.

Tests and embedded deployments start real servers on loopback through :class:`BackgroundServer`; nothing here
ever binds a non-loopback address unless the caller asks for it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

__all__ = ["BackgroundServer", "bind_socket", "serve_forever"]


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
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
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

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(app: Any, *, host: str = "127.0.0.1", port: int = 0,
                  uds: str | os.PathLike[str] | None = None, log_level: str = "info") -> None:
    """Serve ``app`` in the foreground until interrupted (the CLI's ``serve`` commands)."""
    sock = bind_socket(host, port, uds=uds)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
