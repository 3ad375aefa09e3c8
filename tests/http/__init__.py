"""Bad input against every HTTP service, over real loopback servers.

Helpers: :func:`raw_request` sends a request head (and optionally chunks) over a plain socket, so a test can claim a
huge ``Content-Length`` without sending the body, or stream a chunked body; :func:`error_message` reads the one-line
message out of each service's error shape.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import orjson

TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages")


def raw_request(url: str, method: str, path: str, headers: dict[str, str], chunks: Iterable[bytes] = (),
                *, timeout: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """Send the head of a request and then ``chunks`` as they are (already framed by the caller), and read the
    answer: ``(status, headers, body)``."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        for chunk in chunks:
            try:
                conn.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server refused the rest (e.g. 413 + Connection: close): read its answer if it is there
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def chunked(data: bytes, size: int = 1024) -> list[bytes]:
    """``data`` in HTTP/1.1 chunked framing, ending with the last chunk."""
    out = [b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size]) for i in range(0, len(data), size)]
    return [*out, b"0\r\n\r\n"]


def error_message(body: Any) -> str:
    """The message of any service's JSON error: ``{"error": str}`` (search), ``{"error": {"message"}}`` (model
    server, gateway), ``{"error": name, "detail": str}`` (arena)."""
    err = body["error"]
    if isinstance(err, dict):
        return str(err["message"])
    return str(body.get("detail") or err)


def assert_json_error(status: int, content_type: str, raw: bytes, expected: int, says: str | None = None) -> Any:
    """A 4xx/5xx with a JSON error body that names the problem and carries no traceback."""
    text = raw.decode("utf-8", "replace")
    assert status == expected, f"{status} != {expected}: {text[:300]}"
    assert content_type.startswith("application/json"), content_type
    body = orjson.loads(raw)
    message = error_message(body)
    assert message.strip(), body
    assert not any(m in text for m in TRACEBACK_MARKERS), text
    if says is not None:
        assert says.lower() in message.lower(), message
    return body
