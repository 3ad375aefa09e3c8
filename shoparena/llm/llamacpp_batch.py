"""Continuous batching over one llama.cpp context: the ``llamacpp:`` backend's ``mode=batched`` engine.

One context holds one KV-cache stream per sequence (``n_seq_max`` streams, ``ctx`` cells each). A single engine
thread owns the context and runs the decode loop; requests from any thread (every episode in flight calls the
backend from its own worker thread) are queued and join the running batch between two decode steps:

- **admission** gives a request a sequence. If an idle sequence holds the request's whole previous prompt (the
  same episode's last turn: its prompt, its sampled turn and now the tool results), the request takes it over and
  only the tokens past the common prefix are evaluated, as a ``slots`` context does today. Otherwise the resident
  sequence sharing the longest prefix with the request (typically the system + tools block every episode starts
  with) is copied into a fresh sequence (``llama_memory_seq_cp`` of the whole stream, then the tail past the common
  prefix removed), so a prefix is evaluated once and copied after that, not evaluated again per episode;
- **each step** puts in one ``llama_decode`` the next token of every generating sequence and up to ``n_batch``
  prompt tokens of sequences still being prefilled (chunked prefill, so a new episode's prompt does not stall the
  others for seconds);
- **sampling** is per sequence, with its own llama.cpp sampler chain built from the request's parameters as the
  ``slots`` path builds it (top-k, top-p, temperature, then a draw seeded by the request's seed; greedy at
  temperature 0), so a request gets the same draw sequence whichever batch it shares;
- **eviction**: idle sequences stay resident (an episode's next turn reuses them) until a fresh sequence is
  needed; then the least recently used idle one is dropped.

Numerics: a sequence's logits are computed in batches whose composition depends on what else is in flight, and
llama.cpp's kernels may sum in a different order for different batch shapes, so the same seed gives the same text
in this mode when the same requests run together; greedy text may differ from the ``slots`` path's where two
candidate tokens tie to float precision.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoparena.llm.abandon import Abandoned

__all__ = ["BatchEngine", "EngineError", "EngineStats", "GenerationRequest"]

_MIN_SHARED = 32
"""Prompt tokens a prefill in flight must add to what is resident before a request waits to copy it."""
_IDLE_WAIT_S = 0.5
"""How long the engine thread sleeps with nothing to do before it looks again (a submission wakes it at once)."""


class EngineError(RuntimeError):
    """The engine could not answer: it is closed, its decode failed, or a wait ran out."""


@dataclass
class GenerationRequest:
    """One completion: prompt ids in, sampled ids out. ``stop_check(new_ids) -> bool`` ends generation early (stop
    strings); ``abandon`` is the gateway run's closed event (:mod:`shoparena.llm.abandon`)."""

    ids: list[int]
    max_new: int
    temperature: float = 0.0
    top_k: int = 50
    top_p: float = 1.0
    seed: int = 0
    end_ids: frozenset[int] = frozenset()
    stop_check: Callable[[list[int]], bool] | None = None
    abandon: threading.Event | None = None
    out: list[int] = field(default_factory=list)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    submitted: float = 0.0
    first_token_at: float | None = None
    prompt_evaluated: int = 0
    """Prompt tokens this request evaluated (the rest came from a resident or copied sequence)."""


@dataclass
class EngineStats:
    """Counters since the engine started (read by the sampling bench)."""

    steps: int = 0
    decode_s: float = 0.0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    generated_tokens: int = 0
    prefix_copies: int = 0
    takeovers: int = 0
    evictions: int = 0


class _Seq:
    __slots__ = ("chain", "id", "last_used", "next_token", "pending", "prompt_len", "request", "tokens")

    def __init__(self, seq_id: int) -> None:
        self.id = seq_id
        self.tokens: list[int] = []  # what the KV stream holds, in position order
        self.prompt_len = 0  # tokens of the last request's prompt (a continuation holds all of them)
        self.request: GenerationRequest | None = None
        self.last_used = 0.0
        self.pending: list[int] = []  # prompt tokens still to evaluate
        self.next_token: int | None = None  # the last sampled token, evaluated in the next step
        self.chain: Any = None


