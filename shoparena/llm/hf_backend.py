"""``hf:<path>`` — a local transformers causal LM with its own chat template and Qwen3 tool calling.

Loads tokenizer and model from local files only (never the hub), puts the model in ``eval()`` mode and generates
under ``torch.inference_mode()`` off the event loop (``asyncio.to_thread``), one generation per model at a time; a
gateway request whose run closes is dropped, waiting or part-way (:mod:`shoparena.llm.abandon`). The prompt is the
tokenizer's chat template (``tools``, ``add_generation_prompt``, ``enable_thinking``); the completion is parsed as
Qwen3 text (``<think>`` then ``<tool_call>`` blocks, :func:`parse_qwen3`) into an :class:`AssistantMessage`:
reasoning → ``reasoning_content``, calls → ``tool_calls``, the rest → ``content``.

Sampling: temperature 0 is greedy; otherwise multinomial sampling with ``temperature``/``top_p`` (and the model's
own ``top_k`` default, as vLLM does). A ``seed`` seeds the RNG in a forked state, so the same seed gives the same
text and the caller's global RNG is left alone. ``stop`` strings end generation and are cut from the text.

Modes (``hf:PATH?mode=serial|batched``; the default is ``batched`` when the model is on CUDA, ``serial`` on a CPU):

- ``serial`` — one ``generate`` at a time behind a lock, as above;
- ``batched`` — every request goes to one persistent continuous-batching manager
  (:class:`~shoparena.llm.hf_batching.BatchedDecoder`): concurrent requests (many episodes on one event loop) are
  decoded together and a request that arrives joins the running batch. Rendering, tokenisation, end tokens, the turn
  cap, stop strings and parsing are the serial path's; temperature 0 gives the serial path's tokens (float32 on a
  CPU: tested). What differs is sampling: a request's ``seed`` is not honoured (the manager draws every request's
  tokens from one generator, in the order its batches form), so sampled text is not repeatable — the backend says so
  once in the log; seeded, repeatable sampling needs ``mode=serial``.

Other URI options: ``device`` (``cpu``, ``cuda``, ``cuda:1`` …), ``dtype`` (``float32``, ``bfloat16`` …),
``max_new_tokens`` (the per-turn cap) — :func:`parse_hf_uri`.

A turn that ends because it reached its token budget (the request's ``max_tokens`` under the per-turn cap and the
context), not at an end token or a stop string, is marked ``truncated`` on its message (:func:`cut_at_cap`): a cut
turn can lose its ``<tool_call>`` and look like a turn that chose to stop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from shoparena.env.protocol_native import parse_qwen3
from shoparena.env.types import AssistantMessage, ToolCall, Usage
from shoparena.errors import ConfigError, NotFoundError
from shoparena.llm.abandon import ABANDON, abandoned, check_abandoned
from shoparena.llm.compact import compact_messages, read_compact
from shoparena.llm.types import ChatBackend, Sampling, parse_path_uri

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS", "MODES", "Generation", "HFBackend", "clip_completion", "completion_to_message",
    "cut_at_cap", "parse_hf_uri", "render_prompt", "template_messages",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_NEW_TOKENS = 1024
MODES = ("serial", "batched")
_OPTIONS: dict[str, type] = {"mode": str, "device": str, "dtype": str, "max_new_tokens": int}
_END_MARKERS = ("<|im_end|>", "<|endoftext|>")
_RNG_LOCK = threading.Lock()  # seeded sampling touches torch's process-wide RNG


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(f"the hf: backend needs torch and transformers ({exc.name} is not installed)",
                          hint="pip install 'shoparena[hf]'") from exc
    return torch, transformers


class _StopWhenAbandoned:
    """A ``generate`` stopping criterion (a callable over ``input_ids, scores``): every row stops once the
    request's run has closed. transformers takes any such callable in ``stopping_criteria``."""

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), abandoned(), dtype=torch.bool, device=input_ids.device)


