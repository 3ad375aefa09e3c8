"""The web face: read-only pages and their JSON under ``/api/…`` over a :class:`~shoparena.web.site.Site`.

Routes are thin: each parses and bounds its input, calls one query function of this package (which returns plain
data), and either returns that data as JSON or renders it with a Jinja2 template (autoescape on everywhere;
agent-written text reaches a page only as escaped text). Unknown ids answer 404, bad query parameters 422 (one
line naming them), both as HTML on pages and as ``{error, detail}`` on ``/api``; nothing answers with a traceback.
Every page carries a Content-Security-Policy that allows only this server's own styles and script.

    app = create_app(Site("sqlite:///runs/subnet.db", corpus="runs/corpus", reports="runs/eval"))
    mount(arena_api_app, site)      # the same pages on the arena service (see arena_app)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shoparena.errors import DataError, NotFoundError
from shoparena.web import arena as arena_q
from shoparena.web.board import leaderboard
from shoparena.web.corpus import corpus_page, report_file
from shoparena.web.plots import funnel_plot, line_plot
from shoparena.web.records import MAX_LIMIT, RecordFilter, get_record, list_records
from shoparena.web.site import Site

__all__ = ["arena_app", "create_app", "mount"]

HERE = Path(__file__).parent
CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'self'")
REPORT_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
MAX_ID = 200


class BadInput(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["ts"] = lambda t: "–" if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(t)))
    env.filters["ms"] = lambda t: "–" if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                      time.gmtime(int(t) / 1000))
    env.filters["num"] = lambda v, d=3: "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) \
        else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.1f} %"
    env.filters["short"] = lambda s, n=12: "–" if not s else (s if len(s) <= n else s[:n] + "…")
    env.filters["qs"] = lambda d: urlencode({k: v for k, v in d.items() if v is not None})
    return env


def _validation_line(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e.get('loc', ())) or 'query'}: {e.get('msg', 'invalid')}"
             for e in exc.errors()[:5]]
    return "invalid query: " + "; ".join(parts)


def _params(request: Request, model: type[BaseModel]) -> Any:
    raw = {k: v for k, v in request.query_params.items() if v != ""}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(_validation_line(exc)) from None


class Page(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int = Field(default=20, ge=1, le=MAX_LIMIT)
    before: int | None = Field(default=None, ge=1, le=2**62)
    offset: int = Field(default=0, ge=0, le=1_000_000)
    status: str | None = Field(default=None, max_length=40)


class BoardParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sort: str = Field(default="rank", pattern="^(rank|asr)$")


def _id(value: str) -> str:
    if not 1 <= len(value) <= MAX_ID:
        raise NotFoundError("no such id")
    return value


def mount(app: FastAPI, site: Site) -> FastAPI:
    """Add the pages, ``/api/…`` and ``/static`` to ``app`` (a new app or the arena service's). Returns ``app``."""
    env = _env()
    router = APIRouter()

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(site={"url": site.url, "has_arena": site.has_arena,
                                                   "corpus": site.corpus is not None or site.reports is not None},
                                             **ctx)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def serve(request: Request, data: Callable[[Any], dict[str, Any]], template: str | None,
              **ctx: Any) -> Response:
        """Run ``data(conn)``; JSON under /api, else the template; errors as 404 / 422 / 500 in the same shape."""
        api = request.url.path.startswith("/api/")
        try:
            with site.connect() as conn:
                body = data(conn)
        except NotFoundError as exc:
            return _error(404, "NotFound", exc.message, api, page)
        except BadInput as exc:
            return _error(422, "Invalid", exc.detail, api, page)
        except DataError as exc:
            return _error(500, "DataError", exc.message, api, page)
        if api or template is None:
            return JSONResponse(body, headers={"X-Content-Type-Options": "nosniff"})
        return page(template, data=body, request_path=request.url.path, **ctx)

    def arena_only(fn: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
        def run(conn: Any) -> dict[str, Any]:
            if not site.has_arena:
                raise NotFoundError("this database holds no arena (a bare trajectory store)")
            return fn(conn)
        return run

    # -- leaderboard -------------------------------------------------------------------------------------------
    def board(request: Request) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            p = _params(request, BoardParams)
            return leaderboard(site, conn, sort=p.sort)
        return serve(request, data, "leaderboard.html")

    router.add_api_route("/", board, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/leaderboard", board, methods=["GET"])

    # -- records -----------------------------------------------------------------------------------------------
    def records_(request: Request) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            f = _params(request, RecordFilter)
            out = list_records(site, conn, f)
            if out["next_before"] is not None:
                out["next_query"] = urlencode(f.params(before=out["next_before"]))
            return out
        return serve(request, data, "records.html")

    router.add_api_route("/records", records_, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/records", records_, methods=["GET"])

    def record(request: Request, record_id: str) -> Response:
        return serve(request, lambda conn: get_record(site, conn, _id(record_id)), "record.html")

    router.add_api_route("/records/{record_id}", record, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/records/{record_id}", record, methods=["GET"])

    # -- arena -------------------------------------------------------------------------------------------------
    def agent(request: Request, agent_id: str) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            out = arena_q.agent_page(site, conn, _id(agent_id))
            if request.url.path.startswith("/api/"):
                return out
            return {**out, "plot": line_plot(out["score_history"]["series"])}
        return serve(request, arena_only(data), "agent.html")

    router.add_api_route("/agents/{agent_id}", agent, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/agents/{agent_id}", agent, methods=["GET"])

    def races_(request: Request) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            p = _params(request, Page)
            out = arena_q.race_list(site, conn, limit=p.limit, before=p.before)
            weights = arena_q.weights_series(site, conn)
            out["weights"] = weights
            out["emissions"] = arena_q.emissions_series(site, conn)
            if not request.url.path.startswith("/api/"):
                out["plot"] = line_plot(weights["series"])
                out["emissions_plot"] = line_plot(out["emissions"]["series"])
            return out
        return serve(request, arena_only(data), "races.html")

    router.add_api_route("/races", races_, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/races", races_, methods=["GET"])

    def race(request: Request, race_id: str) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            out = arena_q.race_page(site, conn, _id(race_id))
            if not request.url.path.startswith("/api/"):
                out["plot"] = line_plot(out["weights"]["series"])
            return out
        return serve(request, arena_only(data), "race.html")

    router.add_api_route("/races/{race_id}", race, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/races/{race_id}", race, methods=["GET"])

    def submissions_(request: Request) -> Response:
        def data(conn: Any) -> dict[str, Any]:
            p = _params(request, Page)
            if p.status is not None and p.status not in ("ACCEPTED", "REJECTED"):
                raise BadInput("invalid query: status: must be ACCEPTED or REJECTED")
            return arena_q.submission_list(site, conn, limit=p.limit, offset=p.offset, status=p.status)
        return serve(request, arena_only(data), "submissions.html")

    router.add_api_route("/submissions", submissions_, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/submissions", submissions_, methods=["GET"])

    # -- corpus and evaluation ---------------------------------------------------------------------------------
    def corpus(request: Request) -> Response:
        def data(_conn: Any) -> dict[str, Any]:
            out = corpus_page(site)
            if not request.url.path.startswith("/api/") and out["corpus"]:
                out["chart"] = funnel_plot(out["corpus"]["funnel"])  # the report's funnel chart
            return out
        return serve(request, data, "corpus.html")

    router.add_api_route("/corpus", corpus, methods=["GET"], include_in_schema=False)
    router.add_api_route("/api/corpus", corpus, methods=["GET"])

    def report(request: Request, index: int) -> Response:
        try:
            path = report_file(site, index)
        except NotFoundError as exc:
            return _error(404, "NotFound", exc.message, False, page)
        return FileResponse(path, media_type="text/html; charset=utf-8",
                            headers={"Content-Security-Policy": REPORT_CSP, "X-Content-Type-Options": "nosniff"})

    router.add_api_route("/reports/{index}", report, methods=["GET"], include_in_schema=False)

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    return app


def _error(status: int, error: str, detail: str, api: bool, page: Callable[..., HTMLResponse]) -> Response:
    if api:
        return JSONResponse({"error": error, "detail": detail}, status_code=status)
    return page("error.html", status=status, status_code=status, error=error, detail=detail)


def create_app(site: Site) -> FastAPI:
    """A standalone app serving the pages of ``site`` (what ``shoparena web`` runs)."""
    app = FastAPI(title="shoparena web", version="1", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(404)
    def _not_found(request: Request, _exc: Exception) -> Response:  # unknown paths
        api = request.url.path.startswith("/api/")
        if api:
            return JSONResponse({"error": "NotFound", "detail": "no such page"}, status_code=404)
        return HTMLResponse("<!doctype html><title>404</title><p>No such page. <a href=\"/\">Leaderboard</a></p>",
                            status_code=404, headers=HEADERS)

    return mount(app, site)


def arena_app(arena: Any, verifier: Any, *, corpus: str | Path | None = None,
              reports: str | Path | None = None) -> FastAPI:
    """The arena service (:func:`shoparena.arena.api.create_app`) with these pages mounted on it, reading the
    arena's own database (which must hold the trajectory records too, as ``arena simulate`` writes it) by the
    arena's clock (so the code embargo follows the arena's time)."""
    from shoparena.arena.api import create_app as arena_api

    app = arena_api(arena, verifier)
    site = Site(arena.url, corpus=corpus, reports=reports, clock=arena.clock, engine=arena.db.engine)
    return mount(app, site)
