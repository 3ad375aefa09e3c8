"""The ``hf:`` backend's batched mode (one continuous-batching manager shared by concurrent requests) against its
serial path, and GRPO's ``sample_turns`` through continuous batching against its left-padded ``generate``.

The tiny Qwen3's random weights (std 0.02) make greedy decoding print one token forever, so every conversation would
"agree" whatever the batching did. These tests use a sharpened copy instead: the same architecture and tokenizer with
weights drawn at std 0.3 from a fixed seed, whose greedy continuations differ from conversation to conversation and
token to token; its generation config also names ``%`` — a token its continuations emit at varied positions — as an
end token, so some turns end early and others run to the cap. Everything is float32 on the CPU, where the paged
``sdpa`` attention and the padded one give the same greedy tokens; comparisons are of the exact text and token
counts (or ids)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from shoparena.errors import BackendError, ConfigError
from shoparena.llm.abandon import Abandoned, abandon_when
from shoparena.llm.hf_backend import HFBackend, completion_to_message, parse_hf_uri
from shoparena.llm.types import Sampling, get_backend
from tests.llm.conversations import CONVERSATIONS as SHARED
from tests.llm.conversations import TOOLS, USER

CAP = 48
# the shared conversations with a text turn and a follow-up inserted after the fifth
CONVERSATIONS = [*SHARED[:5], [*USER, {"role": "assistant", "content": "Let me search."},
                               {"role": "user", "content": "cheaper"}], *SHARED[5:]]


@pytest.fixture(scope="module")
def sharp_qwen3(tiny_qwen3: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 with its matrices redrawn (tests/sharp.py) and ``%`` as an extra end token."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.sharp import redraw

    out = tmp_path_factory.mktemp("sharp") / "sharp-qwen3"
    model = redraw(AutoModelForCausalLM.from_pretrained(tiny_qwen3, local_files_only=True))
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3, local_files_only=True)
    end = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>", "%")]
    model.generation_config.eos_token_id = end
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def serial(sharp_qwen3: Path) -> HFBackend:
    return HFBackend(sharp_qwen3, device="cpu", max_new_tokens=CAP, mode="serial")


@pytest.fixture(scope="module")
def batched(sharp_qwen3: Path) -> Iterator[HFBackend]:
    backend = HFBackend(sharp_qwen3, device="cpu", max_new_tokens=CAP, mode="batched")
    yield backend
    backend.close()


def _forwards(backend: HFBackend, on_call: Any = None) -> tuple[list[int], Any]:
    """A forward hook counting the model's forward passes (``on_call(n)`` after each, in the calling thread)."""
    calls: list[int] = []

    def hook(module: Any, args: Any, output: Any) -> None:
        calls.append(1)
        if on_call is not None:
            on_call(len(calls))

    return calls, backend.model.register_forward_hook(hook)


def _concurrently(backend: HFBackend, conversations: list[list[dict[str, Any]]], sampling: Sampling,
                  ) -> list[tuple[str, int, int]]:
    """Each conversation from its own thread, all released at once (as episodes in flight on one event loop)."""
    gate = threading.Barrier(len(conversations))

    def one(messages: list[dict[str, Any]]) -> tuple[str, int, int]:
        gate.wait()
        return backend.generate(messages, TOOLS, sampling)

    with ThreadPoolExecutor(len(conversations)) as pool:
        return list(pool.map(one, conversations))


def test_concurrent_batched_requests_give_the_serial_text(serial: HFBackend, batched: HFBackend) -> None:
    greedy = Sampling(temperature=0.0)
    alone = [serial.generate(c, TOOLS, greedy) for c in CONVERSATIONS]
    # the premise: distinct continuations, some ended by an end token before the cap, some cut at it
    assert len({text for text, _, _ in alone}) == len(CONVERSATIONS)
    assert any(n < CAP for _, _, n in alone) and any(n == CAP for _, _, n in alone)

    calls, hook = _forwards(batched)
    try:
        together = _concurrently(batched, CONVERSATIONS, greedy)
    finally:
        hook.remove()
    assert together == alone
    # they really shared batches: one at a time would take a forward pass per token per conversation
    assert len(calls) < sum(n for _, _, n in alone) // 2

    # parsed the same way as the serial path, through chat()
    async def chat_all() -> list[Any]:
        return await asyncio.gather(*(batched.chat(c, TOOLS, greedy) for c in CONVERSATIONS[:4]))

    replies = asyncio.run(chat_all())
    assert replies == [completion_to_message(*row) for row in alone[:4]]