class Generation(NamedTuple):
    """One generated turn: the completion text (cut at its end marker or stop string), the token counts, and
    whether generation ended at the token cap (:func:`cut_at_cap`)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    truncated: bool


def cut_at_cap(new: Sequence[int], max_new: int, end_ids: Collection[int], stopped: bool) -> bool:
    """Whether a completion's generation ended because it reached its token budget: ``max_new`` tokens sampled,
    the last one not an end token, and no stop string ended it (``stopped``). The one rule of every local backend
    (``hf:`` serial and batched, ``llamacpp:`` slots and batched)."""
    return len(new) >= max_new and not (new and new[-1] in end_ids) and not stopped


def completion_to_message(text: str, prompt_tokens: int | None = None, completion_tokens: int | None = None,
                          *, truncated: bool | None = None) -> AssistantMessage:
    """A decoded Qwen3 completion as an :class:`AssistantMessage`: think → ``reasoning_content``, complete
    ``<tool_call>`` blocks → ``tool_calls`` (ids ``call_<upstream id>``, unique within the message), the remaining
    text → ``content``. Malformed blocks are dropped, as :func:`parse_qwen3` does; its notes on them go to
    ``parse_notes`` (logged by the gateway). ``truncated``: whether generation was cut at the token cap (None: not
    known)."""
    parsed = parse_qwen3(text)
    calls, seen = [], set()
    for i, call in enumerate(parsed.calls):
        call_id = f"call_{call['tool_call_id']}"
        if call_id in seen:
            call_id = f"{call_id}_{i}"
        seen.add(call_id)
        calls.append(ToolCall(id=call_id, name=call["name"], arguments=call["parameters"]))
    usage = None
    if prompt_tokens is not None and completion_tokens is not None:
        usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      total_tokens=prompt_tokens + completion_tokens)
    return AssistantMessage(content=parsed.response, reasoning_content=parsed.think or None, tool_calls=calls,
                            usage=usage, parse_notes=tuple(parsed.errors), truncated=truncated)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(content, ensure_ascii=False)


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as a chat template expects them: string content, decoded tool-call arguments."""
    out = []
    for m in messages:
        msg = {**m, "content": _text(m.get("content"))}
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or tc)
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"] or "{}")
                    except ValueError:
                        pass  # rendered verbatim by the template
                calls.append({"id": tc.get("id", ""), "type": "function", "function": fn})
            msg["tool_calls"] = calls
        out.append(msg)
    return out


template_messages = _template_messages
"""Public name: the training renderer (:mod:`shoparena.train.format`) prepares messages exactly as serving does."""


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                  enable_thinking: bool | None = None, compact: Any = None) -> str:
    """The prompt text a chat template makes of a conversation (with the generation prompt), after the
    checkpoint's observation compaction: the one rendering of every serving backend (``hf:``, ``llamacpp:``)."""
    extra = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    messages = compact_messages(messages, compact)
    return tokenizer.apply_chat_template(_template_messages(messages), tools=tools or None, tokenize=False,
                                         add_generation_prompt=True, **extra)


