"""Body limits hold under load: a 110 MB upload is cut off at the limit while ``/health`` keeps answering, and a
chunked body (no ``Content-Length``) is counted as it streams, so an oversized POST can neither fill the server's
memory nor block ``/health``."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from shoparena._http import BackgroundServer
from shoparena.llm.serve import MAX_BODY_BYTES, create_app
from tests.gateway import DIRECTIVE, directive
from tests.http import assert_json_error, chunked, raw_request
from tests.http.conftest import GATEWAY_BODY_CAP, EchoBackend, Target

MiB = 1024 * 1024
CHAT = "/v1/chat/completions"


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _upload(url: str, total: int, out: dict[str, Any]) -> None:
    """Stream ``total`` bytes as a chunked POST on a raw socket until the server stops reading; then read."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=20)
    chunk = b"x" * MiB
    sent = 0
    try:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: {parts.hostname}\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        while sent < total:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        sock.sendall(b"0\r\n\r\n")
    except OSError as exc:  # the server closed the connection after its 413
        out["send_error"] = type(exc).__name__
    out["sent"] = sent
    try:
        out["answer"] = sock.recv(65536)
    except OSError:
        out["answer"] = b""
    sock.close()


def test_a_110_mb_upload_is_cut_off_while_health_answers() -> None:
    with BackgroundServer(create_app(EchoBackend())) as srv:
        before = _rss()
        out: dict[str, Any] = {}
        uploader = threading.Thread(target=_upload, args=(srv.url, 110 * MiB, out), daemon=True)
        t0 = time.monotonic()
        uploader.start()
        answered = 0
        while uploader.is_alive() and time.monotonic() - t0 < 20:
            resp = httpx.get(f"{srv.url}/health", timeout=5)
            assert resp.status_code == 200 and resp.json()["status"] == "ok"
            answered += 1
        uploader.join(timeout=20)
        assert not uploader.is_alive(), "the upload did not end within 20 s"
        assert answered >= 1
        assert out["sent"] < 110 * MiB, out  # the server stopped reading at its limit
        if out["answer"]:  # the 413 is usually read before the connection resets
            assert out["answer"].startswith(b"HTTP/1.1 413"), out["answer"][:200]
        assert _rss() - before < 60 * MiB  # at most the 16 MiB limit was held, never the 110 MB
        # and the server still serves normal requests on new connections
        ok = httpx.post(f"{srv.url}{CHAT}", json={"messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200
    assert MAX_BODY_BYTES == 16 * MiB


def test_a_declared_110_mb_body_is_refused_before_it_is_read(serve: Target) -> None:
    t0 = time.monotonic()
    status, headers, raw = raw_request(serve.url, "POST", CHAT, {"Content-Type": "application/json",
                                                                 "Content-Length": str(110 * MiB)})
    assert time.monotonic() - t0 < 10  # not a byte of the body was sent: only a refusal by header can answer
    body = assert_json_error(status, headers["content-type"], raw, 413, "bytes")
    assert body["error"]["type"] == "invalid_request_error"


def test_a_chunked_body_is_counted_as_it_streams() -> None:
    with BackgroundServer(create_app(EchoBackend(), max_body_bytes=1024)) as srv:
        small = orjson.dumps({"messages": [{"role": "user", "content": "fits"}]})
        status, _, raw = raw_request(srv.url, "POST", CHAT, {"Content-Type": "application/json",
                                                             "Transfer-Encoding": "chunked"}, chunked(small, 16))
        assert status == 200 and orjson.loads(raw)["choices"][0]["message"]["content"] == "fits"
        big = orjson.dumps({"messages": [{"role": "user", "content": "y" * 4000}]})
        status, headers, raw = raw_request(srv.url, "POST", CHAT, {"Content-Type": "application/json",
                                                                   "Transfer-Encoding": "chunked"}, chunked(big))
        assert_json_error(status, headers["content-type"], raw, 413, "1024 bytes")


def test_the_gateway_counts_a_chunked_body_against_the_run_cap(gateway: Target) -> None:
    gw = gateway.extra["gateway"]
    run = gw.open_run("chunked", models=[DIRECTIVE])
    auth = {"Authorization": f"Bearer {run.token}", "Transfer-Encoding": "chunked"}
    fits = orjson.dumps({"model": DIRECTIVE, "messages": directive("small")})
    status, _, raw = raw_request(gateway.url, "POST", "/inference/chat/completions", auth, chunked(fits, 64))
    assert status == 200 and orjson.loads(raw)["choices"][0]["message"]["content"] == "small"
    big = orjson.dumps({"model": DIRECTIVE, "messages": directive("z" * (2 * GATEWAY_BODY_CAP))})
    try:
        status, headers, raw = raw_request(gateway.url, "POST", "/inference/chat/completions", auth, chunked(big))
    except ConnectionResetError:  # the refusal closed the socket before the client read it (a race on loopback)
        pass
    else:
        assert_json_error(status, headers["content-type"], raw, 413, str(GATEWAY_BODY_CAP))
    assert [r.status for r in gw.close_run(run.token)] == [200, 413]  # the refusal is logged too