def test_stop_strings_and_the_turn_cap_as_in_serial(serial: HFBackend, batched: HFBackend, sharp_qwen3: Path) -> None:
    greedy = Sampling(temperature=0.0)
    free = [serial.generate(c, TOOLS, greedy)[0] for c in CONVERSATIONS[:4]]
    for conversation, text in zip(CONVERSATIONS[:4], free, strict=True):
        stop = text[5:8]  # a string the continuation prints part-way
        assert stop.strip()
        sampling = Sampling(temperature=0.0, stop=[stop, "never printed"])
        cut = serial.generate(conversation, TOOLS, sampling)
        assert cut[0] == text[:text.index(stop)] and cut[2] < len(serial.tokenizer(text)["input_ids"])
        assert batched.generate(conversation, TOOLS, sampling) == cut
    # a request's max_tokens under the cap, and a backend with a smaller cap than the request asks for
    assert batched.generate(CONVERSATIONS[0], TOOLS, Sampling(max_tokens=5)) == \
        serial.generate(CONVERSATIONS[0], TOOLS, Sampling(max_tokens=5))
    small = HFBackend(sharp_qwen3, device="cpu", max_new_tokens=6, mode="batched")
    try:
        capped = _concurrently(small, CONVERSATIONS[:3], Sampling(max_tokens=500))
    finally:
        small.close()
    assert capped == [serial.generate(c, TOOLS, Sampling(max_tokens=6)) for c in CONVERSATIONS[:3]]
    assert all(n <= 6 for _, _, n in capped)


