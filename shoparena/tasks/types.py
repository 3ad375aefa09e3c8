"""The problem record for the three ShoppingBench buckets plus Knowledge (docs/shoppingbench.md §3).

Reward items keep upstream's exact JSON shapes (``title`` is a one-element list, ``price`` a list of one
``{mode: [lower, upper]}``, ``attributes`` a list of single-key dicts) so a problem written back to upstream
JSONL is byte-compatible with the original.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shoparena.catalog.types import Product

Bucket = Literal["product", "shop", "voucher", "knowledge"]
BUCKETS: tuple[str, ...] = ("product", "shop", "voucher", "knowledge")
#: Buckets that enter the 3-bucket ASR (Knowledge is reported apart, docs/shoppingbench.md §7.7).
ASR_BUCKETS: tuple[str, ...] = ("product", "shop", "voucher")
PRICE_MODES: tuple[str, ...] = ("less than", "greater than", "between")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
#: How a generated problem relates to its cluster's base problem (``tasks/generator.py``).
VARIANTS: tuple[str, ...] = ("base", "paraphrase", "reorder", "substitution")

Number = int | float


class RewardItem(BaseModel):
    """The constraints on one requested product (one element of upstream ``reward``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    product_id: str
    title: list[str]
    """Exactly one GT title string, as upstream stores it."""
    price: list[dict[str, list[Number | None]]] | None = None
    """``[{"greater than": [1, null]}]`` etc.; ``null`` is an open side."""
    service: list[str] | None = None
    sku_options: list[dict[str, str]] | None = None
    """One dict: the SKU pairs that must all come from one variant."""
    attributes: list[dict[str, list[str]]] | None = None
    """Single-key dicts mapping to a one-element value list."""

    @field_validator("product_id", mode="before")
    @classmethod
    def _id_as_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("price", mode="after")
    @classmethod
    def _check_price(cls, v: list[dict[str, list[Number | None]]] | None) -> Any:
        for entry in v or []:
            for mode, bounds in entry.items():
                if mode not in PRICE_MODES:
                    raise ValueError(f"unknown price mode {mode!r}; expected one of {PRICE_MODES}")
                if len(bounds) != 2:
                    raise ValueError(f"price bounds must be [lower, upper], got {bounds!r}")
        return v

    def sku_attr_pairs(self) -> list[tuple[str, str]]:
        """Every atomic (key, value) constraint from ``sku_options`` then ``attributes``."""
        pairs: list[tuple[str, str]] = []
        for sku in self.sku_options or []:
            pairs.extend(sku.items())
        for attr in self.attributes or []:
            for key, values in attr.items():
                pairs.extend((key, value) for value in values)
        return pairs

    def to_upstream(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Voucher(BaseModel):
    """A voucher (docs/shoppingbench.md §3.3). ``discount`` is a fraction (0.14), not a percent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    voucher_type: Literal["platform", "shop"]
    threshold: Number
    discount_type: Literal["fixed", "percentage"]
    face_value: Number | None = None
    discount: float | None = None
    cap: Number | None = None
    price_after_voucher: float
    budget: Number


class Problem(BaseModel):
    """One problem of any bucket, with our extra keys (``problem_id``, ``bucket``, ``cluster_id``…)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    problem_id: str
    bucket: Bucket
    query: str
    reward: list[RewardItem] = Field(default_factory=list)
    """One item per requested product in query order (one for product problems; empty for Knowledge)."""
    voucher: Voucher | None = None
    difficulty: str | None = None
    cluster_id: str | None = None
    """Leak cluster: paraphrases / reorders / substitutions of one constraint set share it."""
    title: str | None = None
    """ORO suite display title ("Product 1")."""
    suite: str | None = None
    """Where the problem came from (file stem, suite name, generator)."""
    reward_title_embeddings: dict[str, list[float]] | None = None
    """ORO v2+: GT title → embedding. Never hand this to an agent."""
    knowledge_attribute: str | None = None
    """Knowledge bucket: the trivia answer (coerced to str, spaces kept as upstream stores them)."""
    knowledge_product: Product | None = None
    """Knowledge bucket: the full GT product record (upstream ``reward``)."""
    variant: str | None = None
    """Generated problems only: one of :data:`VARIANTS` (base, paraphrase, attribute/item reorder, retailer
    substitution); None for loaded upstream/ORO problems."""

    def to_upstream(self) -> dict[str, Any]:
        """The upstream JSONL object: product reward as one object, shop/voucher as a list."""
        out: dict[str, Any] = {"query": self.query}
        if self.bucket == "knowledge":
            out["Knowledge_Attribute"] = self.knowledge_attribute
            out["reward"] = self.knowledge_product.to_upstream() if self.knowledge_product else None
            return out
        items = [r.to_upstream() for r in self.reward]
        out["reward"] = items[0] if self.bucket == "product" else items
        if self.voucher is not None:
            out["voucher"] = self.voucher.model_dump()
        return out

    def public_view(self) -> dict[str, Any]:
        """What an agent may see: ``problem_id``, ``bucket`` and ``query`` only. ``reward``, ``voucher``,
        ``reward_title_embeddings`` (keys are GT titles) and the Knowledge answer never leave the harness
        (docs/shoppingbench.md §9.17)."""
        return {"problem_id": self.problem_id, "bucket": self.bucket, "query": self.query}

    def gt_ids(self) -> list[str]:
        if self.bucket == "knowledge":
            return [self.knowledge_product.product_id] if self.knowledge_product else []
        return [r.product_id for r in self.reward]
