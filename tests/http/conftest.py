"""Real servers on loopback, one per HTTP service: search, model server (``serve``), gateway and arena API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shoparena._http import BackgroundServer
from shoparena.arena.auth import RequestVerifier
from shoparena.arena.chain import LocalChain
from shoparena.arena.identity import new_identity
from shoparena.catalog.search import SearchService
from shoparena.catalog.server import create_app as search_app
from shoparena.clock import ManualClock
from shoparena.env.types import AssistantMessage, Usage
from shoparena.llm.gateway import Gateway, Limits
from shoparena.llm.serve import create_app as serve_app
from shoparena.llm.types import Sampling
from tests.arena_service import T0, config, make_arena
from tests.gateway import make_gateway, make_service

IDS = {n: new_identity(n, seed=9) for n in ("miner", "validator", "stranger")}
GATEWAY_BODY_CAP = 4096
"""``max_body_bytes`` of the gateway runs these tests open."""


class EchoBackend:
    """A real chat backend answering with the text of the last message (so a test sees what reached it)."""

    name = "echo"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        self.seen.append(messages)
        return AssistantMessage(content=str(messages[-1]["content"]),
                                usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2))


@dataclass
class Target:
    """A running service: its base ``url`` and whatever a test needs to speak to it."""

    url: str
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def search(tiny_products, tmp_path_factory) -> Iterator[Target]:
    service = make_service(tiny_products, tmp_path_factory.mktemp("http-search"))
    with BackgroundServer(search_app(service)) as srv:
        yield Target(srv.url, {"service": service})


@pytest.fixture(scope="module")
def serve() -> Iterator[Target]:
    backend = EchoBackend()
    with BackgroundServer(serve_app(backend)) as srv:  # the default 16 MiB body limit
        yield Target(srv.url, {"backend": backend})


@pytest.fixture(scope="module")
def gateway(tiny_products, tmp_path_factory) -> Iterator[Target]:
    service: SearchService = make_service(tiny_products, tmp_path_factory.mktemp("http-gw"))
    gw: Gateway = make_gateway(service, limits=Limits.unlimited().model_copy(
        update={"max_body_bytes": GATEWAY_BODY_CAP}))
    with gw.serve() as srv:
        yield Target(srv.url, {"gateway": gw})


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Iterator[Target]:
    clock = ManualClock(T0)
    chain = LocalChain(seed=9)
    for ident in (IDS["miner"], IDS["validator"]):
        chain.register(ident.hotkey_ss58, ident.coldkey_ss58)
    chain.add_stake(IDS["validator"].hotkey_ss58, 10_000.0)
    db: Path = tmp_path_factory.mktemp("http-arena") / "arena.db"
    service = make_arena(f"sqlite:///{db}", clock=clock, chain=chain, cfg=config())
    from shoparena.arena.api import create_app

    with BackgroundServer(create_app(service, RequestVerifier(chain.metagraph, clock=clock))) as srv:
        yield Target(srv.url, {"clock": clock, "arena": service})
    service.close()
