"""The gateway: search and inference for sandboxed agents, per-run tokens and limits, and the call log.

:class:`Gateway` holds the in-process search service, the chat backends (resolved by model URI and cached), the
run registry and the orphan log (requests with a missing, unknown or closed token). Its request methods are
framework-free and called by the thin FastAPI app in :mod:`shoparena.llm.gateway.app`; each returns
``(status, body, media type)`` and appends exactly one :class:`CallRecord`, refusals included. Requests still in
flight when their run closes land in :meth:`Gateway.orphan_calls` (the closed log never changes).

Inference: the OpenAI body is parsed with :mod:`shoparena.llm.wire` (the sampling fields only: ``messages`` and
``tools`` are checked for shape, hashed for the log and passed to the backend as they are); ``stream: true`` is
answered with one server-sent-events body holding the whole message. A generation still running (or waiting for
the model) when its run closes is abandoned (:mod:`shoparena.llm.abandon`) and answered 409, an orphan record.

Hot path: a search call is a dict lookup for the token, one short lock for limits, the search itself (the
pre-serialised JSON fast path of :class:`~shoparena.catalog.search.SearchService`), one attribution lookup and
a ``model_construct`` record. Searches run inline on the event loop, like the search server's handlers.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from shoparena.clock import Clock
from shoparena.env.protocol_native import coerce_reply
from shoparena.errors import ConfigError
from shoparena.llm.abandon import Abandoned, abandon_when
from shoparena.llm.gateway.calllog import CallKind, CallRecord, EmittedCall
from shoparena.llm.gateway.emitted import emitted_calls
from shoparena.llm.gateway.runs import Limits, RunHandle, RunRegistry, RunState
from shoparena.llm.types import ChatBackend
from shoparena.llm.wire import (
    MessageError,
    request_to_sampling,
    text_messages,
    to_openai_chunks,
    to_openai_response,
    validation_message,
)

__all__ = ["Gateway", "error_body"]

Backends = Callable[[str], ChatBackend] | Mapping[str, ChatBackend] | None
Reply = tuple[int, bytes, str]
"""``(HTTP status, body, media type)``."""
JSON = "application/json"
SSE = "text/event-stream"
_ONE_MESSAGE = [{"role": "user", "content": ""}]
_ERROR_TYPES = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 409: "run_closed", 413: "payload_too_large", 429: "rate_limited",
                500: "server_error", 502: "backend_error"}


def error_body(status: int, message: str, retry_after: float | None = None) -> bytes:
    """The JSON error every refusal carries: ``{"error": {"message", "type", "code"}}`` (OpenAI's shape). A 429
    of the rate limit has type ``rate_limited`` and ``retry_after`` (seconds); other 429s ``limit_exceeded``."""
    kind = _ERROR_TYPES.get(status, "error")
    if status == 429 and retry_after is None:
        kind = "limit_exceeded"
    err: dict[str, Any] = {"message": message, "type": kind, "code": status}
    if retry_after is not None:
        err["retry_after"] = round(retry_after, 4)
    return orjson.dumps({"error": err})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Gateway:
    """Search + inference behind per-run capability tokens, logging every call.

    ``search``: a :class:`~shoparena.catalog.search.SearchService` (fast path) or any ``SearchBackend``.
    ``backends``: model name → backend, as a mapping or a factory (default :func:`shoparena.llm.get_backend`);
    resolved once per model and cached. ``allowed_models``: the models any run may call (None = whatever the
    resolver accepts: pass an explicit set wherever agents are untrusted, since an ``openai:`` URI names a host).
    ``clock``: what the per-run rate limiter reads time from (default: the system clock).
    """

    def __init__(self, search: Any, backends: Backends = None, *, allowed_models: Iterable[str] | None = None,
                 limits: Limits | None = None, default_model: str | None = None,
                 clock: Clock | None = None) -> None:
        self.search = search
        self._fast = hasattr(search, "ranked_docs") and hasattr(search, "index")
        if allowed_models is not None:
            allowed: frozenset[str] | None = frozenset(allowed_models)
        else:  # a mapping is its own allowlist; a factory accepts whatever it can resolve
            allowed = frozenset(backends) if isinstance(backends, Mapping) else None
        self.runs = RunRegistry(allowed_models=allowed, limits=limits or Limits(), clock=clock)
        self.default_model = default_model
        if isinstance(backends, Mapping):
            self._backends: dict[str, ChatBackend] = dict(backends)
            self._resolve: Callable[[str], ChatBackend] = self._no_backend
        else:
            self._backends = {}
            if backends is None:
                from shoparena.llm.types import get_backend

                backends = get_backend
            self._resolve = backends
        self._resolving: dict[str, asyncio.Lock] = {}
        self._orphans: deque[CallRecord] = deque(maxlen=10_000)

    # ── runs ──────────────────────────────────────────────────────────────────────────────────────────
    def open_run(self, run_id: str, *, problem_id: str | None = None, models: Iterable[str] | None = None,
                 limits: Limits | None = None) -> RunHandle:
        """Open a run; give the agent ``handle.token`` (see :meth:`RunHandle.sdk_env`)."""
        return self.runs.open(run_id, problem_id=problem_id, models=models, limits=limits)

    def close_run(self, token: str) -> list[CallRecord]:
        """Close a run: its token stops working and its log (sorted by ``seq``) is returned, frozen."""
        return self.runs.close(token)

    def calls(self, token: str) -> list[CallRecord]:
        """A snapshot of an open run's log so far."""
        return self.runs.state(token).snapshot()

    def orphan_calls(self) -> list[CallRecord]:
        """Requests refused for a missing, unknown or closed token (the last 10,000)."""
        return list(self._orphans)

    def warm(self, models: Iterable[str]) -> None:
        """Resolve backends ahead of the first request (loading a local model can take seconds)."""
        for model in models:
            if model not in self._backends:
                self._backends[model] = self._resolve(model)

    def serve(self, *, host: str = "127.0.0.1", port: int = 0, uds: str | None = None,
              uds_mode: int | None = None) -> Any:
        """Serve on a background thread (TCP, or a Unix socket chmod-ed to ``uds_mode`` when given); returns a
        :class:`~shoparena.llm.gateway.app.GatewayServer` (a context manager with ``address`` and ``env(handle)``)."""
        from shoparena.llm.gateway.app import GatewayServer

        return GatewayServer(self, host=host, port=port, uds=uds, uds_mode=uds_mode)

    # ── request handling (called by the app) ──────────────────────────────────────────────────────────
    def authenticate(self, authorization: str | None) -> RunState | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self.runs.get(authorization[7:].strip())

    def _log(self, state: RunState | None, seq: int, kind: CallKind, method: str, path: str,
             params: dict[str, Any], status: int, started: int, t0: float, **extra: Any) -> None:
        duration = (time.perf_counter() - t0) * 1000.0
        if state is not None:
            record = CallRecord.model_construct(
                run_id=state.handle.run_id, seq=seq, kind=kind, method=method, path=path, params=params,
                problem_id=state.handle.problem_id, started_at=started, duration_ms=duration, status=status,
                **{**_EMPTY, **extra})
            if state.append(record):
                return
        run_id = state.handle.run_id if state is not None else extra.pop("run_id", "")
        self._orphans.append(CallRecord.model_construct(
            run_id=run_id, seq=-1, kind=kind, method=method, path=path, params=params, problem_id=None,
            started_at=started, duration_ms=duration, status=status, **{**_EMPTY, **extra}))

    def refuse(self, state: RunState | None, kind: CallKind, method: str, path: str, params: dict[str, Any],
               status: int, message: str, started: int, t0: float, *, seq: int | None = None,
               token: str | None = None, retry_after: float | None = None, **extra: Any) -> Reply:
        """Log a refused request and answer it with a JSON error."""
        if state is not None and seq is None:
            seq = state.next_seq()
        if state is None and token:
            extra["run_id"] = self.runs.closed_run_id(token) or ""
        self._log(state, -1 if seq is None else seq, kind, method, path, clip_params(params), status, started,
                  t0, error=message, **extra)
        return status, error_body(status, message, retry_after), JSON

    def search_call(self, state: RunState, tool: str, params: dict[str, str], started: int, t0: float) -> Reply:
        """``GET /search/find_product`` or ``/search/view_product_information`` for an authenticated run."""
        seq = state.next_seq()
        path = "/search/" + tool
        logged = clip_params(params)
        refusal = state.admit("search")
        if refusal is not None:
            return self.refuse(state, "search", "GET", path, logged, 429, refusal.message, started, t0, seq=seq,
                               retry_after=refusal.retry_after)
        try:
            body, ids = self._find(params) if tool == "find_product" else self._view(params)
        except Exception as exc:  # the search service failing is logged and answered, never raised
            return self.refuse(state, "search", "GET", path, logged, 500, f"search failed: {exc}", started, t0,
                               seq=seq)
        with state.lock:
            axis, via, attributed_to = state.attributor.attribute(tool, params)
        self._log(state, seq, "search", "GET", path, logged, 200, started, t0, result_product_ids=ids,
                  axis=axis, via=via, attributed_to=attributed_to)
        return 200, body, JSON

    def _find(self, p: dict[str, str]) -> tuple[bytes, list[str]]:
        args = (p.get("q") or "", p.get("page", "1"), p.get("shop_id") or None, p.get("price") or None,
                p.get("sort") or None, p.get("service") or None)
        if self._fast:
            docs = self.search.ranked_docs(*args)
            if isinstance(docs, dict):
                return orjson.dumps(docs), []
            index = self.search.index
            return b"[" + b",".join(index.find_json(d) for d in docs) + b"]", [index.product_id(d) for d in docs]
        found = self.search.find_product(*args)
        ids = [str(i["product_id"]) for i in found if isinstance(i, dict)] if isinstance(found, list) else []
        return orjson.dumps(found), ids

    def _view(self, p: dict[str, str]) -> tuple[bytes, list[str]]:
        product_ids = p.get("product_ids") or ""
        found = self.search.view_product_information(product_ids) if product_ids else []
        return orjson.dumps(found), [str(i["product_id"]) for i in found if isinstance(i, dict)]

    async def inference_call(self, state: RunState, raw: bytes, started: int, t0: float) -> Reply:
        """``POST /inference/chat/completions`` for an authenticated run (body already size-checked)."""
        seq = state.next_seq()
        path, model, params = "/inference/chat/completions", None, {}

        def refuse(status: int, message: str, retry_after: float | None = None) -> Reply:
            return self.refuse(state, "inference", "POST", path, params, status, message, started, t0, seq=seq,
                               retry_after=retry_after, model=model)

        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return refuse(400, f"the body is not JSON: {exc}")
        if not isinstance(body, dict):
            return refuse(400, "the body must be a JSON object")
        messages, tools = body.get("messages"), body.get("tools")
        try:
            params = _inference_params(body, messages, tools)
            messages = text_messages(messages)  # content as a list of text parts → one string
        except (_BadRequest, MessageError, TypeError) as exc:
            return refuse(400, str(exc))
        model = body.get("model") or (state.handle.models[0] if state.handle.models else self.default_model)
        if not isinstance(model, str) or not model:
            return refuse(400, "'model' is required (no default model is configured)")
        if state.allowed is not None and model not in state.allowed:
            return refuse(403, f"model {model!r} is not allowed for this run; allowed: {sorted(state.allowed)}")
        refusal = state.admit("inference")
        if refusal is not None:
            return refuse(429, refusal.message, refusal.retry_after)
        try:  # the shared wire parser, without re-validating the (possibly large) messages and tools
            light = {k: v for k, v in body.items() if k not in ("messages", "tools")}
            sampling = request_to_sampling({**light, "messages": _ONE_MESSAGE}, max_tokens_cap=state.tokens_left())
        except ValidationError as exc:
            return refuse(400, validation_message(exc))
        try:
            backend = await self._backend(model)
            with abandon_when(state.closed_event):  # the run closing drops this generation (llm/abandon.py)
                reply = coerce_reply(await backend.chat(messages, tools or None, sampling))
        except Abandoned as exc:  # the run closed first: nobody reads the answer (logged as an orphan call)
            return refuse(409, str(exc))
        except Exception as exc:  # a backend failure is answered 502 and logged, never raised
            return refuse(502, f"{type(exc).__name__}: {exc}")
        emitted = emitted_calls(reply)
        used = reply.usage.completion_tokens if reply.usage is not None else None
        with state.lock:
            state.completion_tokens += used or 0
            state.attributor.on_completion(seq, [(c["name"], c["arguments"]) for c in emitted])
        self._log(state, seq, "inference", "POST", path, params, 200, started, t0, model=model, usage=reply.usage,
                  tool_calls=[EmittedCall.model_construct(**c) for c in emitted], content=reply.content,
                  reasoning_content=reply.reasoning_content, parse_notes=list(reply.parse_notes) or None,
                  truncated=reply.truncated)
        if body.get("stream"):  # one SSE answer with the whole message (OpenAI clients in stream mode read it)
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = to_openai_chunks(reply, model, include_usage=include_usage, max_tokens=sampling.max_tokens)
            return 200, b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n", SSE
        return 200, orjson.dumps(to_openai_response(reply, model, max_tokens=sampling.max_tokens)), JSON

    async def _backend(self, model: str) -> ChatBackend:
        backend = self._backends.get(model)
        if backend is not None:
            return backend
        lock = self._resolving.setdefault(model, asyncio.Lock())
        async with lock:
            backend = self._backends.get(model)
            if backend is None:
                backend = await asyncio.to_thread(self._resolve, model)
                self._backends[model] = backend
        return backend

    @staticmethod
    def _no_backend(model: str) -> ChatBackend:
        raise ConfigError(f"no backend is configured for model {model!r}")


class _BadRequest(ValueError):
    """A request body the gateway cannot use (answered 400)."""


_EMPTY: dict[str, Any] = {"model": None, "error": None, "usage": None, "result_product_ids": None,
                          "tool_calls": None, "content": None, "reasoning_content": None, "axis": None,
                          "via": None, "attributed_to": None, "parse_notes": None, "truncated": None}


MAX_LOGGED_VALUE = 4096
"""Bytes of one logged parameter value; a larger value is logged as ``{"sha256", "bytes"}`` (bounds the log)."""


def clip_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every value whose text / JSON exceeds :data:`MAX_LOGGED_VALUE` bytes replaced by its hash."""
    out = params
    for key, value in params.items():
        if isinstance(value, str) and len(value) <= MAX_LOGGED_VALUE // 4:
            continue
        data = value.encode() if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if len(data) > MAX_LOGGED_VALUE:
            if out is params:
                out = dict(params)
            out[key] = {"sha256": _sha256(data), "bytes": len(data)}
    return out


def _inference_params(body: dict[str, Any], messages: Any, tools: Any) -> dict[str, Any]:
    """The logged form of an inference body: everything but ``messages`` / ``tools``, plus their hashes."""
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise _BadRequest("'messages' must be a non-empty list of message objects")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise _BadRequest("'tools' must be a list of function specs")
    params = clip_params({k: v for k, v in body.items() if k not in ("messages", "tools")})
    params["n_messages"] = len(messages)
    params["messages_sha256"] = _sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS))
    if tools:
        params["tool_names"] = [str((t.get("function") or t).get("name", "")) for t in tools]
        params["tools_sha256"] = _sha256(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS))
    return params
