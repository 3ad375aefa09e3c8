"""Streaming reader and writer of upstream ``documents.jsonl[.gz]`` (docs/shoppingbench.md §1.1–1.3).

Owns the line format ``{"id", "contents", "product"}``, the per-line validity rules, the bad-line report and
:func:`construct_product`, the fast constructor for records already known to be valid.

Reading is built for the 2.5 M-line upstream file: each line is parsed with orjson and checked by a
hand-written test of the canonical upstream shapes (:func:`_fast_product`); only a line that fails it goes
through ``Product.model_validate`` (which also accepts pydantic's lax coercions, e.g. a price written as
``"12.5"``, though not a boolean price or count) and, if that fails too, gives the precise error for the
report. Beyond the pydantic schema a record must have non-empty ids, a finite price ≥ 0, ``sold_count`` ≥ 0
and only known service codes.
A bad line never stops the stream: it is counted by reason with its line number in a :class:`LoadReport`.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from shoparena._io import iter_lines, write_jsonl
from shoparena.catalog.types import PRODUCT_FIELDS, SERVICE_CODES, Product, product_contents
from shoparena.errors import NotFoundError

#: Reasons a line can be rejected, in the order the checks run (stable strings: reports and tests use them).
REASONS: tuple[str, ...] = (
    "undecodable UTF-8", "invalid JSON", "not an object", "missing id", "invalid id", "missing product",
    "invalid product", "invalid contents", "schema error", "invalid value", "id mismatch", "duplicate id",
)
MAX_EXAMPLES = 1000
"""Bad-line messages kept in a report; every bad line is counted regardless."""

_FIELD_SET = frozenset(PRODUCT_FIELDS)
_SERVICES = frozenset(SERVICE_CODES)


class CatalogDocument(NamedTuple):
    """One upstream line: the Lucene docid, the indexed text and the record."""

    id: str
    contents: str
    product: Product


@dataclass
class LoadReport:
    """What a read of one documents file accepted and rejected (filled in while streaming)."""

    path: str
    n_ok: int = 0
    n_bad: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    """Reason (one of :data:`REASONS`) → number of bad lines."""
    examples: list[tuple[int, str]] = field(default_factory=list)
    """(line number, message) of the first :data:`MAX_EXAMPLES` bad lines."""
    first_line: dict[str, int] = field(default_factory=dict)
    """Reason → line number of its first occurrence."""

    @property
    def bad_count(self) -> int:
        return self.n_bad

    def add_bad(self, line: int, reason: str, detail: str) -> None:
        self.n_bad += 1
        self.reasons[reason] += 1
        self.first_line.setdefault(reason, line)
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((line, f"{reason}: {detail}"))

    def summary(self) -> str:
        """One readable paragraph, e.g. ``12 bad lines of 2,500,000 in F: invalid JSON 7 (first at line 3), …``."""
        total = self.n_ok + self.n_bad
        if not self.n_bad:
            return f"all {total:,} lines of {self.path} loaded."
        parts = ", ".join(
            f"{reason} {n:,} (first at line {self.first_line[reason]:,})" for reason, n in self.reasons.most_common()
        )
        noun = "bad line" if self.n_bad == 1 else "bad lines"
        return f"{self.n_bad:,} {noun} of {total:,} in {self.path}: {parts}; {self.n_ok:,} products kept."

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "n_ok": self.n_ok, "n_bad": self.n_bad, "reasons": dict(self.reasons),
            "first_line": dict(self.first_line), "examples": [list(e) for e in self.examples],
        }


# -- fast construction -------------------------------------------------------------------------------------

_new = Product.__new__
_setattr = object.__setattr__


def _construct_unchecked(values: dict[str, Any]) -> Product:
    """What ``Product.model_construct(**values)`` does for a complete, ordered field dict, ~5× faster."""
    m = _new(Product)
    _setattr(m, "__dict__", values)
    _setattr(m, "__pydantic_fields_set__", set(_FIELD_SET))
    _setattr(m, "__pydantic_extra__", None)
    _setattr(m, "__pydantic_private__", None)
    return m


def _construct_pydantic(values: dict[str, Any]) -> Product:
    return Product.model_construct(**values)


def _pick_constructor() -> Any:
    """Use the shortcut only if it builds exactly what pydantic builds (guards against pydantic internals
    changing under us)."""
    probe = {"product_id": "1", "shop_id": "2", "brand": "", "category": "", "title": "t",
             "short_description": "", "description": "", "specification": "", "price": 1.0, "sold_count": 0,
             "sku_options": {}, "attributes": {}, "main_image_url": "", "product_url": "", "service": []}
    try:
        a, b = _construct_unchecked(dict(probe)), Product.model_construct(**probe)
        if a == b and a.model_dump() == b.model_dump() and a.model_fields_set == b.model_fields_set:
            return _construct_unchecked
    except Exception as exc:  # pragma: no cover - only on an incompatible pydantic
        logging.getLogger(__name__).warning("fast product construction unavailable (%s: %s); using pydantic's",
                                            type(exc).__name__, exc)
    return _construct_pydantic  # pragma: no cover


_construct = _pick_constructor()


def construct_product(values: dict[str, Any]) -> Product:
    """Build a Product without validation from a dict holding every field of :data:`PRODUCT_FIELDS` with
    already-normalised values (string ids, float price, lowercased SKU/attribute keys and values).

    For generators and the loader's fast path; anything else should use ``Product.model_validate``.
    """
    return _construct({f: values[f] for f in PRODUCT_FIELDS})


# -- per-line checks ---------------------------------------------------------------------------------------

_STR_FIELDS = ("brand", "category", "title", "short_description", "description", "specification",
               "main_image_url", "product_url")
_INF = float("inf")


def _lowered(sku: dict[str, dict[str, str]], attrs: dict[str, list[str]]) -> tuple[dict, dict]:
    """SKU options and attributes with keys and values lowercased, as the Product validators do."""
    return (
        {n: {k.lower(): v.lower() for k, v in opts.items()} for n, opts in sku.items()},
        {k.lower(): [v.lower() for v in vals] for k, vals in attrs.items()},
    )


def _fast_product(p: dict[str, Any]) -> Product | None:
    """The record as a Product if it has exactly the canonical upstream shapes and satisfies every rule,
    else None (the slow path then decides and explains). Reuses ``p`` itself as the field dict when its keys
    are the 15 fields in upstream order (every line upstream writes)."""
    if tuple(p) != PRODUCT_FIELDS:
        if not _FIELD_SET.issuperset(p) or "product_id" not in p or "shop_id" not in p or "title" not in p \
                or "price" not in p:
            return None
        p = {"brand": "", "category": "", "short_description": "", "description": "", "specification": "",
             "sold_count": 0, "sku_options": {}, "attributes": {}, "main_image_url": "", "product_url": "",
             "service": [], **p}
        p = {f: p[f] for f in PRODUCT_FIELDS}
    pid, sid, price, sold = p["product_id"], p["shop_id"], p["price"], p["sold_count"]
    if type(pid) is not str:
        if type(pid) is not int:
            return None
        p["product_id"] = pid = str(pid)
    if type(sid) is not str:
        if type(sid) is not int:
            return None
        p["shop_id"] = sid = str(sid)
    if not pid or not sid or type(sold) is not int or sold < 0:
        return None
    if type(price) is not float:
        if type(price) is not int:
            return None
        p["price"] = price = float(price)
    if not 0.0 <= price < _INF:
        return None
    for name in _STR_FIELDS:
        if type(p[name]) is not str:
            return None
    service = p["service"]
    if type(service) is not list:
        return None
    for code in service:
        if type(code) is not str or code not in _SERVICES:
            return None
    sku, attrs = p["sku_options"], p["attributes"]
    if type(sku) is not dict or type(attrs) is not dict:
        return None
    for opts in sku.values():
        if type(opts) is not dict:
            return None
        for v in opts.values():
            if type(v) is not str:
                return None
    for vals in attrs.values():
        if type(vals) is not list:
            return None
        for v in vals:
            if type(v) is not str:
                return None
    if sku or attrs:
        # One lowercase test over the serialised pair instead of one per string: the text equals its
        # lowercase exactly when no key or value changes under str.lower(), which the validators apply.
        text = orjson.dumps((sku, attrs)).decode()
        if text != text.lower():
            p["sku_options"], p["attributes"] = _lowered(sku, attrs)
    return _construct(p)


def _semantic_error(p: Product) -> str | None:
    """Rules beyond the pydantic schema that upstream data always satisfies."""
    if not p.product_id or not p.shop_id:
        return "product.product_id and product.shop_id must be non-empty"
    if not math.isfinite(p.price) or p.price < 0:
        return f"product.price must be a finite number >= 0 (got {p.price!r})"
    if p.sold_count < 0:
        return f"product.sold_count must be >= 0 (got {p.sold_count!r})"
    for s in p.service:
        if s not in _SERVICES:
            return f"product.service: unknown code {s!r} (known: {', '.join(SERVICE_CODES)})"
    return None


def _pydantic_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors(include_url=False)[:3]:
        loc = ".".join(str(x) for x in ("product", *err["loc"]))
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"{loc}: {err['msg']} (got {got})" if err["type"] != "missing" else f"{loc}: missing")
    more = e.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class BadLine(Exception):
    """Why :func:`parse_document` rejected a line: ``reason`` (one of :data:`REASONS`) and a precise ``detail``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def _json_error(raw: bytes, e: Exception) -> BadLine:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as u:
        return BadLine("undecodable UTF-8", f"byte {u.start}: {u.reason}")
    return BadLine("invalid JSON", str(e))


