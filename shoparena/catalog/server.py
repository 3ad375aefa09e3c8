"""The search HTTP service (FastAPI): upstream / ORO endpoints and parameter strings (docs/shoppingbench.md §2).

``GET /find_product?q=&page=&shop_id=&price=&sort=&service=``, ``GET /view_product_information?product_ids=``,
``GET /get_product_raw?product_ids=`` (scorer only: ``enable_raw=False`` answers 403, as ORO's proxy does for
agents) and ``GET /health``. Parameters are passed through as the raw strings an agent wrote; the
:class:`SearchService` applies upstream or strict parsing. Handlers are ``async`` and answer from pre-serialised
JSON, so one worker process serves a query in about the time the index takes to score it; scale out with more
processes (``--workers``) or machines sharing the same memory-mapped index.

Bad input: the upstream answers stay as they are (a bad ``page`` is ``[]``, unknown ids are skipped,
strict mode answers an error *observation* with 200), because agents and the scorer read them. What is not part
of the upstream surface gets ``{"error": message}`` with a 4xx: an unknown path 404, another method 405, a request
body over :data:`MAX_BODY_BYTES` 413 (the endpoints take none); an unexpected failure is a 500 with the same shape
and no traceback (:func:`shoparena._http.guard`).
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from fastapi import FastAPI, Query
from fastapi.responses import Response

from shoparena import __version__
from shoparena._http import guard
from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.types import Flavor, Mode

UPSTREAM_PORT = 5631
ORO_PORT = 5632
MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted (every endpoint is a GET with query parameters: a body is never needed)."""


def _json(obj: Any, status: int = 200) -> Response:
    return Response(content=orjson.dumps(obj), media_type="application/json", status_code=status)


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def create_app(service: SearchService, *, enable_raw: bool = True) -> FastAPI:
    """The ASGI app serving ``service``."""
    app = FastAPI(title="shoparena search", version=__version__, docs_url=None, redoc_url=None)
    guard(app, _error, max_body_bytes=MAX_BODY_BYTES)

    @app.get("/find_product")
    async def find_product(
        q: str | None = None,
        page: str = "1",
        shop_id: str | None = None,
        price: str | None = None,
        sort: str | None = None,
        service: str | None = None,
    ) -> Response:
        body = service_.find_product_json(q or "", page, shop_id, price, sort, service)
        return Response(content=body, media_type="application/json")

    @app.get("/view_product_information")
    async def view_product_information(product_ids: str = Query("")) -> Response:
        return _json(service_.view_product_information(product_ids) if product_ids else [])

    @app.get("/get_product_raw")
    async def get_product_raw(product_ids: str = Query("")) -> Response:
        if not enable_raw:
            return _error(403, "get_product_raw is disabled on this server (scorer-only endpoint)")
        return _json(service_.get_product_raw(product_ids) if product_ids else [])

    @app.get("/health")
    async def health() -> Response:
        return _json({
            "status": "ok",
            "n_docs": len(service_.index),
            "catalog_sha256": service_.index.catalog_sha256,
            "mode": service_.mode,
            "flavor": service_.flavor,
            "raw_enabled": enable_raw,
            "version": __version__,
        })

    service_ = service
    return app


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory --workers N``: reads ``SHOPARENA_INDEX``, ``SHOPARENA_SEARCH_MODE``,
    ``SHOPARENA_SEARCH_FLAVOR`` and ``SHOPARENA_SEARCH_RAW`` (``0`` disables /get_product_raw)."""
    index = SearchIndex.open(os.environ["SHOPARENA_INDEX"])
    index.warm()
    mode: Mode = os.environ.get("SHOPARENA_SEARCH_MODE", "upstream")  # type: ignore[assignment]
    flavor: Flavor = os.environ.get("SHOPARENA_SEARCH_FLAVOR", "upstream")  # type: ignore[assignment]
    raw = os.environ.get("SHOPARENA_SEARCH_RAW", "1") != "0"
    return create_app(SearchService(index, mode=mode, flavor=flavor), enable_raw=raw)


def serve(index_path: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = ORO_PORT,
          uds: str | None = None, enable_raw: bool = True, mode: Mode = "upstream", flavor: Flavor = "upstream",
          workers: int = 1) -> None:
    """Serve an index in the foreground. ``workers > 1`` starts that many processes sharing the mmapped index."""
    if workers > 1:
        import uvicorn

        os.environ.update({
            "SHOPARENA_INDEX": str(index_path), "SHOPARENA_SEARCH_MODE": mode,
            "SHOPARENA_SEARCH_FLAVOR": flavor, "SHOPARENA_SEARCH_RAW": "1" if enable_raw else "0",
        })
        uvicorn.run("shoparena.catalog.server:app_from_env", factory=True, host=host, port=port, uds=uds,
                    workers=workers, access_log=False, log_level="warning")
        return
    from shoparena._http import serve_forever

    index = SearchIndex.open(index_path)
    index.warm()
    app = create_app(SearchService(index, mode=mode, flavor=flavor), enable_raw=enable_raw)
    serve_forever(app, host=host, port=port, uds=uds)
