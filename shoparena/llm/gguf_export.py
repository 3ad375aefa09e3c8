"""A transformers llama checkpoint written as a llama.cpp GGUF, so a trained model can be served by a CPU engine.

:func:`write_llama_gguf` is the one writer (the tiny test GGUF of :mod:`shoparena.llm.tiny_gguf` uses it too): the
hyper-parameters, a byte-level BPE vocabulary (``tokenizer.ggml.model = gpt2``), and the weights under llama.cpp's
names (``blk.N.attn_q`` …, Q/K rows permuted into its rotary layout, tied embeddings without ``output.weight``).
:func:`export_gguf` reads a checkpoint directory (``config.json`` + safetensors + ``tokenizer.json``, as
``shoparena models prepare`` and every training stage write them) and writes its GGUF once into the user's
GGUF cache (:func:`gguf_cache_dir`), named by a hash of what the GGUF is made from (weights, ``config.json``, the
tokenizer files, the dtype): serving a checkpoint never writes into it, so a training run, a prepared model or a
read-only copy stays exactly as its maker left it. A cached file is checked against the sha256 recorded beside it
each time it is reused, and made again when it does not match. Weights are written as F32, F16 or Q8_0; norms stay
F32. Same checkpoint and dtype → same bytes.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.seal import canonical_hash, sha256_file, weights_sha256

__all__ = ["CACHE_ENV", "DTYPES", "bpe_vocab", "export_gguf", "gguf_cache_dir", "made_from", "permute_qk",
           "write_llama_gguf"]

DTYPES = ("F32", "F16", "Q8_0")
CACHE_ENV = "SHOPARENA_CACHE_DIR"
_STAMP = "shoparena.checkpoint_sha256"
#: Files besides the weights whose bytes a GGUF is made from (the name of the cache entry hashes them).
_SOURCES = ("config.json", "tokenizer.json", "tokenizer_config.json")
#: Bumped when the writer's output for the same checkpoint changes, so an old cache entry is not reused.
_WRITER_VERSION = 1


def permute_qk(w: Any, n_head: int) -> Any:
    """llama.cpp's ``LlamaModel.permute``: HF rotary halves → interleaved pairs (transformers undoes it)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _import_gguf() -> tuple[Any, Any, Any]:
    try:
        import gguf
        import numpy as np
        import torch
    except ImportError as exc:
        raise ConfigError(f"writing a GGUF needs torch and gguf ({exc.name} is missing)",
                          hint="pip install 'shoparena[train]'") from exc
    return gguf, np, torch


