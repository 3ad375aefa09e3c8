"""Fixtures for the env tests: the strict-mode search service over the 20-product catalog, a fake clock (the
upstream-mode ``backend`` is shared, in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from shoparena.catalog.search import SearchService
from tests.env._env_helpers import FakeClock


@pytest.fixture(scope="session")
def strict_backend(backend: SearchService) -> SearchService:
    return SearchService(backend.index, mode="strict")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
