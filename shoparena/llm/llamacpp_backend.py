"""``llamacpp:<checkpoint dir>[?mode=batched&parallel=16&engines=2&dtype=F16&threads=2&ctx=8192]`` — a transformers checkpoint
served by llama.cpp on the CPU (through ``llama-cpp-python``), several times faster than ``hf:`` for evaluation and
rollouts.

What the model sees and what is parsed are the ``hf:`` backend's, byte for byte: the prompt is rendered by the
checkpoint's own tokenizer and chat template with its observation compaction
(:func:`~shoparena.llm.hf_backend.render_prompt`), tokenised by that tokenizer and handed to llama.cpp **as token
ids**; the sampled ids are decoded by the same tokenizer and parsed as Qwen3 text
(:func:`~shoparena.llm.hf_backend.completion_to_message`). Only the arithmetic differs: the weights are exported once
to a GGUF in the user's GGUF cache (:func:`~shoparena.llm.gguf_export.export_gguf`, F16 by default, named by the
checkpoint's hashes; the checkpoint directory is only read) and run by llama.cpp's kernels.

Concurrency, ``mode=batched`` (the default; a URI naming ``slots`` without a mode keeps the ``slots`` path):
``engines`` llama.cpp contexts (default 2, each on its share of ``threads``) each decode up to ``parallel / engines``
sequences per step (continuous batching: a request joins the running batch between two steps); an episode's next
turn goes to the engine holding its sequence and reuses its KV cache, a new episode to the least loaded engine, and
the prompt prefix episodes share (the system + tools block) is evaluated once per engine and copied to new
sequences (:mod:`shoparena.llm.llamacpp_batch`). ``docs/results.md`` §8 has the measured throughput of the modes
(``bench/sampling.py``).

Concurrency, ``mode=slots``: ``slots`` llama.cpp contexts share the memory-mapped weights; a request takes the free slot whose cached
tokens share the longest prefix with its prompt, so a multi-turn episode keeps reusing its own KV cache (only the new
tool result and generation prompt are evaluated each turn) while other episodes use other slots. ``threads`` are split
across slots. A gateway request whose run closes stops at its next token or skips the slot it waited for
(:mod:`shoparena.llm.abandon`), so a timed-out episode does not hold a slot the next ones need.

Sampling: temperature 0 is greedy; otherwise top-k (the checkpoint's ``generation_config`` ``top_k``, else 50, as
transformers does), top-p, temperature, then a draw seeded by the request's ``seed`` (a fixed default when none), so
the same prompt and seed give the same text on one machine.

A turn that ends because it reached its token budget, not at an end token or a stop string, is marked
``truncated`` on its message, by the ``hf:`` backend's rule (:func:`~shoparena.llm.hf_backend.cut_at_cap`), in
both modes.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoparena.errors import BackendError, ConfigError, NotFoundError
from shoparena.llm.abandon import ABANDON, abandoned, check_abandoned
from shoparena.llm.compact import read_compact
from shoparena.llm.hf_backend import (
    DEFAULT_MAX_NEW_TOKENS,
    Generation,
    clip_completion,
    completion_to_message,
    cut_at_cap,
    render_prompt,
)
from shoparena.llm.llamacpp_batch import BatchEngine, EngineError, GenerationRequest
from shoparena.llm.types import ChatBackend, Sampling, parse_path_uri

__all__ = ["CallTiming", "LlamaCppBackend", "from_uri", "parse_llamacpp_uri", "resolve_mode"]

_END_MARKERS = ("<|im_end|>", "<|endoftext|>")
_DEFAULT_SEED = 0x5EED
_OPTIONS = {"mode": str, "dtype": str, "slots": int, "parallel": int, "engines": int, "threads": int, "ctx": int,
            "max_new_tokens": int}
MODES = ("batched", "slots")
DEFAULT_PARALLEL = 16
"""Sequences the batched engines decode at once, all engines together (more requests wait for a free one)."""
DEFAULT_ENGINES = 2
"""Batched engines, each a llama.cpp context on its share of the threads: one graph run by two threads spends much
of a small model's step in synchronisation, two one-thread engines do not (docs/results.md §8)."""


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigError("the llamacpp: backend needs llama-cpp-python (not installed)",
                          hint="make llamacpp (builds llama-cpp-python from source, a few minutes)") from exc
    _close_null_files_at_exit()
    return llama_cpp