def test_sampling_in_batched_mode_runs_per_request_settings(batched: HFBackend,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """A sampled request and a greedy one share the manager; the greedy one still gets its greedy text. A seed is
    not honoured in batched mode, and the backend says so (once)."""
    greedy = batched.generate(CONVERSATIONS[1], TOOLS, Sampling(temperature=0.0))
    with caplog.at_level("WARNING", logger="shoparena.llm.hf_backend"), ThreadPoolExecutor(2) as pool:
        hot = [pool.submit(batched.generate, CONVERSATIONS[0], TOOLS, Sampling(temperature=1.5, top_p=0.9, seed=1))
               for _ in range(2)]
        cold = pool.submit(batched.generate, CONVERSATIONS[1], TOOLS, Sampling(temperature=0.0))
        assert cold.result() == greedy
        sampled = [future.result() for future in hot]
    assert all(1 <= n <= CAP for _, _, n in sampled)
    assert [r.message for r in caplog.records].count(
        "hf: sharp-qwen3 in batched mode does not honour sampling seeds: sampled text is not repeatable "
        "(use ?mode=serial for seeded sampling)") == 1


def test_an_abandoned_request_is_cancelled_and_the_others_finish(serial: HFBackend, batched: HFBackend) -> None:
    greedy = Sampling(temperature=0.0)
    # closed before it was submitted: it never reaches the model
    gone = threading.Event()
    gone.set()
    calls, hook = _forwards(batched)
    try:
        with abandon_when(gone), pytest.raises(Abandoned):
            asyncio.run(batched.chat(USER, TOOLS, greedy))
    finally:
        hook.remove()
    assert calls == []

    # closed part-way (after the 3rd forward pass of the manager): that request raises and leaves the batch, a
    # request decoding beside it still gets its whole serial answer
    long_one = CONVERSATIONS[1]
    assert serial.generate(long_one, TOOLS, greedy)[2] > 20  # the control runs well past where the run closes
    gone = threading.Event()
    calls, hook = _forwards(batched, on_call=lambda n: gone.set() if n == 3 else None)

    def abandoned_request() -> None:
        with abandon_when(gone), pytest.raises(Abandoned):
            asyncio.run(batched.chat(long_one, TOOLS, greedy))

    try:
        with ThreadPoolExecutor(2) as pool:
            dropped = pool.submit(abandoned_request)
            other = pool.submit(batched.generate, CONVERSATIONS[2], TOOLS, greedy)
            dropped.result()
            assert other.result() == serial.generate(CONVERSATIONS[2], TOOLS, greedy)
    finally:
        hook.remove()
    scheduler = batched.decoder()._manager.batch_processor.scheduler
    assert not scheduler.active_requests and not scheduler.waiting_requests  # cancelled, not left decoding
    assert batched.generate(long_one, TOOLS, greedy) == serial.generate(long_one, TOOLS, greedy)


def test_a_dying_manager_fails_its_callers_and_the_next_request_restarts_it(serial: HFBackend,
                                                                             sharp_qwen3: Path) -> None:
    backend = HFBackend(sharp_qwen3, device="cpu", max_new_tokens=CAP, mode="batched")
    greedy = Sampling(temperature=0.0)

    def broken(module: Any, args: Any, output: Any) -> None:
        raise RuntimeError("a device fault")

    try:
        hook = backend.model.register_forward_hook(broken)
        try:
            with pytest.raises(BackendError, match="a device fault"):
                _concurrently(backend, CONVERSATIONS[:3], greedy)
        finally:
            hook.remove()
        assert backend.generate(USER, TOOLS, greedy) == serial.generate(USER, TOOLS, greedy)
    finally:
        backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.generate(USER, TOOLS, greedy)


def test_mode_option_is_strict(sharp_qwen3: Path) -> None:
    assert parse_hf_uri(f"{sharp_qwen3}?mode=batched&max_new_tokens=8") == (sharp_qwen3, {"mode": "batched",
                                                                                          "max_new_tokens": 8})
    assert parse_hf_uri(str(sharp_qwen3)) == (sharp_qwen3, {})
    backend = get_backend(f"hf:{sharp_qwen3}?mode=serial&device=cpu")
    assert isinstance(backend, HFBackend) and backend.mode == "serial"
    assert HFBackend(sharp_qwen3, device="cpu").mode == "serial"  # the CPU default
    with pytest.raises(ConfigError, match="mode") as info:
        get_backend(f"hf:{sharp_qwen3}?mode=fast")
    assert info.value.hint == "modes: serial, batched"
    with pytest.raises(ConfigError, match="unknown option 'batch'") as info:
        get_backend(f"hf:{sharp_qwen3}?batch=8")
    assert info.value.hint == "options: mode, device, dtype, max_new_tokens"
    with pytest.raises(ConfigError, match="max_new_tokens"):
        parse_hf_uri(f"{sharp_qwen3}?max_new_tokens=many")
    with pytest.raises(ConfigError, match="mode"):
        HFBackend(sharp_qwen3, device="cpu", mode="parallel")


def test_sample_turns_batched_ids_are_the_left_padded_ids(sharp_qwen3: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.train.rollout import render_prompt_ids, sample_turns, turn_end_ids

    tokenizer = AutoTokenizer.from_pretrained(sharp_qwen3, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(sharp_qwen3, local_files_only=True, dtype=torch.float32).eval()
    eos_ids, pad = turn_end_ids(tokenizer, model)
    contexts = [render_prompt_ids(tokenizer, c, TOOLS) for c in CONVERSATIONS]
    budgets = [48, 12, 48, 10, 48, 30, 48, 48]
    padded = sample_turns(model, contexts, budgets, eos_ids, pad, 0.0, 1.0, batched=False)
    paged = sample_turns(model, contexts, budgets, eos_ids, pad, 0.0, 1.0, batched=True)
    assert paged == padded
    assert len({tuple(t) for t in padded}) == len(contexts)
    assert any(t[-1] in eos_ids for t in padded) and any(len(t) == b for t, b in zip(padded, budgets, strict=True))
    assert model.config._attn_implementation == "sdpa"  # the manager gave the model back as it was

    # sampled: a seeded caller gets the same turns again, another seed other turns; the caller's RNG moved on
    def sampled(seed: int) -> list[list[int]]:
        torch.manual_seed(seed)
        return sample_turns(model, contexts[:4], [20] * 4, eos_ids, pad, 1.0, 0.95, batched=True)

    first = sampled(7)
    after = torch.random.get_rng_state()
    assert sampled(7) == first and sampled(8) != first
    torch.manual_seed(7)
    sample_turns(model, contexts[:4], [20] * 4, eos_ids, pad, 1.0, 0.95, batched=True)
    assert torch.equal(torch.random.get_rng_state(), after)  # one draw for the manager's seed, nothing else
    assert all(1 <= len(t) <= 20 for t in first)


def test_a_cache_smaller_than_the_load_queues_requests_and_refuses_one_too_long(serial: HFBackend) -> None:
    """15 concurrent requests over a paged cache of two 256-token pages: they wait their turn (none fails, each gets
    its greedy ids); a request longer than the whole cache is refused before it reaches the manager."""
    import torch

    from shoparena.llm.hf_batching import BatchedDecoder

    words = "red dress violin bow earbuds shoes rice cooker phone case voucher budget shop hat mouse".split()
    prompts = [serial.tokenizer(serial.render([{"role": "user", "content": f"{w} please, request {i}"}]),
                                add_special_tokens=False)["input_ids"] for i, w in enumerate(words)]
    want = []
    with torch.inference_mode():
        for ids in prompts:
            row = serial.model.generate(torch.tensor([ids]), max_new_tokens=CAP, do_sample=False,
                                        eos_token_id=serial.eos_token_ids)[0, len(ids):].tolist()
            want.append(serial._completion_ids(row))
    decoder = BatchedDecoder(serial.model, eos_token_ids=serial.eos_token_ids, cache_tokens=512)
    gate = threading.Barrier(len(prompts))

    def one(ids: list[int]) -> list[int]:
        gate.wait()
        return decoder.generate(ids, CAP)

    try:
        with ThreadPoolExecutor(len(prompts)) as pool:
            got = list(pool.map(one, prompts))
        assert decoder.capacity == 512
        assert got == want
        with pytest.raises(ConfigError, match="exceed the paged cache"):
            decoder.generate(prompts[0], 512)
        assert decoder.generate(prompts[1], CAP) == want[1]  # the refusal left the manager serving
    finally:
        decoder.close()
