"""Fixtures for the env tests: the real search service over the 20-product catalog, a fake clock."""

from __future__ import annotations

import pytest

from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.types import Product
from tests.env._env_helpers import FakeClock


@pytest.fixture(scope="session")
def backend(tiny_products: list[Product], tmp_path_factory: pytest.TempPathFactory) -> SearchService:
    """The real in-process search service (upstream mode) over the 20 hand-made products."""
    return SearchService(SearchIndex.build(tiny_products, tmp_path_factory.mktemp("env") / "idx"))


@pytest.fixture(scope="session")
def strict_backend(backend: SearchService) -> SearchService:
    return SearchService(backend.index, mode="strict")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
