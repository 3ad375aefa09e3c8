"""The tiny Qwen3 builder, its chat template, and the ``hf:`` backend (generation, sampling, Qwen3 parsing)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from shoparena.errors import ConfigError, NotFoundError
from shoparena.llm.hf_backend import HFBackend, completion_to_message
from shoparena.llm.tiny import TEXT_TOKENS, build_tiny_qwen3
from shoparena.llm.types import Sampling, get_backend
from tests.llm.conversations import TOOLS, USER


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tiny_build_is_a_loadable_qwen3(tiny_qwen3: Path, hf_backend: HFBackend) -> None:
    config = json.loads((tiny_qwen3 / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["vocab_size"] == len(hf_backend.tokenizer)
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", *TEXT_TOKENS):
        assert len(hf_backend.tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert hf_backend.model.training is False
    assert hf_backend.name == "tiny-qwen3"


def test_same_seed_same_bytes(tiny_qwen3: Path, tmp_path: Path) -> None:
    again = build_tiny_qwen3(tmp_path / "again")
    other = build_tiny_qwen3(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(again / name) == _digest(tiny_qwen3 / name), name
    assert _digest(other / "model.safetensors") != _digest(tiny_qwen3 / "model.safetensors")
    assert _digest(other / "tokenizer.json") == _digest(tiny_qwen3 / "tokenizer.json")


def test_template_renders_tools_calls_results_and_thinking(hf_backend: HFBackend) -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": None, "reasoning_content": "search first",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "find_product", "arguments": '{"q": "red dress"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '[{"product_id": "1"}]'},
        {"role": "tool", "tool_call_id": "c2", "content": "[]"},
    ]
    text = hf_backend.render(messages, TOOLS, enable_thinking=False)
    assert text.startswith("<|im_start|>system\nYou are a shopping assistant.\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert ("<|im_start|>assistant\n<think>\nsearch first\n</think>\n\n<tool_call>\n"
            '{"name": "find_product", "arguments": {"q": "red dress"}}\n</tool_call><|im_end|>\n') in text
    assert ("<|im_start|>user\n<tool_response>\n[{\"product_id\": \"1\"}]\n</tool_response>\n"
            "<tool_response>\n[]\n</tool_response><|im_end|>\n") in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_template_thinking_default_and_history_without_reasoning(hf_backend: HFBackend) -> None:
    plain = hf_backend.render(USER)
    assert plain == ("<|im_start|>system\nYou are a shopping assistant.<|im_end|>\n"
                     "<|im_start|>user\na red floral dress under 700<|im_end|>\n<|im_start|>assistant\n")
    # an assistant turn before the last user query loses its think; content-embedded think is split off
    history = [*USER, {"role": "assistant", "content": "<think>old</think>\n\nhello"},
               {"role": "user", "content": "cheaper"}]
    text = hf_backend.render(history, enable_thinking=True)
    assert "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\ncheaper" in text
    assert "old" not in text


def test_greedy_is_deterministic(hf_backend: HFBackend) -> None:
    first = hf_backend.generate(USER, TOOLS, Sampling(max_tokens=12))
    assert first == hf_backend.generate(USER, TOOLS, Sampling(max_tokens=12))
    _, n_prompt, n_completion = first
    assert n_prompt == len(hf_backend.tokenizer(hf_backend.render(USER, TOOLS))["input_ids"])
    assert 1 <= n_completion <= 12


def test_batched_greedy_matches_one_at_a_time(hf_backend: HFBackend) -> None:
    short = [{"role": "user", "content": "hi"}]
    longer = [*USER, {"role": "assistant", "content": "Let me search."}, {"role": "user", "content": "cheaper"}]
    conversations = [USER, short, longer]
    alone = [hf_backend.generate(c, TOOLS, Sampling(max_tokens=12)) for c in conversations]
    batched = hf_backend.generate_batch(conversations, TOOLS, Sampling(max_tokens=12))
    assert [n for _, n, _ in batched] == [n for _, n, _ in alone]  # left padding is not counted as prompt
    assert len({n for _, n, _ in batched}) == 3  # the rows really were padded to one width
    assert batched == alone
    sampled = hf_backend.generate_batch(conversations, TOOLS, Sampling(temperature=1.0, seed=3, max_tokens=12))
    assert sampled == hf_backend.generate_batch(conversations, TOOLS, Sampling(temperature=1.0, seed=3,
                                                                                max_tokens=12))
    assert hf_backend.generate_batch([], TOOLS) == []


def test_seeded_sampling_repeats_and_seeds_differ(hf_backend: HFBackend) -> None:
    def run(seed: int) -> str:
        return hf_backend.generate(USER, None, Sampling(temperature=1.0, seed=seed, max_tokens=24))[0]

    assert run(7) == run(7)
    assert len({run(seed) for seed in (1, 2, 3)}) == 3


def test_stop_strings_end_and_are_cut(hf_backend: HFBackend) -> None:
    free, _, _ = hf_backend.generate(USER, None, Sampling(temperature=1.0, seed=5, max_tokens=24))
    stop = next(ch for ch in free[3:] if ch.isalpha())
    text, _, n = hf_backend.generate(USER, None, Sampling(temperature=1.0, seed=5, max_tokens=24, stop=[stop]))
    assert stop not in text and free.startswith(text)
    assert n < 24


def test_chat_runs_off_loop_and_reports_usage(hf_backend: HFBackend) -> None:
    async def main() -> list:
        return await asyncio.gather(*(hf_backend.chat(USER, TOOLS, Sampling(max_tokens=8)) for _ in range(3)))

    replies = asyncio.run(main())
    assert replies[0] == replies[1] == replies[2]
    usage = replies[0].usage
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_completion_parsing_think_calls_and_text() -> None:
    text = ('<think>\nI should search.\n</think>\n\nLet me look.\n<tool_call>\n{"name": "find_product", '
            '"arguments": {"q": "red dress"}}\n</tool_call>\n<tool_call>\n{"name": "find_product", '
            '"arguments": {"q": "red dress"}}\n</tool_call>\n<tool_call>\n{bad json}\n</tool_call>')
    msg = completion_to_message(text, 10, 5)
    assert msg.reasoning_content == "I should search."
    assert msg.content == "Let me look."
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("find_product", {"q": "red dress"})] * 2
    assert len({c.id for c in msg.tool_calls}) == 2 and all(c.id.startswith("call_") for c in msg.tool_calls)
    assert msg.usage is not None and msg.usage.total_tokens == 15
    # the pre-filled think of Qwen3 thinking models: no opening tag in the completion
    assert completion_to_message("plan</think>\n\nok").reasoning_content == "plan"


def test_missing_model_is_a_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"config\.json"):
        HFBackend(tmp_path / "nowhere")


def test_hf_uri_resolves_through_the_registry(tiny_qwen3: Path) -> None:
    backend = get_backend(f"hf:{tiny_qwen3}")
    assert isinstance(backend, HFBackend) and backend.name == "tiny-qwen3"


def test_missing_torch_is_a_config_error_with_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ConfigError, match="torch") as info:
        HFBackend(tmp_path)
    assert info.value.hint == "pip install 'shoparena[hf]'"


def _count_forwards(backend: HFBackend, on_call=None) -> tuple[list[int], object]:
    """A forward hook counting the model's forward passes (calling ``on_call(n)`` after each)."""
    calls: list[int] = []

    def hook(module, args, output) -> None:
        calls.append(1)
        if on_call is not None:
            on_call(len(calls))

    return calls, backend.model.register_forward_hook(hook)


