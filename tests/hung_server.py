"""Model servers that hang, on a real loopback TCP port: one accepts connections and never answers, one sends
its headers and stalls the body, one drips its body a byte at a time (each byte well within a read timeout), and
one answers ``GET`` (``/v1/models``: it looks alive) but never answers a chat completion."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Mode = Literal["silent", "headers", "drip", "chat"]


@contextmanager
def hung_server(mode: Mode) -> Iterator[str]:
    """Yields the ``http://127.0.0.1:PORT/v1`` base URL of a server that hangs as ``mode`` says."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve(conn: socket.socket) -> None:
        try:
            request = conn.recv(65536)
            if mode == "chat" and request.startswith(b"GET "):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
                             b"Connection: close\r\n\r\n{\"data\": []}")
                return
            if mode in ("silent", "chat"):
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
            while mode == "drip" and not stop.wait(0.2):
                conn.sendall(b" ")
        except OSError:
            pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()
        for conn in conns:
            conn.close()
