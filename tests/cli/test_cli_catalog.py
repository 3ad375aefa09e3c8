"""The CLI interface the project's checks rely on: catalog generate / import / info, search, demo."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoparena.catalog.types import FIND_FIELDS
from shoparena.cli import app

runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "cat"
    invoke("catalog", "generate", "--size", "400", "--seed", "3", "--out", out)
    return out


def test_generate_writes_upstream_documents_and_an_index(catalog: Path, tmp_path: Path) -> None:
    docs = catalog / "documents.jsonl.gz"
    with gzip.open(docs, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == 400
    assert set(rows[0]) == {"id", "contents", "product"} and rows[0]["id"] == rows[0]["product"]["product_id"]
    assert (catalog / "index" / "meta.json").exists()
    again = tmp_path / "again"
    invoke("catalog", "generate", "--size", "400", "--seed", "3", "--out", again)
    assert (again / "documents.jsonl.gz").read_bytes() == docs.read_bytes()  # same seed, same bytes
    meta = json.loads(invoke("catalog", "info", "--catalog", catalog, "--json"))
    assert meta["n_docs"] == 400 and meta["k1"] == 0.9 and meta["b"] == 0.4


def test_search_json_prints_the_upstream_result_list(catalog: Path) -> None:
    first = json.loads(invoke("search", "--catalog", catalog, "set", "--json"))
    assert first and all(tuple(item) == FIND_FIELDS for item in first)
    cheap = json.loads(invoke("search", "--catalog", catalog, "set", "--price", "-500", "--sort", "priceasc",
                              "--json"))
    prices = [item["price"] for item in cheap]
    assert prices == sorted(prices) and all(p <= 500 for p in prices)
    page2 = json.loads(invoke("search", "--catalog", catalog, "set", "--page", "2", "--json"))
    assert not {i["product_id"] for i in page2} & {i["product_id"] for i in first}
    shop = first[0]["shop_id"]
    in_shop = json.loads(invoke("search", "--catalog", catalog, "set", "--shop-id", shop, "--json"))
    assert {i["shop_id"] for i in in_shop} == {shop}
    err = json.loads(invoke("search", "--catalog", catalog, "set", "--service", "lazmall", "--mode", "strict",
                            "--json"))
    assert err["argument"] == "service"


def test_import_indexes_an_upstream_file_and_reports_bad_lines(catalog: Path, tmp_path: Path) -> None:
    source = tmp_path / "documents.jsonl"
    with gzip.open(catalog / "documents.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    source.write_text("\n".join([lines[0], "{not json", *lines[1:50]]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["catalog", "import", str(source), "--out", str(tmp_path / "imp")])
    assert result.exit_code == 0, result.output
    assert "1 bad line" in result.output and "line 2" in result.output
    got = json.loads(invoke("search", "--catalog", tmp_path / "imp", "set", "--json"))
    assert got and all(tuple(item) == FIND_FIELDS for item in got)


def test_missing_catalog_is_a_clear_error_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from shoparena.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["search", "--catalog", str(tmp_path / "nowhere"), "x", "--json"])
    assert exc.value.code == 4  # NotFoundError's stable exit code
    err = capsys.readouterr().err
    assert "no search index" in err and "hint" in err and "Traceback" not in err


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = invoke("demo", "--out", tmp_path / "demo", "--size", "400", "--problems", "9")
    assert "hand-made recommendations" in out and "ASR" in out
    assert (tmp_path / "demo" / "rollouts.jsonl").exists()
    assert (tmp_path / "demo" / "problems.jsonl").exists()