class HFBackend:
    """A local transformers model as a chat backend. ``name`` is the model directory's name; ``mode`` is
    ``serial`` or ``batched`` (module docstring; None: batched on CUDA, serial on a CPU)."""

    def __init__(self, path: str | Path, *, device: str | None = None, dtype: str | None = None,
                 max_new_tokens: int | None = None, mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ConfigError(f"hf: unknown mode {mode!r}", hint=f"modes: {', '.join(MODES)}")
        torch, transformers = _import_hf()
        self.path = Path(path).expanduser()
        if not (self.path / "config.json").is_file():
            raise NotFoundError(
                f"no transformers model at {self.path} (config.json missing)",
                hint="hf: takes a local model directory; fetch one with "
                     "`huggingface-cli download <repo> --local-dir DIR` or build a tiny one with build_tiny_qwen3",
            )
        self.name = self.path.name
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.mode = mode or ("batched" if self.device.startswith("cuda") else "serial")
        torch_dtype = getattr(torch, dtype, None) if dtype else (torch.bfloat16 if self.device != "cpu" else torch.float32)
        if not isinstance(torch_dtype, torch.dtype):
            raise ConfigError(f"hf: unknown dtype {dtype!r}", hint="e.g. float32, bfloat16, float16")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        if not self.tokenizer.chat_template:
            raise ConfigError(f"the tokenizer in {self.path} has no chat template",
                              hint="hf: needs a chat model (tokenizer_config.json / chat_template.jinja)")
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            self.path, local_files_only=True, dtype=torch_dtype).to(self.device)
        self.model.eval()
        # Per-turn cap: the argument, else the checkpoint's generation_config.json (prepared models set one).
        # A configured cap also bounds what a request asks for (the gateway fills max_tokens with the run's
        # whole token budget); without one, a request's max_tokens stands and DEFAULT_MAX_NEW_TOKENS is used
        # when it names none.
        self.turn_cap: int | None = max_new_tokens or getattr(self.model.generation_config, "max_new_tokens", None)
        self.max_new_tokens = self.turn_cap or DEFAULT_MAX_NEW_TOKENS
        self.compact = read_compact(self.path)  # the observation rendering the checkpoint was trained with
        self._lock = threading.Lock()
        self._torch = torch
        end = {self.tokenizer.convert_tokens_to_ids(t) for t in _END_MARKERS if t in self.tokenizer.get_vocab()}
        configured = self.model.generation_config.eos_token_id
        end |= set(configured if isinstance(configured, list) else [configured] if configured is not None else [])
        if self.tokenizer.eos_token_id is not None:
            end.add(self.tokenizer.eos_token_id)
        self.eos_token_ids = sorted(end)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.eos_token_ids[0]
        self._decoder: Any = None  # the batched mode's BatchedDecoder, made on the first request
        self._decoder_lock = threading.Lock()
        self._warned_seed = False

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
               enable_thinking: bool | None = None) -> str:
        """The prompt text the chat template makes of a conversation (with the generation prompt)."""
        return render_prompt(self.tokenizer, messages, tools, enable_thinking, self.compact)

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 sampling: Sampling | None = None) -> tuple[str, int, int]:
        """Blocking generation: ``(completion text, prompt tokens, completion tokens)``, by the backend's mode."""
        text, n_prompt, n_completion, _ = self.generate_turn(messages, tools, sampling)
        return text, n_prompt, n_completion

    def generate_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                      sampling: Sampling | None = None) -> Generation:
        """:meth:`generate` with whether the turn was cut at the token cap (:class:`Generation`)."""
        if self.mode == "batched":
            return self._generate_batched(messages, tools, sampling)
        return self._generate_rows([messages], tools, sampling)[0]

    def _max_new(self, n_prompt: int, sampling: Sampling) -> int:
        """The request's token budget: its ``max_tokens`` (else the default), under the turn cap and the context."""
        room = getattr(self.model.config, "max_position_embeddings", None)
        max_new = sampling.max_tokens or self.max_new_tokens
        if self.turn_cap is not None:
            max_new = min(max_new, self.turn_cap)
        if room is not None:
            max_new = min(max_new, room - n_prompt)
        if max_new < 1:
            raise ConfigError(f"the prompt ({n_prompt} tokens) fills the model's context ({room} tokens)")
        return max_new

    def decoder(self) -> Any:
        """The batched mode's :class:`~shoparena.llm.hf_batching.BatchedDecoder` (made on first use; its manager
        starts with the first request)."""
        with self._decoder_lock:
            if self._decoder is None:
                from shoparena.llm.hf_batching import BatchedDecoder

                self._decoder = BatchedDecoder(self.model, eos_token_ids=self.eos_token_ids)
            return self._decoder

    def generate_batched(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                         sampling: Sampling | None = None) -> tuple[str, int, int]:
        """:meth:`generate` through the shared continuous batch (module docstring): the caller waits for its own
        result while other callers' requests decode beside it."""
        text, n_prompt, n_completion, _ = self._generate_batched(messages, tools, sampling)
        return text, n_prompt, n_completion

    def _generate_batched(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                          sampling: Sampling | None) -> Generation:
        sampling = sampling or Sampling()
        prompt = self.render(messages, tools, sampling.enable_thinking)
        ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        max_new = self._max_new(len(ids), sampling)
        if sampling.temperature > 0 and sampling.seed is not None and not self._warned_seed:
            with self._decoder_lock:  # once, also when the first seeded requests arrive together
                first, self._warned_seed = not self._warned_seed, True
            if first:
                log.warning("hf: %s in batched mode does not honour sampling seeds: sampled text is not repeatable "
                            "(use ?mode=serial for seeded sampling)", self.name)
        stop = None
        if sampling.stop:
            stops = list(sampling.stop)

            def stop(tokens: list[int]) -> bool:  # streamed: checked after every new token
                text = self.tokenizer.decode(tokens, skip_special_tokens=False)
                return any(s in text for s in stops)

        check_abandoned()  # its run closed while it was being rendered
        row = self.decoder().generate(ids, max_new, temperature=sampling.temperature, top_p=sampling.top_p,
                                      stop=stop)
        return self._generation(row, len(ids), max_new, sampling.stop)

    def close(self) -> None:
        """Stop the batched mode's manager (requests in flight raise BackendError); a no-op in serial mode. The
        manager is also stopped at interpreter exit."""
        with self._decoder_lock:
            decoder = self._decoder
        if decoder is not None:
            decoder.close()

    def generate_batch(self, conversations: list[list[dict[str, Any]]], tools: list[dict[str, Any]] | None = None,
                       sampling: Sampling | None = None) -> list[tuple[str, int, int]]:
        """Several conversations in one left-padded ``generate`` call (one ``sampling`` for all): on a CPU a
        batch of 8 yields several times the tokens/s of 8 single calls. One row per conversation, as
        :meth:`generate` returns it; a ``seed`` makes the whole batch repeatable (rows draw from one RNG, so a
        row's sample depends on the batch it is in)."""
        return [(g.text, g.prompt_tokens, g.completion_tokens) for g in self._generate_rows(conversations, tools,
                                                                                            sampling)]

    def _generate_rows(self, conversations: list[list[dict[str, Any]]], tools: list[dict[str, Any]] | None,
                       sampling: Sampling | None) -> list[Generation]:
        if not conversations:
            return []
        sampling = sampling or Sampling()
        torch = self._torch
        prompts = [self.render(m, tools, sampling.enable_thinking) for m in conversations]
        inputs = self.tokenizer(prompts, return_tensors="pt", add_special_tokens=False, padding=True,
                                padding_side="left").to(self.device)
        width = int(inputs["input_ids"].shape[1])
        n_prompts = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]
        max_new = self._max_new(max(n_prompts), sampling)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new, "eos_token_id": self.eos_token_ids, "pad_token_id": self.pad_token_id,
        }
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if ABANDON.get() is not None:  # a gateway request: stop once its run closes (llm/abandon.py)
            kwargs["stopping_criteria"] = [_StopWhenAbandoned()]
        with self._lock, torch.inference_mode():
            check_abandoned()  # it waited for the model while its run closed
            if kwargs["do_sample"] and sampling.seed is not None:
                devices = [torch.device(self.device).index or 0] if self.device.startswith("cuda") else []
                with _RNG_LOCK, torch.random.fork_rng(devices=devices):
                    torch.manual_seed(sampling.seed)
                    out = self.model.generate(**inputs, **kwargs)
            else:
                out = self.model.generate(**inputs, **kwargs)
        check_abandoned()  # stopped part-way: no answer rather than a cut one
        return [self._generation(row, n_prompt, max_new, sampling.stop)
                for row, n_prompt in zip(out[:, width:].tolist(), n_prompts, strict=True)]

    def _generation(self, row: list[int], n_prompt: int, max_new: int, stop: list[str] | None) -> Generation:
        """A generated row as a :class:`Generation`: its completion ids, their text cut at the end marker or stop
        string, and whether the row ran into ``max_new`` (:func:`cut_at_cap`)."""
        new = self._completion_ids(row)
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        stopped = bool(stop) and any(s in text for s in stop or ())
        return Generation(clip_completion(text, stop), n_prompt, len(new),
                          cut_at_cap(new, max_new, self.eos_token_ids, stopped))

    def _completion_ids(self, row: list[int]) -> list[int]:
        """A generated row up to and including its first end token (a finished row of a batch is padded)."""
        end = set(self.eos_token_ids)
        for i, token in enumerate(row):
            if token in end:
                return row[: i + 1]
        while row and row[-1] == self.pad_token_id:
            row = row[:-1]
        return row

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        text, n_prompt, n_completion, cut = await asyncio.to_thread(self.generate_turn, messages, tools, sampling)
        return completion_to_message(text, n_prompt, n_completion, truncated=cut)

    def __repr__(self) -> str:
        return f"HFBackend({str(self.path)!r}, device={self.device!r}, mode={self.mode!r})"


def clip_completion(text: str, stop: list[str] | None) -> str:
    """Cut at the first end marker or stop string (neither is part of the answer)."""
    cut = len(text)
    for marker in (*_END_MARKERS, *(stop or ())):
        at = text.find(marker)
        if 0 <= at < cut:
            cut = at
    return text[:cut]


def parse_hf_uri(rest: str) -> tuple[Path, dict[str, Any]]:
    """``PATH[?mode=batched&device=cuda&dtype=bfloat16&max_new_tokens=256]`` → (path, options); an unknown or
    malformed option, or an unknown mode, is a ConfigError naming the accepted ones."""
    path, options = parse_path_uri("hf", rest, _OPTIONS)
    if options.get("mode", MODES[0]) not in MODES:
        raise ConfigError(f"hf: unknown mode {options['mode']!r}", hint=f"modes: {', '.join(MODES)}")
    return path, options


def from_uri(rest: str) -> ChatBackend:
    """The ``hf:`` scheme's factory (registered lazily in :data:`shoparena.llm.types.BACKENDS`)."""
    path, options = parse_hf_uri(rest)
    return HFBackend(path, **options)
