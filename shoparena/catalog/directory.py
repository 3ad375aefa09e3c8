"""The on-disk layout of a catalog directory: ``documents.jsonl.gz`` (upstream format) beside ``index/``.

``shoparena catalog generate`` and ``catalog import`` write it; every command that takes ``--catalog`` reads
it through these functions, so the layout is defined once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from shoparena.catalog.types import Product
from shoparena.errors import NotFoundError

if TYPE_CHECKING:
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.loader import LoadReport

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


def create_catalog(products: Iterable[Product], out: str | Path,
                   progress: Callable[[int], None] | None = None) -> SearchIndex:
    """Write ``out/documents.jsonl.gz`` and build ``out/index`` in one pass over ``products``."""
    from shoparena._io import jsonl_writer
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.loader import document_row

    root = Path(out)
    with jsonl_writer(root / DOCUMENTS_FILE) as writer:

        def tee() -> Iterator[Product]:
            for product in products:
                writer.write(document_row(product))
                yield product

        index = SearchIndex.build(tee(), root / INDEX_DIR, progress=progress)
    (root / SOURCE_FILE).unlink(missing_ok=True)
    return index


def import_catalog(file: str | Path, out: str | Path, progress: Callable[[int], None] | None = None, *,
                   allow_empty: bool = False, overwrite: bool = True) -> tuple[SearchIndex, LoadReport]:
    """Index an upstream ``documents.jsonl[.gz]`` into ``out/index`` (the file is referenced, not copied).

    Bad lines are skipped, counted and returned in the :class:`LoadReport` with their line numbers. The index is
    built beside the target and swapped in only when complete, so a failed import leaves an existing catalog as
    it was: a file with no valid line is a :class:`DataError` (unless ``allow_empty``), and with
    ``overwrite=False`` an existing catalog in ``out`` is a :class:`ConfigError`. A replaced catalog's own
    documents file is removed, so the directory never pairs one catalog's documents with another's index.
    """
    import os
    import shutil
    import tempfile

    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.loader import LoadReport, iter_documents
    from shoparena.errors import ConfigError, DataError

    source = Path(file).resolve()
    if source.is_dir():
        raise ConfigError(f"{file} is a directory", hint="pass the upstream documents.jsonl or .jsonl.gz file")
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--out {root} is a file", hint="pass a directory for the catalog")
    own_docs = root / DOCUMENTS_FILE
    existing = (root / INDEX_DIR).exists() or own_docs.exists() or (root / SOURCE_FILE).exists()
    if existing and not overwrite:
        raise ConfigError(f"{root} already holds a catalog", hint="pass --force to replace it, or another --out")
    report = LoadReport(path=str(source))
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".import.", dir=root))
    try:
        built = SearchIndex.build(iter_documents(source, report), tmp / INDEX_DIR, progress=progress)
        n_docs = len(built)
        del built
        if n_docs == 0 and not allow_empty:
            raise DataError(f"no valid product line in {file}" + (f" ({report.summary()})" if report.n_bad else ""),
                            hint="check the file; pass --allow-empty to index an empty catalog anyway")
        target = root / INDEX_DIR
        if target.exists():
            os.replace(target, tmp / "old-index")
        os.replace(tmp / INDEX_DIR, target)
        if own_docs.exists() and own_docs.resolve() != source:
            own_docs.unlink()  # the replaced catalog's documents: they no longer match the index
        (root / SOURCE_FILE).write_text(str(source) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return SearchIndex.open(target), report