@functools.cache
def _close_null_files_at_exit() -> None:
    """llama-cpp-python opens two ``/dev/null`` files at import (its output silencer) and never closes them, so a
    process with warnings on ends on a ResourceWarning; they are closed at exit."""
    from llama_cpp import _utils

    def close() -> None:
        for name in ("outnull_file", "errnull_file"):
            fh = getattr(_utils, name, None)
            if fh is not None and not fh.closed:
                fh.close()

    atexit.register(close)


def parse_llamacpp_uri(rest: str) -> tuple[Path, dict[str, Any]]:
    """``PATH[?key=value&…]`` → (path, options); unknown or malformed options are a ConfigError."""
    path, options = parse_path_uri("llamacpp", rest, _OPTIONS)
    resolve_mode(options.get("mode"), slots=options.get("slots"), parallel=options.get("parallel"),
                 engines=options.get("engines"))
    return path, options


def resolve_mode(mode: str | None, *, slots: int | None = None, parallel: int | None = None,
                 engines: int | None = None) -> str:
    """The serving mode options name: ``mode``, else ``slots`` when they name slots (a URI written for that path
    keeps it), else ``batched``; a ConfigError for an unknown mode or an option of the other mode."""
    mode = mode or ("slots" if slots else "batched")
    if mode not in MODES:
        raise ConfigError(f"llamacpp: unknown mode {mode!r}", hint=f"modes: {', '.join(MODES)}")
    if mode == "batched" and slots:
        raise ConfigError("llamacpp: slots= is an option of mode=slots",
                          hint="batched mode takes parallel= (sequences decoded at once)")
    if mode == "slots" and (parallel or engines):
        raise ConfigError("llamacpp: parallel= and engines= are options of mode=batched", hint="slots mode takes slots=")
    return mode


@dataclass(frozen=True)
class CallTiming:
    """Where one call's time went: seconds from the call to its first sampled token (waiting for a slot or a
    sequence included), and how many of its prompt tokens were evaluated (the rest came from a KV cache)."""

    ttft_s: float | None
    prompt_tokens: int
    prompt_evaluated: int


