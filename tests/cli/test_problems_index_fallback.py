"""``shoparena problems generate`` reads a catalog's index when it has one and falls back to its documents
otherwise; the fallback is logged (with why the index was not used), not silently swallowed."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from shoparena.catalog.directory import INDEX_DIR, create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.cli.problems import _catalog_products


def test_a_catalog_without_index_falls_back_to_documents_and_says_why(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    create_catalog(generate_catalog(20, seed=3, min_count=1), tmp_path / "cat")
    with caplog.at_level(logging.INFO, logger="shoparena.cli.problems"):
        indexed = _catalog_products(tmp_path / "cat")
    assert caplog.records == [] and len(indexed) == 20
    shutil.rmtree(tmp_path / "cat" / INDEX_DIR)
    with caplog.at_level(logging.INFO, logger="shoparena.cli.problems"):
        products = _catalog_products(tmp_path / "cat")
    assert sorted(p.product_id for p in products) == sorted(indexed[i].product_id for i in range(len(indexed)))
    [record] = caplog.records
    assert "no search index" in record.getMessage() and "NotFoundError" in record.getMessage()
