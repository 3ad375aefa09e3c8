"""Fixtures for the llm tests: a tiny Qwen3 built once per session, and the ``hf:`` backend over it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tiny Qwen3 (random weights, locally trained tokenizer) written once per session."""
    pytest.importorskip("transformers")
    from shoparena.llm.tiny import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3") / "tiny-qwen3")


@pytest.fixture(scope="session")
def hf_backend(tiny_qwen3: Path):  # -> HFBackend
    from shoparena.llm.hf_backend import HFBackend

    return HFBackend(tiny_qwen3, device="cpu", max_new_tokens=32)
