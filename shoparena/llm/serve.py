"""Any :class:`ChatBackend` as an OpenAI-compatible server: ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /health`` (FastAPI).

So a locally trained model (``hf:``) or an offline policy (``policy:``) can be used by anything that speaks the
OpenAI API — including this project's own ``openai:`` backend. ``stream: true`` is answered with a valid SSE stream
(one delta carrying the whole answer, then the finish chunk, ``[DONE]``). Errors are OpenAI-style JSON
(``{"error": {"message", "type", "param", "code"}}``): 400 for a malformed request or unusable sampling values,
404 for another model name, 502 when the backend's own upstream failed, 500 for anything else.
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
from starlette.exceptions import HTTPException

from shoparena.errors import ConfigError, ShopArenaError
from shoparena.llm.types import ChatBackend
from shoparena.llm.wire import (
    BackendError,
    ChatRequest,
    request_to_sampling,
    to_openai_chunks,
    to_openai_response,
    validation_message,
)

__all__ = ["create_app", "openai_error"]

log = logging.getLogger(__name__)

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                405: "invalid_request_error", 429: "rate_limit_error"}


def openai_error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> Response:
    """An OpenAI-style error response."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _json(obj: Any) -> Response:
    return Response(orjson.dumps(obj), media_type="application/json")


def create_app(backend: ChatBackend, *, model_name: str | None = None) -> FastAPI:
    """The app serving ``backend`` under ``model_name`` (default: the backend's ``name``). Requests naming another
    model are refused with 404, as vLLM does; an empty ``model`` means the served one."""
    name = model_name or backend.name
    created = int(time.time())
    app = FastAPI(title="shoparena LLM server", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        return openai_error(exc.status_code, str(exc.detail))

    @app.get("/health")
    async def health() -> Response:
        return _json({"status": "ok", "model": name})

    @app.get("/v1/models")
    async def models() -> Response:
        return _json({"object": "list",
                      "data": [{"id": name, "object": "model", "created": created, "owned_by": "shoparena"}]})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
            req = ChatRequest.model_validate(body)
            sampling = request_to_sampling(req)
        except orjson.JSONDecodeError as exc:
            return openai_error(400, f"the request body is not JSON: {exc}")
        except ValidationError as exc:
            return openai_error(400, validation_message(exc))
        if req.model and req.model != name:
            return openai_error(404, f"The model `{req.model}` does not exist; this server serves `{name}`.",
                                code="model_not_found", param="model")
        try:
            message = await backend.chat(req.messages, req.tools or None, sampling)
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
