"""Continuous batching for local transformers models: many requests decoded together by transformers'
``ContinuousBatchingManager`` (paged attention; requests join and leave the running batch one token step at a time).

Two entry points:

- :class:`BatchedDecoder` — one persistent manager per ``hf:`` backend. Each caller thread (a gateway request in
  ``asyncio.to_thread``) submits its prompt ids and waits for its own result; requests that arrive while others are
  decoding join the running batch. A request whose gateway run closes (:mod:`shoparena.llm.abandon`) is cancelled in
  the manager and raises :class:`~shoparena.llm.abandon.Abandoned`; a caller with stop strings streams its tokens and
  cancels its request as soon as one appears. Every wait is a short poll that also checks the manager's thread, so a
  manager that dies makes its waiting callers raise :class:`~shoparena.errors.BackendError` instead of hanging; the
  next request starts a fresh manager.
- :func:`decode_once` — one short-lived manager for a fixed set of prompts (GRPO rollouts, the KTO emission probe:
  :func:`shoparena.train.rollout.sample_turns`), each with its own token budget.

What transformers' manager does (``transformers/generation/continuous_batching/``, 5.24), and what follows here:

- **Greedy or sampling is one switch per manager** (``do_sample`` of its generation config), while temperature,
  top-k and top-p can be set per request (``per_request_processors``). A persistent manager therefore samples, and a
  temperature-0 request is asked for with ``top_k=1``: only the highest logit survives, its probability is exactly
  1, and the draw returns it — the argmax (only exactly tied logits could differ from ``argmax``'s first index).
  :func:`decode_once` serves one temperature, so it runs a greedy manager when that temperature is 0.
- **Seeds**: the manager draws every sampled token of every request from torch's process-wide generator (the
  device's on CUDA), in the order its batches happen to form, and reseeds that generator when it builds its cache
  (``ContinuousBatchingConfig.seed``); there is no per-request generator. Hence in :class:`BatchedDecoder` a request's
  ``seed`` is not honoured: temperature 0 is deterministic, sampled text is not repeatable (it depends on which
  requests shared the batch) — seeded, repeatable sampling is the serial ``hf:`` path's (``mode=serial``); its cache
  is built inside a forked RNG, so the reseeding leaves the process's generator as it was.
  :func:`decode_once` submits all its prompts before the manager starts, so its batches form the same way every
  time; it seeds the manager with a draw from the caller's RNG and runs inside a forked RNG, so a seeded caller gets
  the same ids again and its generator only moves on by that one draw.
- **Attention**: the manager runs ``sdpa`` as it is, turns ``eager`` into ``paged|eager``, and switches to flash
  attention when a flash kernel is installed; it restores the model's implementation when it stops.
- **Memory**: without a size the paged cache takes a share of the device's free memory (60 % of RAM on a CPU).
  Here the CPU cache is sized explicitly (:data:`CPU_CACHE_TOKENS`), :func:`decode_once` sizes it for its prompts,
  and a request longer than the whole cache is refused before it is submitted (the manager would otherwise stop
  with an error that fails every request in flight).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import itertools
import logging
import math
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shoparena.errors import BackendError, ConfigError
from shoparena.llm.abandon import Abandoned, abandoned

__all__ = ["CPU_CACHE_TOKENS", "CPU_MAX_BATCH_TOKENS", "BatchedDecoder", "decode_once", "effective_top_k"]

log = logging.getLogger(__name__)

CPU_CACHE_TOKENS = 32768
"""Paged KV cache of a persistent CPU manager, in tokens (shared by the requests in flight; SmolLM2-135M in float32
keeps ~46 KB per token, so ~1.5 GB)."""
CPU_MAX_BATCH_TOKENS = 512
"""Tokens per forward pass on a CPU (longer prefills are split): bounds the ``[M, cache + M]`` attention mask."""
ONCE_MAX_BATCH_TOKENS = 2048
""":func:`decode_once`'s tokens per forward pass on an accelerator: a small mask beside a training run's memory."""
PAGE_SIZE = 256
_POLL_S = 0.05
"""A waiting caller's poll: how soon it sees its run close or the manager die."""
_STOP_TIMEOUT_S = 30.0
_IDS = itertools.count()


def _torch() -> Any:
    import torch

    return torch


