"""Reading and writing upstream documents files: round trips, bad-line accounting, the fast path."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import orjson
import pytest

from shoparena.catalog.loader import (
    MAX_EXAMPLES,
    REASONS,
    CatalogDocument,
    LoadReport,
    _fast_product,
    construct_product,
    document_row,
    iter_documents,
    iter_products,
    upstream_record,
    write_documents,
)
from shoparena.catalog.types import PRODUCT_FIELDS, Product, product_contents
from shoparena.errors import NotFoundError


def _raw_records(data_dir: Path) -> list[dict]:
    with open(data_dir / "shoppingbench" / "synthesize_web_simpleqa_test.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["reward"] for line in fh]


def _line(product: dict, **top: object) -> bytes:
    obj = {"id": product.get("product_id"), "contents": "c", "product": product, **top}
    return orjson.dumps(obj)


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.jsonl.gz"])
def test_round_trip(tiny_products: list[Product], tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    assert write_documents(tiny_products, path) == len(tiny_products)
    docs = list(iter_documents(path))
    assert [d.product for d in docs] == tiny_products
    assert all(isinstance(d, CatalogDocument) for d in docs)
    assert [d.id for d in docs] == [p.product_id for p in tiny_products]
    assert [d.contents for d in docs] == [product_contents(p) for p in tiny_products]
    assert list(iter_products(path)) == tiny_products


def test_gz_write_is_byte_deterministic(tiny_products: list[Product], tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_documents(tiny_products, a)
    write_documents(tiny_products, b)
    assert a.read_bytes() == b.read_bytes()
    with gzip.open(a, "rb") as fh:
        first = orjson.loads(fh.readline())
    assert list(first) == ["id", "contents", "product"]
    assert list(first["product"]) == list(PRODUCT_FIELDS)


def test_real_upstream_records_load(web_products: list[Product], tmp_path: Path) -> None:
    path = tmp_path / "web.jsonl.gz"
    write_documents(web_products, path)
    report = LoadReport(path=str(path))
    first: dict[str, Product] = {}
    for p in web_products:
        first.setdefault(p.product_id, p)  # the loader keeps the first line of each id
    assert list(iter_products(path, report)) == list(first.values())
    n_dup = len(web_products) - len(first)
    assert n_dup > 0  # some Knowledge problems share their GT product
    assert (report.n_ok, report.n_bad, dict(report.reasons)) == (len(first), n_dup, {"duplicate id": n_dup})


def test_clean_file_summary(tiny_products: list[Product], tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    write_documents(tiny_products, path)
    report = LoadReport(path=str(path))
    list(iter_documents(path, report))
    assert report.summary() == f"all 20 lines of {path} loaded."


def test_document_row_matches_to_upstream(web_products: list[Product]) -> None:
    for p in web_products:
        assert orjson.dumps(upstream_record(p)) == orjson.dumps(p.to_upstream())
        row = document_row(p)
        assert row["product"] == p.to_upstream()
        assert list(row["product"]) == list(p.to_upstream())
        assert orjson.dumps(row["product"]) == orjson.dumps(p.to_upstream())


def test_fast_path_agrees_with_model_validate(data_dir: Path) -> None:
    for raw in _raw_records(data_dir):
        fast = _fast_product(copy.deepcopy(raw))
        assert fast is not None
        assert fast.model_dump() == Product.model_validate(raw).model_dump()
        assert list(fast.__dict__) == list(PRODUCT_FIELDS)


def test_fast_path_normalises_like_the_model(data_dir: Path) -> None:
    raw = _raw_records(data_dir)[0]
    odd = {
        **raw, "product_id": int(raw["product_id"]), "shop_id": int(raw["shop_id"]), "price": 256,
        "sku_options": {"1": {"Color_Family": "Sea BLUE"}, "2": {"size": "EU:39"}},
        "attributes": {"Material": ["Brass Chrome", "ÉCRU"]},
    }
    del odd["brand"], odd["service"]  # optional fields may be missing; key order then differs
    fast = _fast_product(copy.deepcopy(odd))
    assert fast is not None
    assert fast.model_dump() == Product.model_validate(odd).model_dump()
    assert fast.sku_options == {"1": {"color_family": "sea blue"}, "2": {"size": "eu:39"}}
    assert fast.attributes == {"material": ["brass chrome", "écru"]}
    assert (fast.product_id, fast.shop_id, fast.price) == (str(raw["product_id"]), str(raw["shop_id"]), 256.0)


MUTATIONS: list[dict[str, object]] = [
    {"price": True}, {"price": "12.5"}, {"price": None}, {"price": float("inf")}, {"price": -0.5},
    {"sold_count": 1.0}, {"sold_count": 1.5}, {"sold_count": "3"}, {"sold_count": -1}, {"sold_count": False},
    {"title": None}, {"title": 5}, {"brand": 3}, {"product_id": 1.5}, {"product_id": ""}, {"shop_id": None},
    {"sku_options": {"1": {"size": 42}}}, {"sku_options": {"1": ["m"]}}, {"sku_options": []},
    {"attributes": {"material": "cotton"}}, {"attributes": {"material": [1]}}, {"attributes": None},
    {"service": "COD"}, {"service": [1]}, {"service": ["cod"]}, {"extra": 1},
]


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[next(iter(m)) + "=" + repr(next(iter(m.values()))) for m in MUTATIONS])
def test_fast_path_never_accepts_what_validation_rejects(data_dir: Path, mutation: dict[str, object]) -> None:
    raw = {**_raw_records(data_dir)[0], **mutation}
    fast = _fast_product(copy.deepcopy(raw))
    try:
        validated: Product | None = Product.model_validate(raw)
    except ValueError:
        validated = None
    if fast is not None:
        assert validated is not None and fast.model_dump() == validated.model_dump()


def test_construct_product_equals_validated(web_products: list[Product]) -> None:
    for p in web_products:
        assert construct_product(p.model_dump()) == p


def test_int_ids_are_converted(tmp_path: Path) -> None:
    path = tmp_path / "ints.jsonl"
    path.write_bytes(orjson.dumps({"id": 123, "product": {"product_id": 123, "shop_id": 45, "title": "T",
                                                          "price": 9}}) + b"\n")
    (doc,) = list(iter_documents(path))
    assert (doc.id, doc.product.product_id, doc.product.shop_id, doc.product.price) == ("123", "123", "45", 9.0)
    assert doc.contents == "T\n\n"  # computed when the line has none


def test_lax_values_follow_the_model(tmp_path: Path) -> None:
    """The slow path accepts exactly what Product.model_validate accepts (e.g. a numeric string price)."""
    path = tmp_path / "lax.jsonl"
    path.write_bytes(_line({"product_id": "1", "shop_id": "2", "title": "T", "price": "12.5"}) + b"\n")
    (doc,) = list(iter_documents(path))
    assert doc.product.price == 12.5


GOOD = {"product_id": "100", "shop_id": "7", "title": "Good", "price": 10.0, "service": ["COD"]}


def _bad_file(tmp_path: Path) -> tuple[Path, dict[str, list[int]]]:
    lines: list[bytes] = []
    expected: dict[str, list[int]] = {}

    def add(line: bytes, reason: str | None = None) -> None:
        lines.append(line)
        if reason:
            expected.setdefault(reason, []).append(len(lines))

    def good(pid: str) -> bytes:
        return _line({**GOOD, "product_id": pid})

    add(good("100"))
    add(b'{"id": "101", "product": {"title": "caf\xff"}}', "undecodable UTF-8")
    add(b'{"id": "102", "product": ', "invalid JSON")
    add(b"", None)  # blank line: ignored, still numbered
    add(b"[1, 2]", "not an object")
    add(orjson.dumps({"product": {**GOOD, "product_id": "103"}}), "missing id")
    add(orjson.dumps({"id": True, "product": GOOD}), "invalid id")
    add(orjson.dumps({"id": "104", "contents": "x"}), "missing product")
    add(orjson.dumps({"id": "105", "product": "not a dict"}), "invalid product")
    add(_line({**GOOD, "product_id": "106"}, contents=5), "invalid contents")
    add(good("107"))
    add(_line({**GOOD, "product_id": "108", "price": "abc"}), "schema error")
    add(_line({**GOOD, "product_id": "109", "title": 5}), "schema error")
    add(_line({**GOOD, "product_id": "110", "color": "red"}), "schema error")
    add(_line({k: v for k, v in {**GOOD, "product_id": "111"}.items() if k != "title"}), "schema error")
    add(_line({**GOOD, "product_id": "112", "sku_options": {"1": {"size": 42}}}), "schema error")
    add(_line({**GOOD, "product_id": "118", "sold_count": True}), "schema error")
    add(_line({**GOOD, "product_id": "113", "service": ["lazmall"]}), "invalid value")
    add(_line({**GOOD, "product_id": "114", "price": -1.0}), "invalid value")
    add(_line({**GOOD, "product_id": "115", "sold_count": -3}), "invalid value")
    add(orjson.dumps({"id": "999", "product": {**GOOD, "product_id": "116"}}), "id mismatch")
    add(good("100"), "duplicate id")
    add(good("117"))
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"\n".join(lines))  # and no final newline
    return path, expected


def test_bad_lines_are_counted_with_line_numbers(tmp_path: Path) -> None:
    path, expected = _bad_file(tmp_path)
    report = LoadReport(path=str(path))
    ids = [d.id for d in iter_documents(path, report)]
    assert ids == ["100", "107", "117"]  # every good line kept, in order
    assert set(expected) == set(REASONS)  # every failure kind exercised
    assert dict(report.reasons) == {r: len(ns) for r, ns in expected.items()}
    assert report.n_bad == sum(len(ns) for ns in expected.values())
    assert report.n_ok == 3
    assert report.first_line == {r: ns[0] for r, ns in expected.items()}
    by_line = {n: msg for n, msg in report.examples}
    for reason, numbers in expected.items():
        for n in numbers:
            assert by_line[n].startswith(reason + ":"), (n, by_line[n])
    assert "product.price" in by_line[expected["schema error"][0]]
    assert "lazmall" in by_line[expected["invalid value"][0]]


def test_summary_and_to_dict(tmp_path: Path) -> None:
    path, _ = _bad_file(tmp_path)
    report = LoadReport(path=str(path))
    list(iter_documents(path, report))
    text = report.summary()
    assert text.startswith(f"{report.n_bad} bad lines of {report.n_bad + 3} in {path}: schema error 6 (first at line 12)")
    assert "invalid JSON 1 (first at line 3)" in text
    d = report.to_dict()
    assert d["n_ok"] == 3 and d["reasons"]["duplicate id"] == 1
    assert json.loads(json.dumps(d)) == d
    assert report.bad_count == report.n_bad


def test_examples_are_capped_but_all_lines_counted(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"x\n" * (MAX_EXAMPLES + 5))
    report = LoadReport(path=str(path))
    assert list(iter_documents(path, report)) == []
    assert report.n_bad == MAX_EXAMPLES + 5
    assert len(report.examples) == MAX_EXAMPLES
    assert report.reasons["invalid JSON"] == MAX_EXAMPLES + 5


def test_missing_file_raises_not_found_at_call(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as info:
        iter_documents(tmp_path / "nope.jsonl.gz")
    assert info.value.hint and "generate" in info.value.hint