def write_llama_gguf(path: str | os.PathLike[str], config: Any, state: Mapping[str, Any], *, tokens: Sequence[str],
                     merges: Sequence[str], special: Sequence[str], bos: int, eos: int, pad: int, unk: int,
                     chat_template: str | None = None, pre: str = "default", dtype: str = "F32",
                     name: str = "shoparena", extra: Mapping[str, str] | None = None) -> Path:
    """Write a llama GGUF from a ``LlamaConfig``-like ``config`` and a transformers ``state`` dict. ``dtype`` is a
    ``gguf.GGMLQuantizationType`` name for the 2-D weights; ``extra``: string metadata added as is."""
    gguf, np, torch = _import_gguf()
    qtype = getattr(gguf.GGMLQuantizationType, dtype, None)
    if qtype is None:
        raise ConfigError(f"unknown GGUF type {dtype!r}", hint=f"one of {', '.join(DTYPES)}, Q4_1")
    heads, kv_heads = int(config.num_attention_heads), int(config.num_key_value_heads)
    hidden, layers = int(config.hidden_size), int(config.num_hidden_layers)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    rope = getattr(config, "rope_parameters", None) or {}
    theta = float(rope.get("rope_theta") or getattr(config, "rope_theta", None) or 10000.0)
    if rope.get("rope_type", "default") != "default":
        raise DataError(f"rope scaling {rope.get('rope_type')!r} is not exported")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(name)
    writer.add_context_length(int(config.max_position_embeddings))
    writer.add_block_count(layers)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(int(config.intermediate_size))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(int(qtype))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(list(tokens))
    specials = set(special)
    writer.add_token_types([3 if t in specials else 1 for t in tokens])
    writer.add_token_merges(list(merges))
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_unk_token_id(unk)
    writer.add_pad_token_id(pad)
    writer.add_add_bos_token(False)
    if chat_template:
        writer.add_chat_template(chat_template)
    for key, value in sorted((extra or {}).items()):
        writer.add_string(key, value)

    def tensor(name: str, w: Any, quantise: bool = True) -> None:
        arr = w.detach().to(torch.float32).numpy()
        if not quantise or qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, np.ascontiguousarray(arr))
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, np.ascontiguousarray(arr.astype(np.float16)))
        else:
            writer.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)

    tensor("token_embd.weight", state["model.embed_tokens.weight"])
    for i in range(layers):
        p = f"model.layers.{i}."
        tensor(f"blk.{i}.attn_norm.weight", state[p + "input_layernorm.weight"], quantise=False)
        tensor(f"blk.{i}.attn_q.weight", permute_qk(state[p + "self_attn.q_proj.weight"], heads))
        tensor(f"blk.{i}.attn_k.weight", permute_qk(state[p + "self_attn.k_proj.weight"], kv_heads))
        tensor(f"blk.{i}.attn_v.weight", state[p + "self_attn.v_proj.weight"])
        tensor(f"blk.{i}.attn_output.weight", state[p + "self_attn.o_proj.weight"])
        tensor(f"blk.{i}.ffn_norm.weight", state[p + "post_attention_layernorm.weight"], quantise=False)
        tensor(f"blk.{i}.ffn_gate.weight", state[p + "mlp.gate_proj.weight"])
        tensor(f"blk.{i}.ffn_up.weight", state[p + "mlp.up_proj.weight"])
        tensor(f"blk.{i}.ffn_down.weight", state[p + "mlp.down_proj.weight"])
    tensor("output_norm.weight", state["model.norm.weight"], quantise=False)
    if not getattr(config, "tie_word_embeddings", False):
        tensor("output.weight", state["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def bpe_vocab(tokenizer_json: Path) -> tuple[list[str], list[str], list[str], str]:
    """Tokens by id, merges, special tokens and llama.cpp's pre-tokenizer name from a fast ``tokenizer.json``."""
    body = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    model = body.get("model") or {}
    if model.get("type") != "BPE":
        raise DataError(f"{tokenizer_json}: a {model.get('type')!r} tokenizer; only byte-level BPE is exported")
    vocab: dict[str, int] = dict(model["vocab"])
    special = []
    for added in body.get("added_tokens") or []:
        vocab.setdefault(added["content"], added["id"])
        if added.get("special"):
            special.append(added["content"])
    size = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    for tok, i in vocab.items():
        tokens[i] = tok
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    pre = "smollm" if '"Digits"' in json.dumps(body.get("pre_tokenizer")) else "default"
    return tokens, merges, special, pre


def read_tokenizer_config(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's ``tokenizer_config.json`` (``{}`` when it has none)."""
    path = Path(model_dir) / "tokenizer_config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def special_token_ids(config: Any, tokenizer_config: Mapping[str, Any], ids: Mapping[str, int],
                      rows: int | None = None) -> dict[str, int]:
    """``bos`` / ``eos`` / ``pad`` / ``unk`` ids a GGUF records: the token ``tokenizer_config.json`` names when it is
    in the vocabulary, else the id ``config.json`` gives (inside the embedding's ``rows`` when given), else eos for
    pad and 0 otherwise. One rule for every GGUF written from a checkpoint, whole or mid-training."""

    def valid(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0 and (rows is None or value < rows)

    def pick(key: str, fallback_id: Any, default: int) -> int:
        value = tokenizer_config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str) and value in ids and valid(ids[value]):
            return ids[value]
        return int(fallback_id) if valid(fallback_id) else default

    eos_id = config.eos_token_id[0] if isinstance(config.eos_token_id, list) else config.eos_token_id
    eos = pick("eos_token", eos_id, 0)
    return {"bos": pick("bos_token", config.bos_token_id, 0), "eos": eos,
            "pad": pick("pad_token", getattr(config, "pad_token_id", None), eos), "unk": pick("unk_token", None, 0)}


def gguf_cache_dir() -> Path:
    """Where exported GGUFs are kept: ``$SHOPARENA_CACHE_DIR/gguf``, else ``$XDG_CACHE_HOME/shoparena/gguf``, else
    ``~/.cache/shoparena/gguf``. Every file in it can be deleted at any time; the next use exports it again."""
    root = os.environ.get(CACHE_ENV) or ""
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or ""
        root = str(Path(xdg) / "shoparena") if xdg else str(Path("~/.cache/shoparena").expanduser())
    return Path(root).expanduser() / "gguf"


def _source_key(src: Path, digest: str, dtype: str) -> str:
    """sha256 naming a cache entry: the weights' hash, the bytes of :data:`_SOURCES`, the dtype, the writer."""
    files = {name: sha256_file(src / name) if (src / name).is_file() else None for name in _SOURCES}
    return canonical_hash({"weights": digest, "files": files, "dtype": dtype, "writer": _WRITER_VERSION})


def _cached_intact(path: Path, digest: str) -> bool:
    """Whether a cache entry is whole: its sha256 is the one recorded beside it, and its stamp names the weights."""
    check = path.with_name(path.name + ".sha256")
    try:
        recorded = check.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return path.is_file() and recorded == sha256_file(path) and _stamp(path) == digest


def export_gguf(model_dir: str | os.PathLike[str], *, dtype: str = "F16", out: str | os.PathLike[str] | None = None,
                force: bool = False) -> Path:
    """``model_dir`` (a transformers ``LlamaForCausalLM`` checkpoint) as a GGUF, written once and reused after.
    Returns its path: ``out`` when given (reused when its stamp names these weights), else an entry of
    :func:`gguf_cache_dir` named by what the GGUF is made from. Nothing is written into ``model_dir``."""
    src = Path(model_dir)
    if dtype not in DTYPES:
        raise ConfigError(f"unknown GGUF dtype {dtype!r}", hint=f"one of {', '.join(DTYPES)}")
    if not src.is_dir():
        raise NotFoundError(f"no checkpoint directory at {src}",
                            hint="give a directory from shoparena models prepare, or a training stage's model/")
    if not (src / "config.json").is_file() or not (src / "tokenizer.json").is_file():
        raise DataError(f"{src}: not a transformers checkpoint with a fast tokenizer (config.json, tokenizer.json)")
    digest = weights_sha256(src)
    if digest is None:
        raise DataError(f"{src}: no weight files (*.safetensors)")
    cached = out is None
    if cached:
        cache = gguf_cache_dir()
        dest = cache / f"{_source_key(src, digest, dtype)[:32]}.{dtype.lower()}.gguf"
        if not force and _cached_intact(dest, digest):
            return dest
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the GGUF cache {cache}: {exc.strerror or exc}",
                              hint=f"set {CACHE_ENV} to a writable directory") from None
        if not os.access(cache, os.W_OK):
            raise ConfigError(f"the GGUF cache {cache} is not writable",
                              hint=f"set {CACHE_ENV} to a writable directory")
    else:
        dest = Path(out)  # type: ignore[arg-type]
        if dest.is_file() and not force and _stamp(dest) == digest:
            return dest
    _import_gguf()
    import transformers

    config = transformers.AutoConfig.from_pretrained(src, local_files_only=True)
    if config.model_type != "llama":
        raise DataError(f"{src}: a {config.model_type!r} model; only llama checkpoints are exported to GGUF")
    from safetensors.torch import load_file

    state: dict[str, Any] = {}
    for f in sorted(src.glob("*.safetensors")):
        state.update(load_file(f))
    if not state:
        raise DataError(f"{src}: no safetensors weights")
    tokens, merges, special, pre = bpe_vocab(src / "tokenizer.json")
    special_ids = special_token_ids(config, read_tokenizer_config(src), {t: i for i, t in enumerate(tokens)})
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write_llama_gguf(tmp, config, state, tokens=tokens, merges=merges, special=special, **special_ids,
                         pre=pre, dtype=dtype, name=dest.name.split(".")[0] if cached else src.name,
                         extra={_STAMP: digest})
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        if cached:  # the check first: a reader that finds the GGUF finds its sha256 too
            check = dest.with_name(dest.name + ".sha256")
            check_tmp = check.with_name(f".{check.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            check_tmp.write_text(sha256_file(tmp) + "\n", encoding="ascii")
            os.replace(check_tmp, check)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def is_derived_gguf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a GGUF :func:`export_gguf` wrote from the weights that sit beside it now (its stamp is
    their hash): a cache of those weights, made again on demand, which an artefact's digest can leave out. Earlier
    versions wrote the serving GGUF into the checkpoint directory; run directories made then still hold one, and
    their digests stay what the run vouched for. A foreign GGUF (a downloaded one) is not derived."""
    file = Path(path)
    return file.suffix == ".gguf" and made_from(file, file.parent)


def made_from(path: str | os.PathLike[str], model_dir: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a GGUF :func:`export_gguf` wrote from the weights now in ``model_dir``."""
    file = Path(path)
    if not file.is_file() or not Path(model_dir).is_dir():
        return False
    weights = weights_sha256(model_dir)
    return weights is not None and _stamp(file) == weights


def _stamp(path: Path) -> str | None:
    """The checkpoint hash a GGUF we wrote records (``None`` for a foreign or unreadable file)."""
    try:
        import gguf

        field = gguf.GGUFReader(str(path)).fields.get(_STAMP)
        return bytes(field.parts[field.data[0]]).decode() if field is not None else None
    except Exception:
        return None
