"""Compact observation rendering: long tool results cut to their first products and a few fields, so a
conversation fits a short CPU context. One pure function over OpenAI messages, used identically by training
(:mod:`shoparena.train.format`) and by the ``hf:`` backend at evaluation time (a model directory that carries
``shoparena_format.json`` with a ``compact`` section is always served with the same compaction it was trained on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FORMAT_FILE", "CompactConfig", "compact_messages", "read_compact"]

FORMAT_FILE = "shoparena_format.json"
"""Written next to a trained checkpoint: the observation rendering it was trained with."""


class CompactConfig(BaseModel):
    """How tool results are shortened. ``max_items``: products kept of a JSON list result; ``fields``: keys kept
    in each product (``None`` = all); ``detail_fields``: keys kept besides ``fields`` — a product's details as
    ``view_product_information`` returns them, the only place a model can read the attribute and SKU constraints
    a problem asks for; ``max_chars``: hard cap on any tool result's text (cut, marked ``…``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_items: int = Field(5, ge=1)
    fields: tuple[str, ...] | None = ("product_id", "shop_id", "title", "price", "service")
    detail_fields: tuple[str, ...] = ("attributes", "sku_options")
    max_chars: int = Field(1500, ge=16)

    def keeps(self, key: str) -> bool:
        """Whether a product's ``key`` survives compaction."""
        return self.fields is None or key in self.fields or key in self.detail_fields


def _compact_text(text: str, config: CompactConfig) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list):
        items = value[: config.max_items]
        if config.fields is not None:
            items = [{k: v for k, v in item.items() if config.keeps(k)} if isinstance(item, dict) else item
                     for item in items]
        text = json.dumps(items, ensure_ascii=False)
    elif isinstance(value, dict) and config.fields is not None:
        # view_product_information-style: {"<id>": {...}} or one product object
        if all(isinstance(v, dict) for v in value.values()):
            value = {k: {f: x for f, x in v.items() if config.keeps(f)}
                     for k, v in list(value.items())[: config.max_items]}
        text = json.dumps(value, ensure_ascii=False)
    if len(text) > config.max_chars:
        text = text[: config.max_chars - 1] + "…"
    return text


def compact_messages(messages: list[dict[str, Any]], config: CompactConfig | None) -> list[dict[str, Any]]:
    """``messages`` with every ``tool`` message's string content compacted (copies; others untouched).
    ``config=None`` returns the messages unchanged."""
    if config is None:
        return messages
    out = []
    for m in messages:
        if m.get("role") == "tool" and isinstance(m.get("content"), str):
            m = {**m, "content": _compact_text(m["content"], config)}
        out.append(m)
    return out


def read_compact(model_dir: str | Path) -> CompactConfig | None:
    """The compaction a checkpoint was trained with (``<model_dir>/shoparena_format.json``), or ``None``."""
    path = Path(model_dir) / FORMAT_FILE
    if not path.is_file():
        return None
    body = json.loads(path.read_text(encoding="utf-8"))
    compact = body.get("compact") if isinstance(body, dict) else None
    return CompactConfig.model_validate(compact) if compact else None
