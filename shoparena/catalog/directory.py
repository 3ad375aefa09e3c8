"""The on-disk layout of a catalog directory: ``documents.jsonl.gz`` (upstream format) beside ``index/``.

``shoparena catalog generate`` and ``catalog import`` write it; every command that takes ``--catalog`` reads
it through these functions, so the layout is defined once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from shoparena.catalog.types import Product
from shoparena.errors import NotFoundError

DOCUMENTS_FILE = "documents.jsonl.gz"
INDEX_DIR = "index"
SOURCE_FILE = "source.txt"
"""For an imported catalog: the path of the upstream documents file it was built from."""


def documents_path(catalog: str | Path) -> Path:
    """The documents file of a catalog directory (a copy, or the imported source it points at)."""
    root = Path(catalog)
    own = root / DOCUMENTS_FILE
    if own.exists():
        return own
    source = root / SOURCE_FILE
    if source.exists():
        return Path(source.read_text(encoding="utf-8").strip())
    raise NotFoundError(
        f"no {DOCUMENTS_FILE} under {root}",
        hint="generate a catalog with `shoparena catalog generate --out DIR` or import one",
    )


def index_path(catalog: str | Path) -> Path:
    """The search index directory of a catalog directory (or the directory itself if it is an index)."""
    root = Path(catalog)
    for cand in (root / INDEX_DIR, root):
        if (cand / "meta.json").is_file():
            return cand
    raise NotFoundError(
        f"no search index under {root}",
        hint="build one with `shoparena catalog generate --out DIR` or `shoparena catalog import FILE --out DIR`",
    )


def iter_catalog_products(catalog: str | Path) -> Iterator[Product]:
    """Stream every product of a catalog directory (upstream file order; bad lines are skipped and counted by
    the loader, see :func:`shoparena.catalog.loader.iter_products`)."""
    from shoparena.catalog.loader import iter_products

    return iter_products(documents_path(catalog))