def _rng_devices(model: Any) -> list[int]:
    device = model.device
    return [device.index or 0] if device.type == "cuda" else []


def _sampling_config(model: Any, *, do_sample: bool, eos_token_ids: Sequence[int], max_new_tokens: int,
                     temperature: float | None = None, top_p: float | None = None, top_k: int | None = None) -> Any:
    """The model's generation config with these decoding settings (its other processors stay, as in ``generate``)."""
    config = copy.deepcopy(model.generation_config)
    config.update(do_sample=do_sample, temperature=temperature, top_p=top_p, top_k=top_k,
                  max_new_tokens=max_new_tokens, eos_token_id=list(eos_token_ids), num_return_sequences=1)
    return config


def effective_top_k(model: Any) -> int:
    """The top-k ``generate`` samples with: the checkpoint's ``generation_config.top_k``, else transformers' default
    50; 0 means none (the whole vocabulary)."""
    top_k = getattr(model.generation_config, "top_k", None)
    if top_k is None:
        return 50
    return int(top_k) or int(model.config.get_text_config().vocab_size)


def _restore_attention(model: Any, implementation: str) -> None:
    """Give the model back its attention implementation: a manager that never started does not (its ``stop``
    returns early)."""
    if model.config._attn_implementation != implementation:
        with contextlib.suppress(Exception):
            model.set_attn_implementation(implementation)


