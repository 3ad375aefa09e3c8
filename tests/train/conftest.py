"""Shared fixtures of the training tests, built once per session: the tiny Qwen3 and its tokenizer, and a small
real corpus (the seeded world of :mod:`shoparena.corpus.testing` through ``build_corpus``) with its catalog."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")
torch.set_num_threads(1)


@dataclass(frozen=True)
class TrainWorld:
    corpus: Path
    catalog: Path
    problems: list[Any]
    sft_rows: list[dict[str, Any]]
    eval_rows: list[dict[str, Any]]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shoparena.llm.tiny import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)


@pytest.fixture(scope="session")
def train_world(tmp_path_factory: pytest.TempPathFactory) -> TrainWorld:
    from shoparena.corpus.build import build_corpus
    from shoparena.corpus.export.common import read_jsonl_rows
    from shoparena.corpus.testing import seed_world

    root = tmp_path_factory.mktemp("train-world")
    world = seed_world(root)
    build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog, problems=world.problems_file)
    return TrainWorld(corpus=root / "corpus", catalog=world.catalog, problems=world.problems,
                      sft_rows=read_jsonl_rows(root / "corpus" / "sft_train.jsonl"),
                      eval_rows=read_jsonl_rows(root / "corpus" / "sft_eval.jsonl"))
