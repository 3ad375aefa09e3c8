"""Any :class:`ChatBackend` as an OpenAI-compatible server: ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /health`` (FastAPI).

So a locally trained model (``hf:``) or an offline policy (``policy:``) can be used by anything that speaks the
OpenAI API — including this project's own ``openai:`` backend. ``stream: true`` is answered with a valid SSE stream
(one delta carrying the whole answer, then the finish chunk, ``[DONE]``). Errors are OpenAI-style JSON
(``{"error": {"message", "type", "param", "code"}}``): 400 for a malformed request (a body that is not JSON, wrong
types, unusable sampling values, an unknown role, a non-text content part), 404 for another model name or path,
405 for another method, 413 for a body over ``max_body_bytes`` (default :data:`MAX_BODY_BYTES`, refused before it
is read), 415 for a body declared as something other than JSON, 502 when the backend's own upstream failed, 500
for anything else (never with a traceback). Message ``content`` may be a string or OpenAI's list of parts; text
parts are joined.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from shoparena._http import MiB, guard
from shoparena.errors import ConfigError, ShopArenaError
from shoparena.llm.types import ChatBackend
from shoparena.llm.wire import (
    BackendError,
    ChatRequest,
    MessageError,
    request_to_sampling,
    text_messages,
    to_openai_chunks,
    to_openai_response,
    validation_message,
)

__all__ = ["create_app", "openai_error"]

log = logging.getLogger(__name__)

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                405: "invalid_request_error", 413: "invalid_request_error", 415: "invalid_request_error",
                429: "rate_limit_error"}
MAX_BODY_BYTES = 16 * MiB
"""Default largest request body (a long conversation with tools is well under 1 MiB)."""


def openai_error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> Response:
    """An OpenAI-style error response."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _json(obj: Any) -> Response:
    return Response(orjson.dumps(obj), media_type="application/json")


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return True  # curl -d without a header, urllib: read as JSON
    media = content_type.split(";")[0].strip().lower()
    return media in ("", "application/json") or media.endswith("+json")


def create_app(backend: ChatBackend, *, model_name: str | None = None,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The app serving ``backend`` under ``model_name`` (default: the backend's ``name``). Requests naming another
    model are refused with 404, as vLLM does; an empty ``model`` means the served one."""
    name = model_name or backend.name
    created = int(time.time())
    app = FastAPI(title="shoparena LLM server", docs_url=None, redoc_url=None, openapi_url=None)
    guard(app, openai_error, max_body_bytes=max_body_bytes)

    @app.get("/health")
    async def health() -> Response:
        return _json({"status": "ok", "model": name})

    @app.get("/v1/models")
    async def models() -> Response:
        return _json({"object": "list",
                      "data": [{"id": name, "object": "model", "created": created, "owned_by": "shoparena"}]})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        if not _is_json(request.headers.get("content-type")):
            return openai_error(415, f"the body must be JSON (Content-Type: application/json), not "
                                f"{request.headers['content-type'][:80]!r}")
        try:
            body = orjson.loads(await request.body())
            req = ChatRequest.model_validate(body)
            sampling = request_to_sampling(req)
            messages = text_messages(req.messages)
        except orjson.JSONDecodeError as exc:
            return openai_error(400, f"the request body is not JSON: {exc}")
        except ValidationError as exc:
            return openai_error(400, validation_message(exc))
        except MessageError as exc:
            return openai_error(400, str(exc), param=exc.param)
        if req.model and req.model != name:
            return openai_error(404, f"The model `{req.model}` does not exist; this server serves `{name}`.",
                                code="model_not_found", param="model")
        try:
            message = await backend.chat(messages, req.tools or None, sampling)
        except ConfigError as exc:
            return openai_error(400, str(exc))
        except BackendError as exc:
            status = exc.status if exc.status is not None and 400 <= exc.status < 500 else 502
            return openai_error(status, str(exc))
        except ShopArenaError as exc:
            return openai_error(500, str(exc))
        except Exception as exc:  # a crashing backend is reported, not propagated into uvicorn
            log.exception("backend %s failed", name)
            return openai_error(500, f"the backend failed: {type(exc).__name__}: {exc}")
        if not req.stream:
            return _json(to_openai_response(message, name, max_tokens=sampling.max_tokens))
        include_usage = bool((req.stream_options or {}).get("include_usage"))
        chunks = to_openai_chunks(message, name, include_usage=include_usage, max_tokens=sampling.max_tokens)
        return StreamingResponse(_sse(chunks), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    return app


async def _sse(chunks: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