class _Slot:
    """One llama.cpp context (its own KV cache) over the shared weights."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.busy = False

    def shared_prefix(self, ids: list[int]) -> int:
        n = 0
        for a, b in zip(self.llama._input_ids[: self.llama.n_tokens], ids, strict=False):
            if a != b:
                break
            n += 1
        return n


class LlamaCppBackend:
    """A checkpoint directory served by llama.cpp. ``name`` is the directory's name."""

    def __init__(self, path: str | Path, *, mode: str | None = None, dtype: str = "F16", slots: int | None = None,
                 parallel: int | None = None, engines: int | None = None, threads: int | None = None,
                 ctx: int | None = None, max_new_tokens: int | None = None) -> None:
        mode = resolve_mode(mode, slots=slots, parallel=parallel, engines=engines)
        self.path = Path(path).expanduser()
        if not (self.path / "config.json").is_file():
            raise NotFoundError(f"no transformers model at {self.path} (config.json missing)",
                                hint="llamacpp: takes a local checkpoint directory (shoparena models prepare, "
                                     "or a training stage's model/)")
        llama_cpp = _import_llama()
        import transformers

        from shoparena.llm.gguf_export import export_gguf

        self.name = self.path.name
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        if not self.tokenizer.chat_template:
            raise ConfigError(f"the tokenizer in {self.path} has no chat template")
        self.compact = read_compact(self.path)
        gen = _generation_config(self.path)
        self.turn_cap: int | None = max_new_tokens or gen.get("max_new_tokens")
        self.max_new_tokens = self.turn_cap or DEFAULT_MAX_NEW_TOKENS
        self.top_k = int(gen.get("top_k") or 50)
        config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        self.context = int(ctx or config.get("max_position_embeddings") or 4096)
        vocab = self.tokenizer.get_vocab()
        end = {vocab[t] for t in _END_MARKERS if t in vocab}
        eos = gen.get("eos_token_id", config.get("eos_token_id"))
        end |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.eos_token_ids = frozenset(end)
        self.gguf = export_gguf(self.path, dtype=dtype)
        self.mode = mode
        self.timeout_s: float | None = None
        """Seconds a batched call may wait for its answer in all (None: no bound; the gateway's run clock and
        abandonment end calls nobody waits for)."""
        self.last_call = threading.local()
        """``.timing``: the :class:`CallTiming` of this thread's last completed call (read by bench/sampling.py)."""
        cores = os.cpu_count() or 1
        self._slots: list[_Slot] = []
        self._cond = threading.Condition()
        self._engines: list[BatchEngine] = []
        if mode == "batched":
            total = threads or cores
            n_engines = max(1, min(engines or DEFAULT_ENGINES, total))
            per_engine = max(1, (parallel or DEFAULT_PARALLEL) // n_engines)
            self._engines = [BatchEngine(self.gguf, n_seq=per_engine, ctx=self.context, threads=max(1, total // n_engines))
                             for _ in range(n_engines)]
            self._turn = 0
            return
        n_slots = slots or max(1, min(4, cores))
        total = threads or cores
        per_slot = max(1, total // n_slots)
        self._slots = [
            _Slot(llama_cpp.Llama(model_path=str(self.gguf), n_ctx=self.context, n_batch=512,
                                  n_threads=per_slot, n_threads_batch=per_slot, seed=_DEFAULT_SEED,
                                  logits_all=False, verbose=False))
            for _ in range(n_slots)
        ]

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
               enable_thinking: bool | None = None) -> str:
        return render_prompt(self.tokenizer, messages, tools, enable_thinking, self.compact)

    def _acquire(self, ids: list[int]) -> _Slot:
        with self._cond:
            while True:
                free = [s for s in self._slots if not s.busy]
                if free:
                    slot = max(free, key=lambda s: s.shared_prefix(ids))
                    slot.busy = True
                    return slot
                self._cond.wait()

    def _release(self, slot: _Slot) -> None:
        with self._cond:
            slot.busy = False
            self._cond.notify()

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 sampling: Sampling | None = None) -> tuple[str, int, int]:
        """Blocking generation: ``(completion text, prompt tokens, completion tokens)``."""
        text, n_prompt, n_completion, _ = self.generate_turn(messages, tools, sampling)
        return text, n_prompt, n_completion

    def generate_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                      sampling: Sampling | None = None) -> Generation:
        """:meth:`generate` with whether the turn was cut at the token cap (:class:`Generation`)."""
        sampling = sampling or Sampling()
        prompt = self.render(messages, tools, sampling.enable_thinking)
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        max_new = sampling.max_tokens or self.max_new_tokens
        if self.turn_cap is not None:
            max_new = min(max_new, self.turn_cap)
        max_new = min(max_new, self.context - len(ids))
        if max_new < 1:
            raise ConfigError(f"the prompt ({len(ids)} tokens) fills the model's context ({self.context} tokens)")
        if self._engines:
            return self._generation(self._generate_batched(ids, max_new, sampling), len(ids), max_new, sampling)
        greedy = sampling.temperature <= 0
        started = time.perf_counter()
        slot = self._acquire(ids)
        shared = min(slot.shared_prefix(ids), len(ids) - 1)
        new: list[int] = []
        first: float | None = None
        try:
            check_abandoned()  # it waited for a slot while its run closed (llm/abandon.py)
            llama = slot.llama
            llama.set_seed(_DEFAULT_SEED if sampling.seed is None else int(sampling.seed) & 0xFFFFFFFF)
            stream = llama.generate(ids, top_k=0 if greedy else self.top_k, top_p=sampling.top_p or 1.0, min_p=0.0,
                                    typical_p=1.0, temp=0.0 if greedy else float(sampling.temperature),
                                    repeat_penalty=1.0, reset=True)
            for token in stream:
                if abandoned():
                    break
                if first is None:
                    first = time.perf_counter()
                new.append(int(token))
                if token in self.eos_token_ids or len(new) >= max_new:
                    break
                if sampling.stop and self._hits_stop(new, sampling.stop):
                    break
            stream.close()
        finally:
            self._release(slot)
        self.last_call.timing = CallTiming(ttft_s=None if first is None else first - started,
                                           prompt_tokens=len(ids), prompt_evaluated=len(ids) - shared)
        check_abandoned()  # stopped part-way: no answer rather than a cut one
        return self._generation(new, len(ids), max_new, sampling)

    def _generation(self, new: list[int], n_prompt: int, max_new: int, sampling: Sampling) -> Generation:
        """Sampled ids as a :class:`Generation`: their text cut at the end marker or stop string, and whether they
        ran into ``max_new`` (:func:`cut_at_cap`; the stop strings are checked on the last tokens, as while
        sampling)."""
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        stopped = bool(sampling.stop) and self._hits_stop(new, list(sampling.stop or ()))
        return Generation(clip_completion(text, sampling.stop), n_prompt, len(new),
                          cut_at_cap(new, max_new, self.eos_token_ids, stopped))

    def _generate_batched(self, ids: list[int], max_new: int, sampling: Sampling) -> list[int]:
        engine = self._route(ids)
        check_abandoned()
        stop = list(sampling.stop or ())
        greedy = sampling.temperature <= 0
        request = GenerationRequest(
            ids=ids, max_new=max_new, temperature=0.0 if greedy else float(sampling.temperature),
            top_k=self.top_k, top_p=sampling.top_p or 1.0,
            seed=_DEFAULT_SEED if sampling.seed is None else int(sampling.seed), end_ids=self.eos_token_ids,
            stop_check=(lambda new: self._hits_stop(new, stop)) if stop else None, abandon=ABANDON.get())
        try:
            new = engine.generate(request, timeout=self.timeout_s)
        except EngineError as exc:
            raise BackendError(f"llamacpp: {exc}", hint="the model's process log has llama.cpp's own message") \
                from exc
        self.last_call.timing = CallTiming(
            ttft_s=None if request.first_token_at is None else request.first_token_at - request.submitted,
            prompt_tokens=len(ids), prompt_evaluated=request.prompt_evaluated)
        check_abandoned()  # stopped part-way: no answer rather than a cut one
        return new

    def _hits_stop(self, new: list[int], stop: list[str]) -> bool:
        """Whether the text of the last sampled tokens holds a stop string (generation then ends)."""
        tail = self.tokenizer.decode(new[-32:])
        return any(s in tail for s in stop)

    def _route(self, ids: list[int]) -> BatchEngine:
        """The engine for a request: the one holding this episode's previous turn, else the least loaded (ties
        in turn), so an episode keeps its cache and new episodes spread over the engines."""
        if len(self._engines) == 1:
            return self._engines[0]
        held = [(e.continues(ids), e) for e in self._engines]
        best = max(held, key=lambda h: h[0])
        if best[0] > 0:
            return best[1]
        with self._cond:
            self._turn += 1
            start = self._turn % len(self._engines)
        in_turn = self._engines[start:] + self._engines[:start]
        return min(in_turn, key=lambda e: e.load())  # the first of the least loaded

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> Any:
        text, n_prompt, n_completion, cut = await asyncio.to_thread(self.generate_turn, messages, tools, sampling)
        return completion_to_message(text, n_prompt, n_completion, truncated=cut)

    def close(self) -> None:
        for engine in self._engines:
            engine.close()
        self._engines = []
        for slot in self._slots:
            slot.llama.close()
        self._slots = []

    def __repr__(self) -> str:
        if self._engines:
            return (f"LlamaCppBackend({str(self.path)!r}, gguf={self.gguf.name!r}, mode='batched', "
                    f"engines={len(self._engines)}, parallel={sum(e.n_seq for e in self._engines)})")
        return f"LlamaCppBackend({str(self.path)!r}, gguf={self.gguf.name!r}, mode='slots', slots={len(self._slots)})"


def _generation_config(path: Path) -> dict[str, Any]:
    f = path / "generation_config.json"
    if not f.is_file():
        return {}
    body = json.loads(f.read_text(encoding="utf-8"))
    return body if isinstance(body, dict) else {}


def from_uri(rest: str) -> ChatBackend:
    """The ``llamacpp`` scheme's factory (registered lazily in :data:`shoparena.llm.types.BACKENDS`)."""
    path, options = parse_llamacpp_uri(rest)
    return LlamaCppBackend(path, **options)