def test_a_request_whose_run_closed_while_it_waited_never_runs_the_model(hf_backend: HFBackend) -> None:
    import threading

    from shoparena.llm.abandon import Abandoned, abandon_when

    gone = threading.Event()
    gone.set()
    calls, hook = _count_forwards(hf_backend)
    try:
        with abandon_when(gone), pytest.raises(Abandoned):
            asyncio.run(hf_backend.chat(USER, TOOLS, Sampling(temperature=0.0, max_tokens=16)))
    finally:
        hook.remove()
    assert calls == []


def test_a_generation_stops_at_the_next_token_once_its_run_closes(hf_backend: HFBackend) -> None:
    """llm/abandon.py: the run closes after the 3rd forward pass (prefill + 2 tokens); the generation stops there and
    raises instead of returning a cut answer. Without the event the same request runs on (the control)."""
    import threading

    from shoparena.llm.abandon import Abandoned, abandon_when

    greedy = Sampling(temperature=0.0, max_tokens=24)
    calls, hook = _count_forwards(hf_backend)
    try:
        _, _, n_control = hf_backend.generate(USER, TOOLS, greedy)  # no gateway request: no abandon event
    finally:
        hook.remove()
    assert n_control > 4 and len(calls) >= n_control  # the control really runs past where the run closes below

    gone = threading.Event()
    calls, hook = _count_forwards(hf_backend, on_call=lambda n: gone.set() if n == 3 else None)
    try:
        with abandon_when(gone), pytest.raises(Abandoned):
            asyncio.run(hf_backend.chat(USER, TOOLS, greedy))  # through to_thread, as the gateway calls it
    finally:
        hook.remove()
    assert len(calls) == 3
    assert hf_backend.generate(USER, TOOLS, greedy)[2] == n_control  # the model is free and unchanged afterwards
