"""Fixtures for the offline policy tests: a small synthetic catalog with its real search service and problems,
and a synchronous runner adapter with fixed sampling."""

from __future__ import annotations

from typing import Any

import pytest

from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.synthetic import generate_catalog
from shoparena.llm.types import Sampling
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.types import Problem


class Sampled:
    """A policy backend as the runner's synchronous ``Policy``, with fixed sampling; records every request."""

    def __init__(self, backend: Any, temperature: float = 0.0, seed: int | None = 0) -> None:
        self.backend = backend
        self.sampling = Sampling(temperature=temperature, seed=seed)
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.requests.append((messages, tools))
        return self.backend.complete(messages, tools or None, self.sampling)


@pytest.fixture(scope="session")
def synth_index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.build(generate_catalog(2000, 0), tmp_path_factory.mktemp("pol") / "index")


@pytest.fixture(scope="session")
def svc(synth_index: SearchIndex) -> SearchService:
    return SearchService(synth_index)


@pytest.fixture(scope="session")
def problems(synth_index: SearchIndex) -> list[Problem]:
    """45 generated problems, 15 per bucket (clusters of 3 paraphrases)."""
    return generate_problems(synth_index, 45, seed=5)


@pytest.fixture(scope="session")
def by_bucket(problems: list[Problem]) -> dict[str, Problem]:
    return {b: next(p for p in problems if p.bucket == b) for b in ("product", "shop", "voucher")}