def _lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    # compare in blocks first: long shared prefixes are the common case
    while i + 64 <= n and a[i:i + 64] == b[i:i + 64]:
        i += 64
    while i < n and a[i] == b[i]:
        i += 1
    return i


class BatchEngine:
    """A llama.cpp context serving many sequences at once (module docstring). Thread-safe :meth:`generate`."""

    def __init__(self, gguf: str | Path, *, n_seq: int = 16, ctx: int = 8192, n_batch: int = 512,
                 threads: int | None = None) -> None:
        import llama_cpp
        from llama_cpp import _internals
        from llama_cpp._logger import set_verbose

        set_verbose(False)  # llama.cpp's own log lines (errors still print)
        self._ll = llama_cpp
        self.n_seq = max(1, min(int(n_seq), int(llama_cpp.llama_max_parallel_sequences())))
        self.ctx_per_seq = -(-int(ctx) // 256) * 256  # llama.cpp rounds a stream to whole 256-cell pages
        self.n_batch = int(n_batch)
        threads = threads or os.cpu_count() or 1
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        self._model = _internals.LlamaModel(path_model=str(gguf), params=mparams, verbose=False)
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = self.ctx_per_seq * self.n_seq
        cparams.n_batch = self.n_batch + self.n_seq  # a step: one token per generating sequence + a prefill chunk
        cparams.n_ubatch = self.n_batch + self.n_seq
        cparams.n_seq_max = self.n_seq
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.kv_unified = False  # one stream per sequence: attention reads only its own cells
        cparams.no_perf = True
        from llama_cpp._utils import suppress_stdout_stderr

        with suppress_stdout_stderr(disable=False):  # llama.cpp's context banner
            self._context = _internals.LlamaContext(model=self._model, params=cparams, verbose=False)
        self._ctx = self._context.ctx
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch + self.n_seq, 0, 1)
        self._seqs = [_Seq(i) for i in range(self.n_seq)]
        self._queue: deque[GenerationRequest] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._fatal: BaseException | None = None
        self.stats = EngineStats()
        self._thread = threading.Thread(target=self._run, name="llamacpp-batch", daemon=True)
        self._thread.start()

    # -- public -------------------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, timeout: float | None = None) -> list[int]:
        """Queue ``request`` and wait for its sampled ids; raises what the engine raised for it."""
        if not request.ids:
            raise ValueError("a request needs at least one prompt token")
        if len(request.ids) + request.max_new > self.ctx_per_seq:
            raise ValueError(f"prompt ({len(request.ids)}) + max_new ({request.max_new}) exceed the sequence "
                             f"context ({self.ctx_per_seq})")
        request.submitted = time.perf_counter()
        with self._cond:
            if self._closed or self._fatal is not None:
                raise EngineError(f"the llama.cpp batch engine is stopped ({self._fatal or 'closed'})")
            self._queue.append(request)
            self._cond.notify_all()
        if not request.done.wait(timeout):
            with self._cond:
                if request in self._queue:
                    self._queue.remove(request)
            raise EngineError("the llama.cpp batch engine did not answer in time")
        if request.error is not None:
            raise request.error
        return request.out

    def load(self) -> int:
        """Requests queued or decoding now (a router sends new episodes to the least loaded engine)."""
        with self._cond:
            return len(self._queue) + sum(s.request is not None for s in self._seqs)

    def continues(self, ids: list[int]) -> int:
        """How many of ``ids`` a resident sequence holds when it holds that request's whole previous prompt (the
        same episode's last turn), else 0: a router keeps an episode on the engine that has its cache."""
        best = 0
        for seq in self._seqs:
            tokens = list(seq.tokens)  # a snapshot: the engine thread appends while we read
            if tokens and seq.prompt_len:
                n = _lcp(tokens, ids)
                if n >= seq.prompt_len:
                    best = max(best, n)
        return best

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        for seq in self._seqs:
            self._free_chain(seq)
        self._ll.llama_batch_free(self._batch)
        self._context.close()
        self._model.close()

    # -- engine thread ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._closed and not self._queue and not self._active():
                        self._cond.wait(_IDLE_WAIT_S)
                    if self._closed:
                        break
                self._admit()
                self._drop_abandoned()
                if self._active():
                    self._step()
        except BaseException as exc:  # the context is unusable: fail every waiter rather than hang them
            self._fatal = exc
        finally:
            with self._cond:
                waiting = list(self._queue) + [s.request for s in self._seqs if s.request is not None]
                self._queue.clear()
            for request in waiting:
                self._finish_error(request, EngineError(f"the llama.cpp batch engine stopped ({self._fatal or 'closed'})"))

    def _active(self) -> list[_Seq]:
        return [s for s in self._seqs if s.request is not None]

    def _admit(self) -> None:
        deferred: list[GenerationRequest] = []
        while True:
            with self._cond:
                if not self._queue:
                    break
                idle = [s for s in self._seqs if s.request is None]
                if not idle:
                    break
                request = self._queue.popleft()
            if self._prefix_in_flight(request):
                deferred.append(request)
                continue
            self._place(request, idle)
        if deferred:
            with self._cond:
                self._queue.extendleft(reversed(deferred))

    def _prefix_in_flight(self, request: GenerationRequest) -> bool:
        """True when a sequence still being prefilled will hold a longer prefix of ``request`` than any sequence
        holds now: the request waits for it and copies it then, instead of evaluating the same prefix again."""
        now = max((_lcp(s.tokens, request.ids) for s in self._seqs), default=0)
        for seq in self._seqs:
            if seq.request is None or not seq.pending or _lcp(seq.tokens, request.ids) < len(seq.tokens):
                continue
            if _lcp(seq.tokens + seq.pending, request.ids) > now + _MIN_SHARED:
                return True
        return False

    def _place(self, request: GenerationRequest, idle: list[_Seq]) -> None:
        ll, mem, ids = self._ll, self._mem, request.ids
        limit = len(ids) - 1  # the last prompt token is always evaluated: its logits give the first draw
        held = {s.id: _lcp(s.tokens, ids) for s in self._seqs}
        # The same episode's previous turn: an idle sequence whose whole last prompt this request repeats.
        own = [s for s in idle if s.tokens and s.prompt_len <= held[s.id] and s.prompt_len <= limit]
        if own:
            seq = max(own, key=lambda s: held[s.id])
            self.stats.takeovers += 1
        else:
            best = max(self._seqs, key=lambda s: held[s.id])
            seq = self._fresh(idle)
            held[seq.id] = _lcp(seq.tokens, ids)  # 0 when it was evicted
            if min(held[best.id], limit) > 0 and best is not seq:
                # another stream: llama.cpp copies whole streams, the tail past the prefix is cut below
                ll.llama_memory_seq_rm(mem, seq.id, -1, -1)
                ll.llama_memory_seq_cp(mem, best.id, seq.id, -1, -1)
                seq.tokens = list(best.tokens)
                held[seq.id] = held[best.id]
                self.stats.prefix_copies += 1
        keep = min(held[seq.id], limit)
        if not ll.llama_memory_seq_rm(mem, seq.id, keep, -1):
            ll.llama_memory_seq_rm(mem, seq.id, -1, -1)
            keep = 0
        seq.tokens = seq.tokens[:keep]
        seq.pending = list(ids[keep:])
        seq.prompt_len = len(ids)
        seq.next_token = None
        seq.request = request
        seq.last_used = time.perf_counter()
        request.prompt_evaluated = len(seq.pending)
        self.stats.prompt_tokens += len(ids)
        self.stats.prompt_tokens_evaluated += len(seq.pending)
        self._free_chain(seq)
        seq.chain = self._make_chain(request)

    def _fresh(self, idle: list[_Seq]) -> _Seq:
        """An idle sequence to reuse: an empty one, else the least recently used (evicted)."""
        empty = [s for s in idle if not s.tokens]
        if empty:
            return empty[0]
        seq = min(idle, key=lambda s: s.last_used)
        self._ll.llama_memory_seq_rm(self._mem, seq.id, -1, -1)
        seq.tokens = []
        self.stats.evictions += 1
        return seq

    def _make_chain(self, request: GenerationRequest) -> Any:
        ll = self._ll
        chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        if request.temperature <= 0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        else:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(int(request.top_k)))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(float(request.top_p), 1))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(float(request.temperature)))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(int(request.seed) & 0xFFFFFFFF))
        return chain

    def _free_chain(self, seq: _Seq) -> None:
        if seq.chain is not None:
            self._ll.llama_sampler_free(seq.chain)
            seq.chain = None

    def _drop_abandoned(self) -> None:
        for seq in self._active():
            request = seq.request
            assert request is not None
            if request.abandon is not None and request.abandon.is_set():
                self._release(seq)
                self._finish_error(request, Abandoned("the run closed before its answer was generated"))
        with self._cond:
            gone = [r for r in self._queue if r.abandon is not None and r.abandon.is_set()]
            for request in gone:
                self._queue.remove(request)
        for request in gone:
            self._finish_error(request, Abandoned("the run closed before its answer was generated"))

    def _step(self) -> None:
        ll, batch = self._ll, self._batch
        rows: list[tuple[_Seq, int]] = []  # (sequence, batch index) of the rows whose logits are read
        n = 0

        def put(seq: _Seq, token: int, logits: bool) -> None:
            nonlocal n
            batch.token[n] = token
            batch.pos[n] = len(seq.tokens)
            batch.n_seq_id[n] = 1
            batch.seq_id[n][0] = seq.id
            batch.logits[n] = logits
            seq.tokens.append(token)
            if logits:
                rows.append((seq, n))
            n += 1

        active = self._active()
        for seq in active:  # every generating sequence advances by one token
            if seq.next_token is not None:
                put(seq, seq.next_token, True)
                seq.next_token = None
        budget = self.n_batch
        for seq in sorted((s for s in active if s.pending), key=lambda s: s.last_used):
            if budget <= 0:
                break
            take = seq.pending[:budget]
            seq.pending = seq.pending[len(take):]
            budget -= len(take)
            for i, token in enumerate(take):
                put(seq, token, not seq.pending and i == len(take) - 1)
        if n == 0:
            return
        batch.n_tokens = n
        started = time.perf_counter()
        code = ll.llama_decode(self._ctx, batch)
        self.stats.decode_s += time.perf_counter() - started
        self.stats.steps += 1
        if code != 0:
            raise EngineError(f"llama_decode failed with code {code}")
        now = time.perf_counter()
        for seq, index in rows:
            request = seq.request
            assert request is not None
            token = int(ll.llama_sampler_sample(seq.chain, self._ctx, index))
            if request.first_token_at is None:
                request.first_token_at = now
            request.out.append(token)
            self.stats.generated_tokens += 1
            if (token in request.end_ids or len(request.out) >= request.max_new
                    or (request.stop_check is not None and request.stop_check(request.out))):
                self._release(seq)
                request.done.set()
            else:
                seq.next_token = token

    def _release(self, seq: _Seq) -> None:
        seq.request = None
        seq.pending = []
        seq.next_token = None
        seq.last_used = time.perf_counter()
        self._free_chain(seq)
        with self._cond:
            self._cond.notify_all()

    @staticmethod
    def _finish_error(request: GenerationRequest, error: BaseException) -> None:
        request.error = error
        request.done.set()