def parse_document(raw: bytes) -> CatalogDocument:
    """Parse and check one documents line; raises :class:`BadLine`. Duplicate ids are the caller's business."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise _json_error(raw, e) from None
    if type(obj) is not dict:
        raise BadLine("not an object", f"a JSON {type(obj).__name__} where an object was expected")
    if "id" not in obj:
        raise BadLine("missing id", "no 'id' key")
    doc_id = obj["id"]
    if type(doc_id) is int:
        doc_id = str(doc_id)
    elif type(doc_id) is not str or not doc_id:
        raise BadLine("invalid id", f"'id' must be a non-empty string or integer (got {doc_id!r:.60})")
    p = obj.get("product")
    if p is None:
        raise BadLine("missing product", "no 'product' object")
    if type(p) is not dict:
        raise BadLine("invalid product", f"'product' must be an object (got {type(p).__name__})")
    product = _fast_product(p)
    if product is None:
        for name in ("price", "sold_count"):
            if type(p.get(name)) is bool:  # pydantic's lax mode would read true as 1
                raise BadLine("schema error", f"product.{name}: a boolean where a number was expected")
        try:
            product = Product.model_validate(p)
        except ValidationError as e:
            raise BadLine("schema error", _pydantic_message(e)) from None
        problem = _semantic_error(product)
        if problem:
            raise BadLine("invalid value", problem)
    if product.product_id != doc_id:
        raise BadLine("id mismatch", f"'id' {doc_id!r} != product.product_id {product.product_id!r}")
    contents = obj.get("contents")
    if contents is None:
        contents = product_contents(product)
    elif type(contents) is not str:
        raise BadLine("invalid contents", f"'contents' must be a string (got {type(contents).__name__})")
    return CatalogDocument(doc_id, contents, product)


def _id_key(pid: str) -> int | str:
    """A compact set key: the int for canonical digit ids (no leading zero), else the string itself."""
    if pid.isdigit() and pid[0] != "0" and len(pid) < 19:
        return int(pid)
    return pid


# -- public API --------------------------------------------------------------------------------------------

def _check_exists(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(
            f"no catalog documents file at {p}",
            hint="pass an upstream documents.jsonl or .jsonl.gz, or write one with "
                 "`shoparena catalog generate --out DIR`",
        )
    return p


def iter_documents(path: str | os.PathLike[str], report: LoadReport | None = None) -> Iterator[CatalogDocument]:
    """Stream the valid documents of a ``.jsonl`` or ``.jsonl.gz`` file in file order.

    Bad lines (see :data:`REASONS`) are skipped and recorded in ``report``; for a repeated product id the
    first line wins and the later ones are reported as ``duplicate id``. Blank lines are ignored.
    Raises :class:`NotFoundError` at once (not on first ``next``) if the file does not exist.
    """
    p = _check_exists(path)
    rep = report if report is not None else LoadReport(path=str(p))
    return _iter_documents(p, rep)


def _iter_documents(p: Path, rep: LoadReport) -> Iterator[CatalogDocument]:
    seen: set[int | str] = set()
    for n, raw in iter_lines(p):
        try:
            doc = parse_document(raw)
        except BadLine as bad:
            rep.add_bad(n, bad.reason, bad.detail)
            continue
        key = _id_key(doc.id)
        if key in seen:
            rep.add_bad(n, "duplicate id", f"product id {doc.id!r} already loaded from an earlier line")
            continue
        seen.add(key)
        rep.n_ok += 1
        yield doc


def iter_products(path: str | os.PathLike[str], report: LoadReport | None = None) -> Iterator[Product]:
    """Stream the valid products of a documents file (see :func:`iter_documents`)."""
    return (doc.product for doc in iter_documents(path, report))


def upstream_record(p: Product) -> dict[str, Any]:
    """``p.to_upstream()`` without its per-product deep copy, for serialising at scale: the product's own
    field dict (for this model, with no aliases, serializers or computed fields, the same keys, order and
    values; tested on the real records). Read-only: never mutate what it returns."""
    return p.__dict__ if type(p) is Product else p.to_upstream()


def document_row(p: Product) -> dict[str, Any]:
    """The upstream line object of a product: ``{"id", "contents", "product"}``."""
    return {"id": p.product_id, "contents": product_contents(p), "product": upstream_record(p)}


def write_documents(products: Iterable[Product], path: str | os.PathLike[str]) -> int:
    """Atomically write products as upstream documents lines (gzip when ``path`` ends in ``.gz``, with a fixed
    header so the same products give the same bytes). Returns the number of lines written."""
    return write_jsonl(path, (document_row(p) for p in products))
