"""``SearchClient``: the :class:`SearchBackend` protocol over HTTP, against our server or an upstream/ORO one.

Parameters go out exactly as an agent wrote them (upstream drops empty and ``default`` values, which the tool
layer does). Transient failures are retried with a fixed delay like upstream's tool (10 tries, 3 s apart there;
configurable here); after the last try a :class:`SearchUnavailable` is raised and the tool layer turns it into
the observation upstream would have produced (``None``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from shoparena.catalog.types import Product
from shoparena.errors import ShopArenaError


class SearchUnavailable(ShopArenaError):
    """The search service did not answer after every retry."""

    exit_code = 5


class SearchClient:
    """HTTP implementation of :class:`shoparena.catalog.types.SearchBackend`."""

    def __init__(self, base_url: str = "http://127.0.0.1:5632", *, uds: str | None = None, timeout: float = 30.0,
                 retries: int = 3, retry_delay: float = 0.5) -> None:
        transport = httpx.HTTPTransport(uds=uds) if uds else None
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self.retries = max(1, retries)
        self.retry_delay = retry_delay

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        last: Exception | None = None
        for attempt in range(self.retries):
            try:
                resp = self._http.get(path, params={k: v for k, v in params.items() if v is not None})
                if resp.status_code >= 500:
                    raise httpx.HTTPStatusError(f"{resp.status_code}", request=resp.request, response=resp)
                if resp.status_code >= 400:
                    body = resp.json() if resp.content else {}
                    raise ShopArenaError(f"search service refused {path}: {resp.status_code} {body}")
                return orjson.loads(resp.content)
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                last = exc
                if attempt + 1 < self.retries:
                    time.sleep(self.retry_delay)
        raise SearchUnavailable(f"search service at {self.base_url} failed {self.retries} times: {last}",
                                hint="is `shoparena catalog serve` running?")

    def find_product(self, q: str, page: int | str = 1, shop_id: str | None = None, price: str | None = None,
                     sort: str | None = None, service: str | None = None) -> list[dict[str, Any]] | dict[str, Any]:
        return self._get("/find_product", {"q": q, "page": str(page), "shop_id": shop_id, "price": price,
                                           "sort": sort, "service": service})

    @staticmethod
    def _ids(product_ids: str | Sequence[str]) -> str:
        return product_ids if isinstance(product_ids, str) else ",".join(product_ids)

    def view_product_information(self, product_ids: str | Sequence[str]) -> list[dict[str, Any]]:
        return self._get("/view_product_information", {"product_ids": self._ids(product_ids)})

    def get_product_raw(self, product_ids: str | Sequence[str]) -> list[dict[str, Any]]:
        return self._get("/get_product_raw", {"product_ids": self._ids(product_ids)})

    def get(self, product_id: str) -> Product | None:
        found = self.get_product_raw(product_id)
        return Product.model_validate(found[0]) if found else None

    def health(self) -> dict[str, Any]:
        return self._get("/health", {})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SearchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
