"""The arena API (docs/arena.md §2.1, §6, §8, §14.2): FastAPI routes shaped like ORO's Backend over an :class:`Arena`.

Auth: every miner and validator route (all mutations included) needs the signed headers ``X-Hotkey``,
``X-Timestamp``, ``X-Nonce``, ``X-Signature`` checked by the verifier (``auth.RequestVerifier``: signature, ±60 s
skew, nonce replay, registration; validator routes also need a permit) — 401 / 403 / 503 with ``{error,
detail}``. Public routes are unauthenticated and embargo-respecting. Arena refusals map to statuses:
``CooldownActive`` 429 (with ``remaining_seconds`` and ``Retry-After``), ``CodeAnalysisError`` 422 (with
``violations``), ``FileTooLarge`` 413, ``NotFound`` 404, ``Forbidden`` 403, ``LeaseExpired`` / ``Conflict`` 409,
``Invalid`` 422. ``POST /v1/validator/work/claim`` answers 204 when there is no work. Work routes take the
claim's ``eval_run_id``.

Bad input gets the same ``{error, detail}`` shape: a body that is not strict JSON (``NaN`` too) 400
(``BadRequest``), wrong or missing fields 422 (``Invalid``, one line naming them), an unknown path 404
(``NotFound``), another method 405, a request body over :func:`max_body_bytes` 413 (``PayloadTooLarge``, refused
before it is read), an unexpected failure 500 (``InternalError``, no traceback; the server log has it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fastapi import Depends, FastAPI, File, Form, Request, Response, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from shoparena._http import MiB, guard
from shoparena.arena.service import Arena
from shoparena.arena.state.types import ArenaError, CompleteRequest, ProblemProgress, SubmitResult

__all__ = ["ProgressBody", "RaceSelectionBody", "Verifier", "WeightsBody", "create_app"]


class _Caller(Protocol):
    hotkey: str
    role: str


class Verifier(Protocol):
    """``auth.RequestVerifier``: ``verify(headers, require=None|"validator") -> Caller`` or ``AuthError``."""

    def verify(self, headers: Mapping[str, str], *, require: Any = None) -> _Caller: ...


class ProgressBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    updates: list[ProblemProgress]


class RaceSelectionBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_version_id: str | None


class WeightsBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    uids: list[int]
    weights: list[int]
    ok: bool
    reason: str = ""
    block: int | None = None
    race_id: str | None = None


def _error(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    headers = {}
    if "remaining_seconds" in extra and status == 429:
        headers["Retry-After"] = str(max(1, math.ceil(extra["remaining_seconds"])))
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status, headers=headers)


_ERROR_NAMES = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                405: "MethodNotAllowed", 413: "PayloadTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
                500: "InternalError"}


def _http_error(status: int, message: str) -> JSONResponse:
    return _error(status, _ERROR_NAMES.get(status, "Error"), message)


def max_body_bytes(arena: Arena) -> int:
    """Largest request body the API reads: an agent upload (``max_code_bytes``) plus form overhead, and never less
    than 8 MiB (progress and completion reports)."""
    return max(8 * MiB, int(arena.config.max_code_bytes) + MiB)


_SUBMIT_STATUS = {"COOLDOWN": (429, "CooldownActive"), "INVALID_FILE": (422, "CodeAnalysisError"),
                  "INVALID_NAME": (422, "InvalidAgentName"), "NOT_REGISTERED_ONCHAIN": (403, "NotRegistered"),
                  "BANNED": (403, "Banned")}


def _submit_response(result: SubmitResult) -> JSONResponse:
    body = result.model_dump(mode="json")
    if result.admission_status == "ACCEPTED":
        return JSONResponse(body)
    status, error = _SUBMIT_STATUS.get(result.admission_reason or "", (422, "Rejected"))
    return _error(status, error, f"submission rejected: {result.admission_reason}", **body)


def create_app(arena: Arena, verifier: Verifier) -> FastAPI:
    """The arena service. Routes are sync (FastAPI runs them on its thread pool; the database serialises)."""
    app = FastAPI(title="shoparena arena", version="1", docs_url=None, redoc_url=None)
    guard(app, _http_error, max_body_bytes=max_body_bytes(arena), strict_json=True)

    @app.exception_handler(ArenaError)
    def _arena_error(_req: Request, exc: ArenaError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    def _auth(require: str | None) -> Callable[[Request], _Caller]:
        def dep(request: Request) -> _Caller:
            try:
                return verifier.verify(request.headers, require=require)
            except Exception as exc:  # AuthError carries the status; anything else is a server fault
                status = getattr(exc, "status", None)
                if status is None:
                    raise
                name = {401: "Unauthorized", 403: "Forbidden", 503: "Unavailable"}.get(status, "AuthError")
                raise _AuthFailed(status, name, getattr(exc, "reason", str(exc))) from exc

        return dep

    @app.exception_handler(_AuthFailed)
    def _auth_failed(_req: Request, exc: _AuthFailed) -> JSONResponse:
        return _error(exc.status, exc.error, exc.reason)

    miner, validator = Depends(_auth(None)), Depends(_auth("validator"))

    # -- miner -------------------------------------------------------------------------------------------------
    @app.post("/v1/miner/submit")
    def submit(agent_name: str = Form(...), file: UploadFile = File(...), caller: _Caller = miner) -> Response:
        limit = arena.config.max_code_bytes
        data = file.file.read(limit + 1)
        if len(data) > limit:
            return _error(413, "FileTooLarge", f"the agent file exceeds {limit} bytes", max_bytes=limit)
        return _submit_response(arena.submit(caller.hotkey, agent_name, data))

    @app.get("/v1/miner/agents")
    def agents(caller: _Caller = miner) -> list[dict[str, Any]]:
        return [a.model_dump(mode="json") for a in arena.agents(caller.hotkey)]

    @app.get("/v1/miner/agents/{agent_id}/versions")
    def versions(agent_id: str, caller: _Caller = miner) -> list[dict[str, Any]]:
        return [v.model_dump(mode="json") for v in arena.versions(caller.hotkey, agent_id)]

    @app.put("/v1/miner/race-selection")
    def race_selection(body: RaceSelectionBody, caller: _Caller = miner) -> dict[str, Any]:
        arena.pin(caller.hotkey, body.agent_version_id)
        return {"hotkey": caller.hotkey, "agent_version_id": body.agent_version_id}

    # -- validator ---------------------------------------------------------------------------------------------
    @app.post("/v1/validator/work/claim", response_model=None)
    def claim(caller: _Caller = validator) -> Response | dict[str, Any]:
        work = arena.claim_work(caller.hotkey)
        return Response(status_code=204) if work is None else work.model_dump(mode="json")

    @app.post("/v1/validator/work/{eval_run_id}/heartbeat")
    def heartbeat(eval_run_id: str, caller: _Caller = validator) -> dict[str, Any]:
        return {"eval_run_id": eval_run_id, "lease_expires_at": arena.heartbeat(eval_run_id, caller.hotkey)}

    @app.get("/v1/validator/work/{eval_run_id}/agent")
    def agent_code(eval_run_id: str, caller: _Caller = validator) -> dict[str, Any]:
        return arena.agent_code(eval_run_id, caller.hotkey)

    @app.get("/v1/validator/evaluation-runs/{eval_run_id}/problems")
    def problems(eval_run_id: str, caller: _Caller = validator) -> dict[str, Any]:
        return arena.run_problems(eval_run_id, caller.hotkey)

    @app.post("/v1/validator/evaluation-runs/{eval_run_id}/progress")
    def progress(eval_run_id: str, body: ProgressBody, caller: _Caller = validator) -> dict[str, Any]:
        return {"eval_run_id": eval_run_id, "problems_reported": arena.progress(eval_run_id, caller.hotkey,
                                                                                body.updates)}

    @app.post("/v1/validator/evaluation-runs/{eval_run_id}/complete")
    def complete(eval_run_id: str, body: CompleteRequest, caller: _Caller = validator) -> dict[str, Any]:
        return arena.complete(eval_run_id, caller.hotkey, body).model_dump(mode="json")

    @app.get("/v1/validator/standings")
    def standings(caller: _Caller = validator) -> dict[str, Any]:
        s = arena.standings()
        return {"standings": None if s is None else s.model_dump(mode="json")}

    @app.post("/v1/validator/weights")
    def weights(body: WeightsBody, caller: _Caller = validator) -> dict[str, Any]:
        arena.record_weights(caller.hotkey, uids=body.uids, weights=body.weights, ok=body.ok, reason=body.reason,
                             block=body.block, race_id=body.race_id)
        return {"recorded": True}

    # -- public ------------------------------------------------------------------------------------------------
    @app.get("/v1/public/leaderboard")
    def leaderboard() -> list[dict[str, Any]]:
        return [r.model_dump(mode="json") for r in arena.leaderboard()]

    @app.get("/v1/public/races")
    def races(limit: int = 50) -> list[dict[str, Any]]:
        return [r.model_dump(mode="json") for r in arena.races(limit=min(max(limit, 1), 500))]

    @app.get("/v1/public/races/{race_id}")
    def race(race_id: str) -> dict[str, Any]:
        return arena.race(race_id).model_dump(mode="json")

    @app.get("/v1/public/races/{race_id}/seed-commitment")
    def seed_commitment(race_id: str) -> dict[str, Any]:
        return arena.race(race_id).seed.model_dump(mode="json")

    @app.get("/v1/public/top-agent", response_model=None)
    def top_agent() -> Response | dict[str, Any]:
        top = arena.top_agent()
        return Response(status_code=204) if top is None else top.model_dump(mode="json")

    @app.get("/v1/public/suites")
    def suites() -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in arena.suites()]

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "now": arena.now()}

    return app


class _AuthFailed(Exception):
    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.error, self.reason = status, error, reason
