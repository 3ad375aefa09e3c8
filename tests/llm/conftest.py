"""Fixtures for the llm tests: a tiny Qwen3 built once per session, the ``hf:`` backend over it, and a tiny
prepared SmolLM2-shaped checkpoint for the ``llamacpp:`` backend."""

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


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny SmolLM2-shaped checkpoint prepared as ``shoparena models prepare`` does (F32 GGUF, two layers)."""
    pytest.importorskip("gguf")
    torch = pytest.importorskip("torch")
    from shoparena.llm.models import prepare_gguf, spec_with_path
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf

    torch.set_num_threads(1)
    gguf, _ = build_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", quant="F32", layers=2)
    out = tmp_path_factory.mktemp("prep") / "smol"
    prepare_gguf(spec_with_path("smollm2-135m", gguf), out)
    return out
