"""The ``llamacpp:`` backend and the GGUF export, on a tiny prepared SmolLM2-shaped checkpoint: the exported GGUF
reproduces the checkpoint's logits in llama.cpp, and the backend renders, samples and parses like ``hf:``.

Needs ``llama-cpp-python`` (``make llamacpp`` builds it from source); skipped where it is not installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("torch")

import torch

from shoparena.errors import ConfigError, NotFoundError
from shoparena.llm.gguf_export import export_gguf
from shoparena.seal import sha256_file
from tests.sharp import SetAfter


def test_export_is_written_once_and_keyed_by_the_weights(prepared: Path, tmp_path: Path) -> None:
    a = export_gguf(prepared, dtype="F32", out=tmp_path / "a.gguf")
    stamp = a.stat().st_mtime_ns
    assert export_gguf(prepared, dtype="F32", out=tmp_path / "a.gguf").stat().st_mtime_ns == stamp  # reused
    b = export_gguf(prepared, dtype="F32", out=tmp_path / "b.gguf")
    assert a.read_bytes() == b.read_bytes()  # same checkpoint → same bytes
    with pytest.raises(ConfigError):
        export_gguf(prepared, dtype="Q3_K")


def test_export_refuses_what_is_not_a_llama_checkpoint(tmp_path: Path) -> None:
    from shoparena.errors import DataError

    with pytest.raises(DataError):
        export_gguf(tmp_path)


def test_exported_gguf_reads_back_into_transformers_with_the_same_logits(prepared: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    path = export_gguf(prepared, dtype="F32", out=tmp_path / "f32.gguf")
    src = AutoModelForCausalLM.from_pretrained(prepared, local_files_only=True).eval()
    back = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.tensor([[1, 40, 41, 42, 43, 2, 50, 60]])
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, src(ids).logits, atol=1e-5)


def test_llama_cpp_reproduces_the_checkpoint_logits(prepared: Path, tmp_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    import numpy as np
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = export_gguf(prepared, dtype="F32", out=tmp_path / "f32.gguf")
    tok = AutoTokenizer.from_pretrained(prepared, local_files_only=True)
    ids = tok("<|im_start|>user\nfind a red dress under 700<|im_end|>\n<|im_start|>assistant\n",
              add_special_tokens=False)["input_ids"]
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, logits_all=True, verbose=False)
    llm.eval(ids)
    got = np.asarray(llm.scores[: len(ids)])
    llm.close()
    src = AutoModelForCausalLM.from_pretrained(prepared, local_files_only=True).eval()
    with torch.no_grad():
        want = src(torch.tensor([ids])).logits[0].numpy()
    assert got.std() > 0
    assert np.abs(got - want).max() < 1e-3
    assert (got.argmax(-1) == want.argmax(-1)).all()


@pytest.mark.parametrize("mode", ["slots", "batched"])
def test_backend_matches_hf_greedy_and_is_seeded(prepared: Path, mode: str) -> None:
    pytest.importorskip("llama_cpp")
    from shoparena.llm.hf_backend import HFBackend
    from shoparena.llm.llamacpp_backend import LlamaCppBackend
    from shoparena.llm.types import Sampling

    messages = [{"role": "user", "content": "find a red dress under 700"}]
    hf = HFBackend(prepared)
    sizes = {"slots": 2} if mode == "slots" else {"parallel": 2}
    lc = LlamaCppBackend(prepared, mode=mode, dtype="F32", threads=1, **sizes)
    try:
        greedy = Sampling(temperature=0.0, max_tokens=12)
        text_hf, n_hf, m_hf = hf.generate(messages, None, greedy)
        text_lc, n_lc, m_lc = lc.generate(messages, None, greedy)
        assert n_lc == n_hf  # the same rendered prompt, token for token
        assert (text_lc, m_lc) == (text_hf, m_hf)
        hot = Sampling(temperature=1.0, max_tokens=12, seed=7)
        first = lc.generate(messages, None, hot)
        assert lc.generate(messages, None, hot) == first  # seeded: same prompt + seed → same text
        assert any(lc.generate(messages, None, Sampling(temperature=1.0, max_tokens=12, seed=s))[0] != first[0]
                   for s in (8, 9, 10))
    finally:
        lc.close()


def test_uri_options_are_checked(prepared: Path) -> None:
    from shoparena.llm.llamacpp_backend import parse_llamacpp_uri
    from shoparena.llm.types import get_backend

    assert parse_llamacpp_uri(f"{prepared}?dtype=F32&slots=2") == (prepared, {"dtype": "F32", "slots": 2})
    assert parse_llamacpp_uri(f"{prepared}?mode=batched&parallel=8") == (prepared, {"mode": "batched", "parallel": 8})
    with pytest.raises(ConfigError, match="unknown mode"):
        parse_llamacpp_uri(f"{prepared}?mode=fast")
    pytest.importorskip("llama_cpp")
    for uri, mode in ((f"llamacpp:{prepared}?dtype=F32&threads=1", "batched"),
                      (f"llamacpp:{prepared}?dtype=F32&slots=1&threads=1", "slots")):
        backend = get_backend(uri)
        try:
            assert backend.mode == mode  # batched by default; a URI naming slots keeps the slots path
        finally:
            backend.close()
    with pytest.raises(ConfigError, match="option of mode=slots"):
        get_backend(f"llamacpp:{prepared}?mode=batched&slots=2")
    with pytest.raises(ConfigError, match="options of mode=batched"):
        get_backend(f"llamacpp:{prepared}?mode=slots&parallel=4")
    with pytest.raises(ConfigError, match="unknown option"):
        parse_llamacpp_uri(f"{prepared}?gpu=1")
    with pytest.raises(ConfigError, match="not a valid int"):
        parse_llamacpp_uri(f"{prepared}?slots=two")
    with pytest.raises(NotFoundError):
        get_backend("llamacpp:/nonexistent/model")


def test_compaction_recorded_with_the_checkpoint_is_applied(prepared: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    import shutil

    from shoparena.llm.compact import FORMAT_FILE
    from shoparena.llm.llamacpp_backend import LlamaCppBackend

    model = tmp_path / "compact"
    shutil.copytree(prepared, model)
    (model / FORMAT_FILE).write_text(json.dumps({"compact": {"max_items": 1, "max_chars": 64}}))
    lc = LlamaCppBackend(model, dtype="F32", slots=1, threads=1)
    try:
        long = json.dumps([{"product_id": str(i), "title": "x" * 50} for i in range(5)])
        prompt = lc.render([{"role": "user", "content": "q"}, {"role": "tool", "content": long}])
        assert long not in prompt and '"product_id": "0"' in prompt and '"product_id": "1"' not in prompt
    finally:
        lc.close()


def test_an_abandoned_request_stops_generating_and_frees_its_slot(prepared: Path) -> None:
    """llm/abandon.py: a request whose run closed while it waited for a slot never generates; one whose run closes
    part-way stops at the next token and raises; the slot is free for the next request either way."""
    pytest.importorskip("llama_cpp")
    from shoparena.llm.abandon import Abandoned, abandon_when
    from shoparena.llm.llamacpp_backend import LlamaCppBackend
    from shoparena.llm.types import Sampling

    messages = [{"role": "user", "content": "find a red dress under 700"}]
    greedy = Sampling(temperature=0.0, max_tokens=20)
    lc = LlamaCppBackend(prepared, mode="slots", dtype="F32", slots=1, threads=1)
    try:
        control = lc.generate(messages, None, greedy)
        assert control[2] > 5  # the control runs past where the run closes below
        waited = SetAfter(1)
        with abandon_when(waited), pytest.raises(Abandoned):  # type: ignore[arg-type]
            lc.generate(messages, None, greedy)
        assert waited.looks == 1  # checked once, after taking the slot, and never generated
        midway = SetAfter(4)
        with abandon_when(midway), pytest.raises(Abandoned):  # type: ignore[arg-type]
            lc.generate(messages, None, greedy)
        assert midway.looks == 5  # the slot check, two tokens, the stop at the third, the final check
        assert lc.generate(messages, None, greedy) == control  # one slot: it was released both times
    finally:
        lc.close()


def test_special_token_ids_follow_the_tokenizer_config_then_the_model_config() -> None:
    from types import SimpleNamespace

    from shoparena.llm.gguf_export import special_token_ids

    ids = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "a": 3}
    config = SimpleNamespace(bos_token_id=1, eos_token_id=[2, 0], pad_token_id=None)
    # names in tokenizer_config.json win; the model config fills the rest; pad falls back to eos
    got = special_token_ids(config, {"eos_token": {"content": "<|im_end|>"}, "bos_token": "<|endoftext|>"}, ids)
    assert got == {"bos": 0, "eos": 2, "pad": 2, "unk": 0}
    assert special_token_ids(config, {}, ids) == {"bos": 1, "eos": 2, "pad": 2, "unk": 0}
    # an id outside the embedding (a mid-training policy's rows) or a name not in the vocabulary is not used
    assert special_token_ids(SimpleNamespace(bos_token_id=9, eos_token_id=2, pad_token_id=9), {"pad_token": "zz"},
                             ids, rows=4) == {"bos": 0, "eos": 2, "pad": 2, "unk": 0}


def test_serving_a_checkpoint_writes_nothing_into_it(prepared: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from shoparena.seal import file_hashes

    monkeypatch.setenv("SHOPARENA_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    shutil.copytree(prepared, model)
    before = file_hashes(model)
    model.chmod(0o555)  # a read-only copy serves as well as a writable one
    try:
        served = export_gguf(model, dtype="F32")
    finally:
        model.chmod(0o755)
    assert file_hashes(model) == before
    assert served.parent == tmp_path / "cache" / "gguf"
    check = served.with_name(served.name + ".sha256")
    assert check.read_text().strip() == sha256_file(served)
    stamp = served.stat().st_mtime_ns
    assert export_gguf(model, dtype="F32").stat().st_mtime_ns == stamp  # reused, not written again
    moved = tmp_path / "elsewhere"  # a copy of the same files is the same entry
    shutil.copytree(model, moved)
    assert export_gguf(moved, dtype="F32") == served
    assert export_gguf(model, dtype="Q8_0") != served  # each dtype its own entry


def test_a_damaged_cache_entry_is_made_again(prepared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOPARENA_CACHE_DIR", str(tmp_path / "cache"))
    served = export_gguf(prepared, dtype="F32")
    good = served.read_bytes()
    served.write_bytes(good[:-64])  # a truncated copy (a full disk, a killed copy)
    assert export_gguf(prepared, dtype="F32").read_bytes() == good
    served.with_name(served.name + ".sha256").unlink()  # an entry without its check is not trusted either
    stamp = served.stat().st_mtime_ns
    again = export_gguf(prepared, dtype="F32")
    assert again.read_bytes() == good and again.stat().st_mtime_ns != stamp


def test_new_weights_or_tokenizer_get_their_own_entry(prepared: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOPARENA_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    shutil.copytree(prepared, model)
    first = export_gguf(model, dtype="F32")
    body = json.loads((model / "tokenizer_config.json").read_text())
    body["model_max_length"] = 1234
    (model / "tokenizer_config.json").write_text(json.dumps(body))
    second = export_gguf(model, dtype="F32")
    assert second != first
    weights = next(model.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")
    assert export_gguf(model, dtype="F32") not in (first, second)


def test_an_unwritable_cache_is_a_config_error_naming_the_setting(prepared: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SHOPARENA_CACHE_DIR", str(blocker))
    with pytest.raises(ConfigError) as info:
        export_gguf(prepared, dtype="F32")
    assert "SHOPARENA_CACHE_DIR" in (info.value.hint or "")


def test_the_cache_defaults_under_xdg_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from shoparena.llm.gguf_export import gguf_cache_dir

    monkeypatch.delenv("SHOPARENA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gguf_cache_dir() == tmp_path / "xdg" / "shoparena" / "gguf"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert gguf_cache_dir() == tmp_path / "home" / ".cache" / "shoparena" / "gguf"


def test_a_gguf_an_earlier_version_left_beside_its_weights_is_a_cache_a_run_digest_leaves_out(
        prepared: Path, tmp_path: Path) -> None:
    from shoparena.evaluate.reproduce.pipeline import _digest
    from shoparena.llm.gguf_export import is_derived_gguf

    model = tmp_path / "model"
    shutil.copytree(prepared, model)
    before = _digest(model)
    served = export_gguf(model, dtype="F32", out=model / "model.f32.gguf")  # where earlier versions wrote it
    assert is_derived_gguf(served)
    assert _digest(model) == before  # a run made then still digests as it vouched
    (model / "other.gguf").write_bytes(b"GGUF not ours")  # a foreign GGUF is content, and counted
    assert not is_derived_gguf(model / "other.gguf") and _digest(model) != before
    (model / "other.gguf").unlink()
    weights = next(model.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")  # new weights: the old export no longer derives
    assert not is_derived_gguf(served) and _digest(model) != before
