"""Stage 5's turns sampled through llama.cpp's batched engine on a CPU (``grpo.sampler: llamacpp``).

Once per rollout call (once per optimiser step) :meth:`LlamaCppSampler.start` writes the **current** policy as a
GGUF: the training model's weights with the LoRA adapter merged functionally (``W + ΔW`` computed beside the
module, the training model's own weights never touched, so nothing is merged and unmerged in place), written over
the previous step's file in the sampler's work directory, and starts a
:class:`~shoparena.llm.llamacpp_batch.BatchEngine` on it with one sequence per episode. Every episode then plays its
own turn loop in its own thread (:func:`~shoparena.train.rollout.run_token_episodes`); their turns are batched
continuously by the engine, the shared prompt prefix is evaluated once, and an episode's next turn continues its
own KV cache. :meth:`LlamaCppSampler.stop` closes the engine, so training gets the memory back; :meth:`close`
removes the work directory.

This is the usual "separate inference engine" setup (TRL + vLLM does the same): turns are sampled from an exported
copy of the policy, while GRPO's log-probabilities of the sampled tokens are computed by the training model itself
(TRL recomputes them from ``prompt_ids`` / ``completion_ids``; the rollout returns ``logprobs: None``). The copy is
F16 by default, so it is close to the policy: a weight update smaller than half an F16 step of a weight (about 5e-4
relative) does not show in the copy until it accumulates; ``F32`` makes the copy exact at about half the decode
speed, ``Q8_0`` is faster and coarser.

Sampling matches transformers' ``generate`` as the hf path uses it: top-k (the checkpoint's ``generation_config``
``top_k``, else 50), top-p, temperature, then a draw; greedy at temperature 0. Each turn's draw is seeded from
``(seed, step, episode index, turn)`` (:func:`turn_seed`), so a run repeats its rollouts; batches are composed by
arrival, and llama.cpp may sum a sequence's logits in another order in another batch, so a draw that falls within
float rounding of a boundary between two tokens can differ between two runs (greedy turns likewise on near-ties).
Over a rollout's thousand-odd draws such a boundary is met often enough that two runs of the same seed train other
weights (docs/results.md §10). ``mode="slots"`` gives every episode an engine of its own (one sequence, one
thread by default, the GGUF file shared through the page cache): an episode's batches then hold only its own tokens,
so its text depends on its seed alone and a run repeats its rollouts byte for byte, at the cost of the shared prefix
and of batching (the ``llamacpp:`` backend's ``slots`` and ``batched`` modes make the same trade).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from shoparena.errors import ConfigError
from shoparena.llm.llamacpp_backend import MODES

__all__ = ["LlamaCppSampler", "merged_state_dict", "require_llamacpp", "turn_seed"]


def require_llamacpp(model_dir: str | Path | None = None) -> None:
    """Refuse the llama.cpp sampler up front where it cannot run: ``llama_cpp`` not importable, or a checkpoint that
    is not a llama model (the only architecture the GGUF writer writes)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"grpo.sampler llamacpp needs llama-cpp-python ({exc})",
                          hint="build it with `make llamacpp`, or set grpo.sampler: hf") from None
    if model_dir is None:
        return
    import json

    config = Path(model_dir) / "config.json"
    model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type") if config.is_file() else None
    if model_type != "llama":
        raise ConfigError(f"grpo.sampler llamacpp exports the policy as a llama GGUF; {model_dir} is a "
                          f"{model_type!r} model", hint="set grpo.sampler: hf for this checkpoint")
    if not (Path(model_dir) / "tokenizer.json").is_file():
        raise ConfigError(f"grpo.sampler llamacpp needs the checkpoint's tokenizer.json ({model_dir} has none)",
                          hint="set grpo.sampler: hf for this checkpoint")


