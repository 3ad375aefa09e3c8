"""The search HTTP service over real loopback sockets (TCP and Unix), and its client (shoparena.md §2, §2.3)."""

from __future__ import annotations

import socket

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.catalog.client import SearchClient, SearchUnavailable
from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.server import create_app


@pytest.fixture(scope="module")
def service(tiny_products, tmp_path_factory) -> SearchService:
    return SearchService(SearchIndex.build(tiny_products, tmp_path_factory.mktemp("srv") / "ix"))


@pytest.fixture(scope="module")
def server(service):
    with BackgroundServer(create_app(service)) as srv:
        yield srv


def test_endpoints_answer_like_the_in_process_service(server, service) -> None:
    with SearchClient(server.url) as client:
        for kwargs in ({"q": "violin"}, {"q": "cotton", "price": "-600", "sort": "priceasc"},
                       {"q": "mesh shoes", "service": "COD,lazmall"}, {"q": "violin", "page": 9}):
            assert client.find_product(**kwargs) == service.find_product(**kwargs)
        assert client.view_product_information("591486855, 3706669986") == \
            service.view_product_information("591486855, 3706669986")
        assert client.get("591486855") == service.get("591486855")
        assert client.get("nope") is None
        health = client.health()
        assert health["status"] == "ok" and health["n_docs"] == 20
        assert health["catalog_sha256"] == service.index.catalog_sha256


def test_raw_parameter_strings_pass_through_unchanged(server) -> None:
    # the upstream wire format: page as a string, price and service as the agent wrote them
    resp = httpx.get(f"{server.url}/find_product", params={"q": "cotton", "page": "1", "price": "above:10"})
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    assert len(resp.json()) == 3
    assert httpx.get(f"{server.url}/find_product", params={"q": "cotton", "page": "abc"}).json() == []
    assert httpx.get(f"{server.url}/find_product").json() == []


def test_get_product_raw_can_be_disabled_for_agent_facing_deployments(service) -> None:
    with BackgroundServer(create_app(service, enable_raw=False)) as srv:
        resp = httpx.get(f"{srv.url}/get_product_raw", params={"product_ids": "591486855"})
        assert resp.status_code == 403
        assert httpx.get(f"{srv.url}/health").json()["raw_enabled"] is False
        assert httpx.get(f"{srv.url}/find_product", params={"q": "violin"}).status_code == 200


def test_strict_server_returns_error_observations(service) -> None:
    strict = SearchService(service.index, mode="strict")
    with BackgroundServer(create_app(strict)) as srv:
        body = httpx.get(f"{srv.url}/find_product", params={"q": "cotton", "price": "104"}).json()
        assert body["argument"] == "price"


def test_unix_socket_listener(service, tmp_path) -> None:
    sock = tmp_path / "search.sock"
    with BackgroundServer(create_app(service), uds=sock) as srv, SearchClient(srv.url, uds=str(sock)) as client:
        assert client.find_product("violin") == service.find_product("violin")


def test_client_reports_an_unreachable_service_after_retries() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with SearchClient(f"http://127.0.0.1:{port}", retries=2, retry_delay=0.01) as client, \
            pytest.raises(SearchUnavailable, match="failed 2 times"):
        client.find_product("violin")
