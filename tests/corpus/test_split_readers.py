"""Every reader of a corpus's sealed split verifies it: ``evaluate --split DIR:eval`` refuses an edited
``split.json`` (or a bank that is not the one the split froze) with exit 3 and a hint, before anything is
written, and the web's ``/corpus`` page (and ``/api/corpus``) flags a corpus that fails verification."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shoparena.corpus.build import build_corpus
from shoparena.corpus.split import SplitManifest
from shoparena.evaluate import partition_problems
from tests.corpus.conftest import CorpusWorld

DATA_ERROR = 3


@pytest.fixture(scope="module")
def corpus(corpus_world: CorpusWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("split-readers") / "corpus"
    build_corpus(out, store=corpus_world.store_url, catalog=corpus_world.catalog,
                 problems=corpus_world.problems_file)
    return out


def _copy(corpus: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "corpus"
    shutil.copytree(corpus, dst)
    return dst


def _move_train_into_eval(corpus: Path, *, reseal: bool) -> None:
    """The edit that turns train problems into eval ones: every train cluster reassigned to ``eval`` in
    ``split.json`` (``reseal``: the split's own hashes recomputed, as a careful editor would)."""
    path = corpus / "split.json"
    body = json.loads(path.read_text(encoding="utf-8"))
    train, held = body["partitions"]["train"], body["partitions"]["eval"]
    for cid in train["clusters"]:
        body["partition_of"][cid] = "eval"
    held["problems"] = sorted(held["problems"] + train["problems"])
    held["clusters"] = sorted(held["clusters"] + train["clusters"])
    train["problems"], train["clusters"] = [], []
    if reseal:
        from shoparena.seal import canonical_hash

        for info in body["partitions"].values():
            info["problems_hash"] = canonical_hash(info["problems"])
            info["clusters_hash"] = canonical_hash(info["clusters"])
        body["manifest_hash"] = canonical_hash({k: v for k, v in body.items() if k != "manifest_hash"})
    path.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")


def _evaluate(corpus: Path, world: CorpusWorld, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SHOPARENA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "shoparena", "evaluate", "--split", f"{corpus}:eval", "--catalog",
                           str(world.catalog), "--model", "policy:careful", "-n", "1", "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)


def test_an_intact_split_gives_its_eval_problems(corpus: Path) -> None:
    split = SplitManifest.load(corpus / "split.json")
    got = partition_problems(corpus, "eval")
    assert [p.problem_id for p in got] == split.partitions["eval"].problems


@pytest.mark.parametrize("reseal", [False, True], ids=["edited", "edited-and-resealed"])
def test_evaluate_refuses_an_edited_split(corpus: Path, corpus_world: CorpusWorld, tmp_path: Path,
                                          reseal: bool) -> None:
    edited = _copy(corpus, tmp_path)
    _move_train_into_eval(edited, reseal=reseal)
    out = tmp_path / "eval"
    result = _evaluate(edited, corpus_world, out)
    assert result.returncode == DATA_ERROR, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hint:" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not out.exists()


def test_evaluate_refuses_a_bank_that_is_not_the_splits(corpus: Path, corpus_world: CorpusWorld,
                                                        tmp_path: Path) -> None:
    """A --problems bank lacking some of the partition's problems would evaluate a smaller, different set."""
    held = set(SplitManifest.load(corpus / "split.json").partitions["eval"].problems)
    lines = corpus_world.problems_file.read_text(encoding="utf-8").splitlines()
    dropped = next(i for i, line in enumerate(lines) if json.loads(line)["problem_id"] in held)
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join(lines[:dropped] + lines[dropped + 1:]) + "\n", encoding="utf-8")
    result = _evaluate(corpus, corpus_world, tmp_path / "eval", "--problems", str(partial))
    assert result.returncode == DATA_ERROR and "lacks 1 of the" in result.stderr, result.stderr
    assert "hint:" in result.stderr and not (tmp_path / "eval").exists()


def test_the_web_flags_a_corpus_that_fails_verification(corpus: Path, corpus_world: CorpusWorld,
                                                        tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from shoparena.web import Site, create_app

    edited = _copy(corpus, tmp_path)
    for directory, verified in ((corpus, True), (edited, False)):
        if not verified:
            _move_train_into_eval(edited, reseal=False)
        site = Site(corpus_world.store_url, corpus=directory)
        try:
            with TestClient(create_app(site)) as client:
                body = client.get("/api/corpus").json()["corpus"]
                page = client.get("/corpus").text
        finally:
            site.close()
        assert body["verified"] is verified and bool(body["verification"]) is not verified, body
        assert ('id="corpus-unverified"' in page) is not verified
        if not verified:
            assert "split.json" in " ".join(body["verification"]) and "fails verification" in page
