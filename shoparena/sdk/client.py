"""The gateway client: stdlib only (``http.client``), keep-alive connection per thread, TCP or Unix socket.

Configured by the environment the runner / sandbox sets: ``SHOPARENA_GATEWAY`` (``http://host:port[/prefix]``
or ``unix:/path/to.sock``), ``SHOPARENA_RUN_TOKEN`` (the run's capability token) and ``SHOPARENA_MODEL`` (the
default model URI). Connection failures (refused, reset, a keep-alive connection the server closed) are retried
with a short backoff. A 429 of the per-run *rate* limit is waited out (it carries ``retry_after``; up to
``max_rate_wait`` seconds in all); any other error answer raises :class:`GatewayError` at once.
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

try:  # optional speed-up; the SDK works with the stdlib alone
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        return _orjson.dumps(obj)

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    import json as _json

    def _dumps(obj: Any) -> bytes:
        return _json.dumps(obj, ensure_ascii=False).encode()

    _loads = _json.loads

__all__ = ["ENV_GATEWAY", "ENV_MODEL", "ENV_TOKEN", "Gateway", "GatewayError", "default_gateway"]

ENV_GATEWAY = "SHOPARENA_GATEWAY"
ENV_TOKEN = "SHOPARENA_RUN_TOKEN"
ENV_MODEL = "SHOPARENA_MODEL"
_RETRYABLE = (ConnectionError, http.client.CannotSendRequest, http.client.BadStatusLine, FileNotFoundError)


class GatewayError(Exception):
    """The gateway refused a request (``status`` = HTTP status) or could not be reached (``status`` = 0)."""

    def __init__(self, status: int, message: str, *, path: str = "") -> None:
        super().__init__(f"gateway {path or 'request'} failed ({status}): {message}" if status
                         else f"gateway unreachable: {message}")
        self.status = status
        self.message = message
        self.path = path


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class _TcpConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Gateway:
    """A client for one run. Arguments default to the environment; safe to share between threads."""

    def __init__(self, address: str | None = None, token: str | None = None, model: str | None = None, *,
                 timeout: float = 600.0, retries: int = 3, max_rate_wait: float = 60.0) -> None:
        address = address or os.environ.get(ENV_GATEWAY)
        if not address:
            raise GatewayError(0, f"no gateway address: set {ENV_GATEWAY} (http://host:port or unix:/path.sock)")
        self.address = address
        self.token = token if token is not None else os.environ.get(ENV_TOKEN, "")
        self.model = model or os.environ.get(ENV_MODEL) or None
        self.timeout = timeout
        self.retries = max(0, retries)
        self.max_rate_wait = max_rate_wait
        if address.startswith("unix:"):
            self._uds: str | None = address[len("unix:"):]
            self._host, self._port, self._prefix = "localhost", None, ""
        else:
            url = urllib.parse.urlsplit(address)
            if url.scheme != "http" or not url.hostname:
                raise GatewayError(0, f"bad gateway address {address!r}: use http://host:port or unix:/path.sock")
            self._uds, self._host, self._port = None, url.hostname, url.port or 80
            self._prefix = url.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # ── transport ─────────────────────────────────────────────────────────────────────────────────────
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._uds is not None:
                conn = _UnixConnection(self._uds, self.timeout)
            else:
                conn = _TcpConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                body: Any = None) -> Any:
        """One request; returns the decoded JSON answer. ``params`` with None values are left out."""
        url = self._prefix + path
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        headers = self._headers
        payload = None
        if body is not None:
            payload = _dumps(body)
            headers = {**headers, "Content-Type": "application/json"}
        waited = 0.0
        while True:
            status, data = self._send(method, url, payload, headers, path)
            if status == 200:
                return _loads(data)
            message, retry_after = _error_detail(data)
            if status == 429 and retry_after is not None and waited < self.max_rate_wait:
                delay = min(max(retry_after, 0.001), 1.0)
                time.sleep(delay)  # the rate limit is a throttle: wait it out (count limits are final)
                waited += delay
                continue
            raise GatewayError(status, message, path=path)

    def _send(self, method: str, url: str, payload: bytes | None, headers: dict[str, str],
              path: str) -> tuple[int, bytes]:
        for attempt in range(self.retries + 1):
            conn = self._conn()
            try:
                conn.request(method, url, body=payload, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.read()
            except _RETRYABLE as exc:
                conn.close()
                if attempt >= self.retries:
                    raise GatewayError(0, f"{self.address}: {type(exc).__name__}: {exc}", path=path) from exc
                time.sleep(0.05 * 2 ** attempt if attempt else 0.0)
            except (OSError, http.client.HTTPException) as exc:  # timeouts, truncated answers: not retried
                conn.close()
                raise GatewayError(0, f"{self.address}: {type(exc).__name__}: {exc}", path=path) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ── API ───────────────────────────────────────────────────────────────────────────────────────────
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def find_product(self, q: str, page: int | str = 1, shop_id: str | None = None, price: str | None = None,
                     sort: str | None = None, service: str | None = None) -> Any:
        """Upstream ``/find_product``: up to 10 items, or (strict search mode) an error observation dict."""
        return self.request("GET", "/search/find_product", params={
            "q": q, "page": str(page), "shop_id": shop_id, "price": price, "sort": sort, "service": service})

    def view_product_information(self, product_ids: str | Sequence[str]) -> Any:
        """Upstream ``/view_product_information`` for a comma string or a list of ids."""
        ids = product_ids if isinstance(product_ids, str) else ",".join(str(i) for i in product_ids)
        return self.request("GET", "/search/view_product_information", params={"product_ids": ids})

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
             model: str | None = None, temperature: float = 0.0, top_p: float = 1.0,
             max_tokens: int | None = None, seed: int | None = None, **extra: Any) -> dict[str, Any]:
        """One OpenAI chat completion (the response object as a dict). ``extra`` goes into the body as is
        (e.g. ``stop``, ``chat_template_kwargs``)."""
        body: dict[str, Any] = {"messages": messages, "temperature": temperature, "top_p": top_p}
        chosen = model or self.model
        if chosen:
            body["model"] = chosen
        if tools:
            body["tools"] = tools
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if seed is not None:
            body["seed"] = seed
        body.update({k: v for k, v in extra.items() if v is not None})
        return self.request("POST", "/inference/chat/completions", body=body)


def _error_detail(data: bytes) -> tuple[str, float | None]:
    """``(message, retry_after)`` of an error answer; ``retry_after`` only for a rate-limit 429."""
    try:
        decoded = _loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")[:500], None
    err = decoded.get("error") if isinstance(decoded, dict) else None
    if isinstance(err, dict):
        retry = err.get("retry_after") if err.get("type") == "rate_limited" else None
        return str(err.get("message", err)), float(retry) if isinstance(retry, int | float) else None
    return str(err if err is not None else decoded)[:500], None


_default: Gateway | None = None
_default_key: tuple[str | None, str | None, str | None] | None = None
_default_lock = threading.Lock()


def default_gateway() -> Gateway:
    """The client configured by the current environment (rebuilt when the variables change, as they do when a
    worker process runs one problem after another)."""
    global _default, _default_key
    key = (os.environ.get(ENV_GATEWAY), os.environ.get(ENV_TOKEN), os.environ.get(ENV_MODEL))
    client = _default
    if client is not None and key == _default_key:
        return client
    with _default_lock:
        if _default is None or key != _default_key:
            if _default is not None:
                _default.close()
            _default = Gateway()
            _default_key = key
        return _default
