"""A corpus travels: the inputs its manifest records (problems, catalog) are relative to the corpus, so a tree holding
a corpus built with a relative ``--out`` is read from any working directory after it was moved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shoparena.artefact import resolve_input
from shoparena.corpus.build import build_corpus
from shoparena.corpus.problems import partition_problems
from tests.corpus.conftest import CorpusWorld


def test_a_moved_corpus_finds_its_bank_and_catalog_from_anywhere(corpus_world: CorpusWorld, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "demo-out"
    (tree / "arena").mkdir(parents=True)
    shutil.copytree(corpus_world.catalog, tree / "arena" / "catalog")
    shutil.copyfile(corpus_world.problems_file, tree / "arena" / "problems.jsonl")
    monkeypatch.chdir(tmp_path)
    build_corpus("demo-out/corpus", store=corpus_world.store_url, catalog="demo-out/arena/catalog",
                 problems="demo-out/arena/problems.jsonl")
    sources = json.loads((tree / "corpus" / "manifest.json").read_text())["sources"]
    assert sources["problems"] == "../arena/problems.jsonl" and sources["catalog"] == "../arena/catalog"
    want = partition_problems(tree / "corpus", "train")

    moved = tmp_path / "elsewhere" / "kept"
    shutil.move(tree, moved)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert partition_problems(moved / "corpus", "train") == want
    assert resolve_input(sources["catalog"], moved / "corpus").resolve() == (moved / "arena" / "catalog").resolve()