class _Request:
    """One caller's request: the manager it went to, and the outputs the result thread hands it (or a
    :class:`_Gone` when that manager died or was closed)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.outputs: queue.Queue[Any] = queue.Queue()


class _Gone:
    def __init__(self, why: str) -> None:
        self.why = why


class BatchedDecoder:
    """A persistent continuous-batching manager over ``model`` (module docstring): threads call :meth:`generate` and
    each gets its own continuation. Started on the first request, stopped by :meth:`close` (and at interpreter
    exit)."""

    def __init__(self, model: Any, *, eos_token_ids: Sequence[int], cache_tokens: int | None = None,
                 max_batch_tokens: int | None = None) -> None:
        self.model = model
        self.eos_token_ids = list(eos_token_ids)
        on_cpu = model.device.type == "cpu"
        self.cache_tokens = cache_tokens or (CPU_CACHE_TOKENS if on_cpu else None)
        self.max_batch_tokens = max_batch_tokens or (CPU_MAX_BATCH_TOKENS if on_cpu else None)
        self.top_k = effective_top_k(model)
        self._manager: Any = None
        self._dispatcher: threading.Thread | None = None
        self._requests: dict[str, _Request] = {}
        self._lock = threading.Lock()  # guards _manager, _dispatcher, _requests
        self._closed = False
        self.capacity: int | None = None
        """The paged cache's size in tokens once a manager has started (one request may use it all)."""
        ref = weakref.ref(self)
        atexit.register(lambda: (decoder := ref()) is not None and decoder.close())

    # ---------------------------------------------------------------- lifecycle

    def _start(self) -> Any:
        """The running manager (a new one when there is none or the last one died). Called with ``_lock`` held."""
        if self._closed:
            raise BackendError("the hf: backend was closed", hint="make a new backend")
        manager = self._manager
        if manager is not None and manager.is_running():
            return manager
        if manager is not None:
            self._retire(manager)
        torch = _torch()
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        config = _sampling_config(self.model, do_sample=True, eos_token_ids=self.eos_token_ids,
                                  max_new_tokens=1024, temperature=0.5, top_p=0.5, top_k=1)
        # the placeholders above (temperature ≠ 1, top_p < 1, top_k set) make transformers build the three
        # per-request warpers; every request sets all three
        cb = ContinuousBatchingConfig(
            page_size=PAGE_SIZE, per_request_processors=True,
            num_blocks=math.ceil(self.cache_tokens / PAGE_SIZE) if self.cache_tokens else None,
            max_batch_tokens=self.max_batch_tokens)
        attention = self.model.config._attn_implementation
        manager = self.model.init_continuous_batching(generation_config=config, continuous_batching_config=cb)
        error: list[BaseException] = []

        def start() -> None:
            # A daemon thread's threads are daemons: the manager's loop then never holds up interpreter exit (close()
            # stops it first, from atexit). The loop runs in its starter's inference mode.
            try:
                with torch.inference_mode(), torch.random.fork_rng(devices=_rng_devices(self.model)):
                    manager.warmup()  # builds the cache here: its reseeding of torch's generator is undone
                with torch.inference_mode():
                    manager.start()
            except BaseException as exc:  # reported to the caller below
                error.append(exc)

        starter = threading.Thread(target=start, name="hf-batching-start", daemon=True)
        starter.start()
        starter.join()
        if error:
            self._retire(manager)
            _restore_attention(self.model, attention)
            raise BackendError(f"the hf: continuous-batching manager did not start: {error[0]}") from error[0]
        processor = manager.batch_processor
        self.capacity = int(processor.cache.num_blocks * PAGE_SIZE) if processor is not None else None
        self._manager = manager
        self._dispatcher = threading.Thread(target=self._dispatch, args=(manager,), name="hf-batching-results",
                                            daemon=True)
        self._dispatcher.start()
        return manager

    def _retire(self, manager: Any) -> None:
        """Stop a manager that died or is being replaced (restores the model's attention implementation)."""
        with contextlib.suppress(Exception):
            manager.stop(block=True, timeout=_STOP_TIMEOUT_S, hard_stop=True)
        self._manager = None

    def close(self) -> None:
        """Stop the manager (requests still in flight raise :class:`BackendError`); later requests are refused."""
        with self._lock:
            self._closed = True
            manager, dispatcher = self._manager, self._dispatcher
            if manager is not None:
                self._retire(manager)
            self._fail_waiting(None, "the hf: backend was closed")
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join(timeout=_STOP_TIMEOUT_S)

    def _fail_waiting(self, manager: Any, why: str) -> None:
        """Wake every caller waiting on ``manager`` (None: on any) with the reason (called with ``_lock`` held)."""
        for request in self._requests.values():
            if manager is None or request.manager is manager:
                request.outputs.put(_Gone(why))

    def _dispatch(self, manager: Any) -> None:
        """Hand each output of the manager to its request's queue until the manager stops."""
        try:
            while True:
                output = manager.get_result(timeout=_POLL_S)
                if output is not None:
                    with self._lock:
                        request = self._requests.get(output.request_id)
                    if request is not None:  # None: a request its caller cancelled and left
                        request.outputs.put(output)
                    continue
                if not manager.is_running():
                    break
        except Exception as exc:  # a broken result queue: nobody would ever be woken otherwise
            log.exception("hf: continuous-batching result thread failed")
            why = f"its result thread failed ({exc})"
        else:
            fatal = manager.background_thread_status.fatal_error
            why = f"its generation loop died ({fatal})" if fatal is not None else "it was stopped"
        with self._lock:
            self._fail_waiting(manager, f"the hf: continuous-batching manager is gone: {why}")

    # ---------------------------------------------------------------- requests

    def generate(self, input_ids: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0, top_p: float = 1.0,
                 stop: Callable[[list[int]], bool] | None = None) -> list[int]:
        """The ids generated after ``input_ids`` (ending with the end token when one came), decoded in the shared
        batch. ``stop(ids so far)`` true ends the request there (its ids are returned as they were then). A caller
        whose run closes gets :class:`Abandoned` and its request is cancelled."""
        request_id = f"hf-{next(_IDS)}"
        if temperature > 0:
            kwargs = {"temperature": float(temperature), "top_p": float(top_p), "top_k": int(self.top_k)}
        else:  # greedy in a sampling manager (module docstring)
            kwargs = {"temperature": 1.0, "top_p": 1.0, "top_k": 1}
        with self._lock:
            manager = self._start()
            if self.capacity is not None and len(input_ids) + max_new_tokens > self.capacity:
                raise ConfigError(f"the prompt ({len(input_ids)} tokens) and its {max_new_tokens} new tokens exceed the "
                                  f"paged cache ({self.capacity} tokens)",
                                  hint="cap the turn (max_new_tokens) or shorten the prompt")
            request = self._requests[request_id] = _Request(manager)
        try:
            submitted = manager.add_request(list(input_ids), request_id=request_id, max_new_tokens=max_new_tokens,
                                            eos_token_id=self.eos_token_ids, streaming=stop is not None, **kwargs)
            if submitted is None:
                raise BackendError("the hf: continuous-batching manager refused the request (it is stopping)")
            return self._wait(request_id, request, stop)
        finally:
            with self._lock:
                self._requests.pop(request_id, None)

    @staticmethod
    def _wait(request_id: str, request: _Request, stop: Callable[[list[int]], bool] | None) -> list[int]:
        manager = request.manager
        while True:
            try:
                output = request.outputs.get(timeout=_POLL_S)
            except queue.Empty:
                output = None
            if abandoned():
                manager.cancel_request(request_id)
                raise Abandoned("the run closed before its answer was generated")
            if output is None:
                continue
            if isinstance(output, _Gone):
                raise BackendError(output.why, hint="the model's generation loop failed or was stopped; see the log")
            if output.error is not None:
                raise BackendError(f"the hf: continuous-batching manager failed the request: {output.error}")
            tokens = list(output.generated_tokens)
            if output.is_finished():
                return tokens
            if stop is not None and stop(tokens):
                manager.cancel_request(request_id)
                return tokens