def turn_seed(seed: int, step: int, episode: int, turn: int) -> int:
    """A 32-bit draw seed for one turn of one episode of one step (stable across runs and platforms)."""
    digest = hashlib.sha256(f"grpo-turn:{seed}:{step}:{episode}:{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def merged_state_dict(model: Any) -> dict[str, Any]:
    """The transformers state dict of ``model`` with its active LoRA adapters merged (``W + ΔW`` per adapted layer,
    in float32), under the base model's own names; ``model`` may be a peft model or a plain one. Nothing in
    ``model`` is changed."""
    import torch

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    lora_types: tuple[type, ...] = ()
    try:
        from peft.tuners.lora import LoraLayer

        lora_types = (LoraLayer,)
    except ImportError:  # no peft: no adapter to merge
        pass
    state: dict[str, Any] = {}
    with torch.no_grad():
        for key, value in inner.state_dict().items():
            if ".lora_" in key:
                continue
            state[key.replace(".base_layer.", ".")] = value
        for name, module in inner.named_modules():
            if not isinstance(module, lora_types) or module.merged or module.disable_adapters:
                continue
            weight = module.get_base_layer().weight
            merged = weight.detach().to(torch.float32).clone()
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    merged += module.get_delta_weight(adapter).to(torch.float32)
            state[f"{name}.weight"] = merged
    return state


class LlamaCppSampler:
    """A :class:`~shoparena.train.rollout.TurnSampler` through a llama.cpp :class:`BatchEngine` (module docstring).

    ``model_dir``: the checkpoint the policy was loaded from (its ``tokenizer.json`` gives the GGUF's vocabulary);
    ``work_dir``: where the per-step GGUF is written (removed by :meth:`close`); ``dtype``: F32, F16 or Q8_0;
    ``threads``: llama.cpp's decode threads (default: torch's; ``slots``: per engine, default 1); ``mode``: one of
    the ``llamacpp:`` backend's modes (``batched``: one engine for every episode, ``slots``: an engine each). Set
    :attr:`step` before each rollout: it is part of every draw's seed."""

    def __init__(self, model_dir: str | Path, work_dir: str | Path, *, dtype: str = "F16", seed: int = 0,
                 threads: int | None = None, n_batch: int = 512, mode: str = "batched") -> None:
        from shoparena.llm.gguf_export import DTYPES, bpe_vocab, read_tokenizer_config

        if dtype not in DTYPES:
            raise ConfigError(f"unknown GGUF dtype {dtype!r}", hint=f"one of {', '.join(DTYPES)}")
        if mode not in MODES:
            raise ConfigError(f"unknown sampler mode {mode!r}", hint=f"one of {', '.join(MODES)}")
        require_llamacpp(model_dir)
        self.model_dir, self.work_dir = Path(model_dir), Path(work_dir)
        self.dtype, self.seed, self.n_batch = dtype, int(seed), int(n_batch)
        self.threads, self.mode = threads, mode
        self.step = 0
        self.tokens, self.merges, self.special, self.pre = bpe_vocab(self.model_dir / "tokenizer.json")
        self.tokenizer_config = read_tokenizer_config(self.model_dir)  # its special tokens, for every export
        self.top_k = 50
        self.engines: list[Any] = []
        """The running engines: one (``batched``) or one per episode (``slots``); none between rollouts."""
        self.gguf: Path | None = None
        self.exports = 0
        self.policy_sha256: str | None = None
        """Of the last GGUF written: which weights the last rollout sampled from."""
        self.stats: list[dict[str, Any]] = []
        """Per rollout: ``step``, ``export_s``, ``policy_sha256``, ``sample_s`` (engine start to close), the engine's
        counters (prompt tokens, those evaluated, generated tokens, decode steps)."""
        self._started = 0.0

    # -- TurnSampler ----------------------------------------------------------------------------------------------

    def start(self, model: Any, episodes: int, context: int) -> None:
        """Export ``model``'s current weights and start an engine with ``episodes`` sequences of ``context``
        (``slots``: ``episodes`` engines of one sequence each)."""
        import time

        import torch

        from shoparena.llm.llamacpp_batch import BatchEngine

        self.stop()
        began = time.perf_counter()
        self.gguf = self.export(model)
        gen = getattr(model, "generation_config", None)
        self.top_k = int(getattr(gen, "top_k", None) or 50)
        try:
            if self.mode == "slots":
                for _ in range(max(1, episodes)):
                    self.engines.append(BatchEngine(self.gguf, n_seq=1, ctx=int(context), n_batch=self.n_batch,
                                                    threads=self.threads or 1))
            else:
                self.engines.append(BatchEngine(self.gguf, n_seq=max(1, episodes), ctx=int(context),
                                                n_batch=self.n_batch, threads=self.threads or torch.get_num_threads()))
        except BaseException:
            for engine in self.engines:
                engine.close()
            self.engines = []
            raise
        self._started = time.perf_counter()
        self.stats.append({"step": self.step, "export_s": round(self._started - began, 3),
                           "policy_sha256": self.policy_sha256})

    def sample(self, context: list[int], max_new: int, eos_ids: list[int], *, episode: int, turn: int,
               temperature: float, top_p: float) -> list[int]:
        from shoparena.llm.llamacpp_batch import GenerationRequest

        if not self.engines:
            raise RuntimeError("LlamaCppSampler.sample before start")
        if self.mode == "slots" and not 0 <= episode < len(self.engines):
            raise RuntimeError(f"episode {episode} of a rollout started with {len(self.engines)} engines")
        engine = self.engines[episode] if self.mode == "slots" else self.engines[0]
        request = GenerationRequest(ids=list(context), max_new=int(max_new), temperature=float(temperature),
                                    top_k=self.top_k, top_p=float(top_p),
                                    seed=turn_seed(self.seed, self.step, episode, turn), end_ids=frozenset(eos_ids))
        return list(engine.generate(request))

    def stop(self) -> None:
        """Close the engine (the GGUF stays until the next export or :meth:`close`)."""
        import time

        if not self.engines:
            return
        engines, self.engines = self.engines, []
        total = {"prompt_tokens": 0, "prompt_tokens_evaluated": 0, "generated_tokens": 0, "decode_steps": 0}
        for engine in engines:
            total["prompt_tokens"] += engine.stats.prompt_tokens
            total["prompt_tokens_evaluated"] += engine.stats.prompt_tokens_evaluated
            total["generated_tokens"] += engine.stats.generated_tokens
            total["decode_steps"] += engine.stats.steps
            engine.close()
        self.stats[-1].update({"sample_s": round(time.perf_counter() - self._started, 3), **total})

    # -- export ---------------------------------------------------------------------------------------------------

    def export(self, model: Any) -> Path:
        """Write ``model``'s current merged weights to ``work_dir/policy.<dtype>.gguf`` (replacing the last one)."""
        import os

        from shoparena.llm.gguf_export import special_token_ids, write_llama_gguf

        config = _config_of(model)
        if getattr(config, "model_type", None) != "llama":
            raise ConfigError(f"grpo.sampler llamacpp exports llama models; the policy is "
                              f"{getattr(config, 'model_type', None)!r}", hint="set grpo.sampler: hf")
        state = merged_state_dict(model)
        rows = int(state["model.embed_tokens.weight"].shape[0])
        tokens = self.tokens + [f"[PAD{i}]" for i in range(len(self.tokens), rows)]
        ids = {t: i for i, t in enumerate(tokens)}
        special = [t for t in self.special if t in ids]
        special_ids = special_token_ids(config, self.tokenizer_config, ids, rows)

        self.work_dir.mkdir(parents=True, exist_ok=True)
        dest = self.work_dir / f"policy.{self.dtype.lower()}.gguf"
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        try:
            write_llama_gguf(tmp, config, state, tokens=tokens[:rows], merges=self.merges, special=special,
                             **special_ids, pre=self.pre,
                             dtype=self.dtype, name="grpo-policy")
            with open(tmp, "rb") as fh:
                self.policy_sha256 = hashlib.file_digest(fh, "sha256").hexdigest()
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        self.exports += 1
        return dest

    def close(self) -> None:
        """Stop the engine and remove the work directory."""
        self.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.gguf = None


def _config_of(model: Any) -> Any:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.config

