"""Products: the schema, loaders, the synthetic generator, the BM25 search index and its HTTP service.

The public interface (what the CLI and the other packages import: ``from shoparena.catalog import SearchIndex``);
names load lazily, so ``import shoparena.catalog`` stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoparena._lazy import lazy_exports

if TYPE_CHECKING:
    from shoparena.catalog.directory import (
        DOCUMENTS_FILE,
        INDEX_DIR,
        create_catalog,
        documents_path,
        import_catalog,
        index_path,
        iter_catalog_products,
    )
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import FLAVORS, MODES, SearchService
    from shoparena.catalog.server import serve as serve_index
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.catalog.taxonomy import CATEGORY_NOUNS
    from shoparena.catalog.types import SERVICE_CODES, Product, ProductLookup, SearchBackend

#: Public name → ``module`` (same name) or ``module:attr`` under this package; imported on first use.
_EXPORTS: dict[str, str] = {
    "CATEGORY_NOUNS": "taxonomy",
    "create_catalog": "directory",
    "DOCUMENTS_FILE": "directory",
    "documents_path": "directory",
    "FLAVORS": "search",
    "generate_catalog": "synthetic",
    "import_catalog": "directory",
    "INDEX_DIR": "directory",
    "index_path": "directory",
    "iter_catalog_products": "directory",
    "MODES": "search",
    "Product": "types",
    "ProductLookup": "types",
    "SearchBackend": "types",
    "SearchIndex": "index",
    "SearchService": "search",
    "serve_index": "server:serve",
    "SERVICE_CODES": "types",
}
__all__ = [
    "CATEGORY_NOUNS",
    "DOCUMENTS_FILE",
    "FLAVORS",
    "INDEX_DIR",
    "MODES",
    "SERVICE_CODES",
    "Product",
    "ProductLookup",
    "SearchBackend",
    "SearchIndex",
    "SearchService",
    "create_catalog",
    "documents_path",
    "generate_catalog",
    "import_catalog",
    "index_path",
    "iter_catalog_products",
    "serve_index"
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