@contextlib.contextmanager
def _one_shot_manager(model: Any, config: Any, cb: Any) -> Iterator[Any]:
    attention = model.config._attn_implementation
    manager = model.init_continuous_batching(generation_config=config, continuous_batching_config=cb)
    try:
        yield manager
    finally:
        if manager.is_running():
            manager.stop(block=True, timeout=_STOP_TIMEOUT_S, hard_stop=True)
        manager.destroy()
        _restore_attention(model, attention)


def decode_once(model: Any, contexts: Sequence[Sequence[int]], max_new: Sequence[int], eos_ids: Sequence[int], *,
                temperature: float, top_p: float) -> list[list[int]]:
    """One continuation per context, each at its own token budget, by one short-lived manager sized for exactly these
    requests. Greedy at temperature 0; otherwise sampled (``top_p``, the model's top-k) from a generator seeded by one
    draw of the caller's torch RNG, so a seeded caller gets the same ids again (module docstring). The ids are the
    sampled ones as they are, ending at the first end token or the budget."""
    torch = _torch()
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    if len(contexts) != len(max_new):
        raise ValueError("one token budget per context")
    if not contexts:
        return []
    sampling = temperature > 0
    config = _sampling_config(model, do_sample=sampling, eos_token_ids=eos_ids, max_new_tokens=max(max_new),
                              temperature=temperature if sampling else None, top_p=top_p if sampling else None,
                              top_k=effective_top_k(model) if sampling else None)
    blocks = sum(math.ceil((len(ctx) + budget) / PAGE_SIZE) + 1 for ctx, budget in zip(contexts, max_new, strict=True))
    seed = int(torch.randint(0, 2**31 - 1, (1,)).item())  # advances the caller's RNG: the next call differs
    cb = ContinuousBatchingConfig(page_size=PAGE_SIZE, num_blocks=blocks, seed=seed, allow_block_sharing=False,
                                  max_batch_tokens=CPU_MAX_BATCH_TOKENS if model.device.type == "cpu"
                                  else ONCE_MAX_BATCH_TOKENS)
    results: dict[str, list[int]] = {}
    with torch.random.fork_rng(devices=_rng_devices(model)), torch.no_grad(), \
            _one_shot_manager(model, config, cb) as manager:
        manager.warmup()  # builds the cache and seeds the generator in this thread
        ids = [f"once-{i}" for i in range(len(contexts))]
        for request_id, ctx, budget in zip(ids, contexts, max_new, strict=True):
            manager.add_request(list(ctx), request_id=request_id, max_new_tokens=budget, eos_token_id=list(eos_ids))
        manager.start()  # after every request is queued: the first batch holds them all, every time
        while len(results) < len(ids):
            output = manager.get_result(timeout=_POLL_S)
            if output is None:
                if not manager.is_running():
                    fatal = manager.background_thread_status.fatal_error
                    raise BackendError(f"the continuous-batching manager stopped with {len(ids) - len(results)} "
                                       f"of {len(ids)} turns unfinished ({fatal or 'no error recorded'})")
                continue
            if output.error is not None:
                raise BackendError(f"continuous batching failed a turn: {output.error}")
            if output.is_finished():
                results[output.request_id] = list(output.generated_tokens)
    return [results[request_id] for request_id in ids]
