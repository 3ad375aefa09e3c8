"""The product record, exactly as upstream ShoppingBench stores it (docs/shoppingbench.md §1.2).

Ids are strings of digits; SKU and attribute keys and values are lowercased (the scorer compares them
byte-exact, so loaders keep them as they are apart from lowercasing, which is idempotent on upstream data).
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, field_validator

#: The four service codes upstream knows, case-sensitive (docs/shoppingbench.md §1.2).
SERVICE_CODES: tuple[str, ...] = ("official", "freeShipping", "COD", "flashsale")

#: Product fields in upstream order.
PRODUCT_FIELDS: tuple[str, ...] = (
    "product_id", "shop_id", "brand", "category", "title", "short_description", "description",
    "specification", "price", "sold_count", "sku_options", "attributes", "main_image_url", "product_url",
    "service",
)


class Product(BaseModel):
    """One catalog product. Field order and names match upstream ``documents.jsonl`` ``product`` objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    product_id: str
    """Digit string; the Lucene docid upstream."""
    shop_id: str
    """Digit string; the only shop information anywhere (no shop table exists upstream)."""
    brand: str = ""
    category: str = ""
    """Category hierarchy joined by ``" > "``."""
    title: str
    short_description: str = ""
    description: str = ""
    specification: str = ""
    """``"k:v;k:v"``."""
    price: float
    """Price in PHP."""
    sold_count: int = 0
    """Sales volume; sort ``order`` ranks by it, descending."""
    sku_options: dict[str, dict[str, str]] = {}
    """Variant number ``"1"``..``"9"`` → ``{option_key: value}`` (lowercased)."""
    attributes: dict[str, list[str]] = {}
    """Attribute key → values (lowercased)."""
    main_image_url: str = ""
    product_url: str = ""
    service: list[str] = []
    """Subset of :data:`SERVICE_CODES`."""

    @field_validator("product_id", "shop_id", mode="before")
    @classmethod
    def _id_as_str(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("an id must be a string of digits, not a boolean")
        return str(v) if isinstance(v, int) else v

    @field_validator("sku_options", mode="after")
    @classmethod
    def _lower_sku(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        return {n: {k.lower(): s.lower() for k, s in opts.items()} for n, opts in v.items()}

    @field_validator("attributes", mode="after")
    @classmethod
    def _lower_attrs(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        return {k.lower(): [s.lower() for s in vals] for k, vals in v.items()}

    def to_upstream(self) -> dict[str, Any]:
        """The upstream JSON object (plain dict, upstream field order)."""
        return self.model_dump()


class ProductLookup(Protocol):
    """Anything that resolves a product id to a product (an index, a dict-backed catalog, an HTTP client)."""

    def get(self, product_id: str) -> Product | None: ...


def product_contents(product: Product) -> str:
    """The indexed text upstream builds (docs/shoppingbench.md §1.3): three lines joined by ``\\n`` — the title;
    the space-joined set of all SKU option values; the space-joined set of all attribute values.

    Upstream joins a Python ``set`` (arbitrary order); we keep first-occurrence order so the same product
    always gives the same bytes. Order never changes a BM25 score.
    """
    sku_values = dict.fromkeys(v for opts in product.sku_options.values() for v in opts.values())
    attr_values = dict.fromkeys(v for vals in product.attributes.values() for v in vals)
    return "\n".join((product.title, " ".join(sku_values), " ".join(attr_values)))


#: Fields of one ``find_product`` result item, in upstream order (docs/shoppingbench.md §2.1).
FIND_FIELDS: tuple[str, ...] = ("product_id", "shop_id", "title", "price", "service", "sold_count")
#: Fields of one ``view_product_information`` item, in upstream order (docs/shoppingbench.md §2.2).
VIEW_FIELDS: tuple[str, ...] = ("product_id", "short_description", "description", "sku_options", "attributes")


class SearchBackend(Protocol):
    """The search surface every tool, agent and scorer talks to (docs/shoppingbench.md §2).

    Implemented in-process by :class:`shoparena.catalog.search.SearchService` and over HTTP by
    :class:`shoparena.catalog.client.SearchClient`. Arguments arrive as the raw strings an agent wrote;
    the backend applies the upstream parsing rules (or the strict ones) itself.
    """

    def find_product(
        self,
        q: str,
        page: int | str = 1,
        shop_id: str | None = None,
        price: str | None = None,
        sort: str | None = None,
        service: str | None = None,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """Upstream result items (:data:`FIND_FIELDS`), or in strict mode an error observation
        ``{"error": str, "argument": str, "accepted": str}`` for a malformed argument."""
        ...

    def view_product_information(self, product_ids: str | list[str]) -> list[dict[str, Any]]:
        """:data:`VIEW_FIELDS` items for the ids found (comma string or list); unknown ids skipped."""
        ...

    def get_product_raw(self, product_ids: str | list[str]) -> list[dict[str, Any]]:
        """Full product records for the ids found (scorer only)."""
        ...

    def get(self, product_id: str) -> Product | None:
        """One product by exact id, or None."""
        ...
