"""The one text format: masks proven on the tiny tokenizer over real corpus rows (docs/training.md §8, bugs #4/#5),
compact observations shared with the hf: backend, truncation counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import DataError
from shoparena.llm.compact import FORMAT_FILE, CompactConfig, compact_messages
from shoparena.train.format import FormatConfig, Sample, encode_rows, render_sample, validate_mask
from tests.train.conftest import TrainWorld


def _row(world: TrainWorld) -> dict[str, Any]:
    # a real multi-turn tool-call conversation: several assistant turns, tool results between them
    row = max(world.sft_rows, key=lambda r: sum(m["role"] == "assistant" for m in r["messages"]))
    assert sum(m["role"] == "assistant" for m in row["messages"]) >= 3
    assert any(m["role"] == "tool" for m in row["messages"])
    return row


def test_mask_trains_exactly_the_assistant_output(train_world: TrainWorld, tiny_tokenizer: Any) -> None:
    row = _row(train_world)
    sample = render_sample(tiny_tokenizer, row["messages"], row["tools"])
    report = validate_mask(tiny_tokenizer, sample)
    n_assistant = sum(m["role"] == "assistant" for m in row["messages"])
    tok = tiny_tokenizer
    ids, mask = sample.input_ids, sample.assistant_masks
    # the ids are the chat template's own tokens
    assert ids == tok(tok.apply_chat_template(
        [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                              for c in m.get("tool_calls", [])]} for m in row["messages"]],
        tools=json.loads(row["tools"]), tokenize=False), add_special_tokens=False)["input_ids"]
    im_start, im_end = tok.convert_tokens_to_ids("<|im_start|>"), tok.convert_tokens_to_ids("<|im_end|>")
    # every <|im_end|> closing an assistant turn is trained; those closing system / user / tool turns are not
    role, trained_ends, untrained_ends = None, 0, 0
    for i, t in enumerate(ids):
        if t == im_start:
            role = tok.decode(ids[i + 1:i + 8]).split("\n")[0]
            assert mask[i] == 0
        if t == im_end:
            if role == "assistant":
                assert mask[i] == 1
                trained_ends += 1
            else:
                assert mask[i] == 0
                untrained_ends += 1
    assert trained_ends == n_assistant == report.assistant_turns == report.end_of_turn_trained
    assert untrained_ends >= 2  # system and user (+ tool) turns exist and stay untrained
    trained = tok.decode([t for t, b in zip(ids, mask, strict=True) if b])
    for m in row["messages"]:
        quoted = any(m.get("content", "") in (a.get("reasoning_content") or "") for a in row["messages"])
        if m["role"] == "tool" and not quoted:  # (reasoning may quote a short result verbatim)
            assert m["content"] not in trained
        if m["role"] == "assistant" and m.get("reasoning_content"):
            assert m["reasoning_content"].strip()[:40] in trained
    assert "<tool_response>" not in trained and "# Tools" not in trained and "<|im_start|>" not in trained
    assert trained.count("<tool_call>") == sum(len(m.get("tool_calls", [])) for m in row["messages"])


def test_validate_mask_catches_broken_masks(train_world: TrainWorld, tiny_tokenizer: Any) -> None:
    row = _row(train_world)
    sample = render_sample(tiny_tokenizer, row["messages"], row["tools"])
    eot = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    last_end = max(i for i, (t, b) in enumerate(zip(sample.input_ids, sample.assistant_masks, strict=True))
                   if t == eot and b)
    no_stop = list(sample.assistant_masks)
    no_stop[last_end] = 0  # bug #5: the end-of-turn token untrained
    with pytest.raises(DataError, match="not assistant output"):
        validate_mask(tiny_tokenizer, Sample(sample.input_ids, no_stop, sample.text, sample.spans))
    user_trained = list(sample.assistant_masks)
    user_trained[3] = 1  # bug #4: a system-prompt token trained
    with pytest.raises(DataError):
        validate_mask(tiny_tokenizer, Sample(sample.input_ids, user_trained, sample.text, sample.spans))


def test_every_corpus_row_encodes_with_a_proven_mask(train_world: TrainWorld, tiny_tokenizer: Any) -> None:
    rows = train_world.sft_rows + train_world.eval_rows
    enc = encode_rows(tiny_tokenizer, rows, FormatConfig(max_length=100_000))  # validates every mask
    assert enc.counts["kept"] == len(rows) and enc.counts["unstable_turns"] == 0
    assert 0 < enc.counts["trained_tokens"] < enc.counts["tokens"]


def test_truncation_is_counted(train_world: TrainWorld, tiny_tokenizer: Any) -> None:
    rows = train_world.sft_rows
    lengths = [len(render_sample(tiny_tokenizer, r["messages"], r["tools"]).input_ids) for r in rows]
    cut = sorted(lengths)[len(lengths) // 2]
    over = sum(n > cut for n in lengths)
    assert 0 < over < len(rows)
    dropped = encode_rows(tiny_tokenizer, rows, FormatConfig(max_length=cut))
    assert dropped.counts["dropped_too_long"] == over and dropped.counts["kept"] == len(rows) - over
    kept = encode_rows(tiny_tokenizer, rows, FormatConfig(max_length=cut, truncation="keep_start"))
    assert kept.counts["truncated"] == over and kept.counts["kept"] == len(rows)
    assert max(len(s["input_ids"]) for s in kept.samples) == cut


def test_compact_rendering_is_the_one_the_hf_backend_serves(train_world: TrainWorld, tiny_model: Path,
                                                           tmp_path: Path) -> None:
    import shutil

    from shoparena.llm.hf_backend import HFBackend

    compact = CompactConfig(max_items=2, fields=("product_id", "title", "price"), max_chars=300)
    row = _row(train_world)
    tool = next(m for m in row["messages"] if m["role"] == "tool")
    short = compact_messages([tool], compact)[0]["content"]
    assert len(short) <= 300 < len(tool["content"])
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    (model / FORMAT_FILE).write_text(json.dumps({"compact": compact.model_dump(mode="json")}))
    backend = HFBackend(model)
    sample = render_sample(backend.tokenizer, row["messages"], row["tools"], compact=compact)
    last = max(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
    prompt = backend.render(row["messages"][:last], json.loads(row["tools"]))
    # what evaluation prompts the model with is exactly the trained context of that turn
    assert sample.text.startswith(prompt) and prompt.endswith("<|im_start|>assistant\n")
    assert len(prompt) == sample.spans[-1][0]
    assert short in prompt and tool["content"] not in prompt  # served compacted, as trained


def test_harness_system_turn_is_what_a_react_episode_is_prompted_with(train_world: TrainWorld,
                                                                      tiny_model: Path) -> None:
    """Corpus rows carry no system turn; ``system: harness`` trains them under the one every native-protocol
    episode sends, so the trained context of the first turn is exactly the first evaluation prompt."""
    from shoparena.env.prompts import NATIVE
    from shoparena.env.runner import EpisodeLoop
    from shoparena.env.types import EpisodeConfig
    from shoparena.llm.hf_backend import HFBackend
    from shoparena.train.format import with_system

    row = _row(train_world)
    assert row["messages"][0]["role"] == "user"
    loop = EpisodeLoop({"problem_id": "p", "query": row["messages"][0]["content"]}, None,
                       EpisodeConfig(protocol="native", profile="upstream4"))
    backend = HFBackend(tiny_model)
    first_prompt = backend.render(loop.native, loop.offered)
    sample = render_sample(backend.tokenizer, row["messages"], loop.offered, system="harness")
    assert sample.text[: sample.spans[0][0]] == first_prompt and NATIVE in first_prompt
    validate_mask(backend.tokenizer, sample)  # the system turn is context, never trained
    plain = render_sample(backend.tokenizer, row["messages"], loop.offered)
    assert NATIVE not in plain.text and sum(sample.assistant_masks) == sum(plain.assistant_masks)
    own = [{"role": "system", "content": "custom"}, *row["messages"]]
    assert with_system(own) is own and with_system(row["messages"], "row") is row["messages"]
    encoded = encode_rows(backend.tokenizer, [row], FormatConfig(max_length=100_000, system="harness"))
    assert encoded.samples[0]["input_ids"] == render_sample(backend.tokenizer, row["messages"], row["tools"],
                                                            system="harness").input_ids


def test_turn_budget_shortens_reasoning_and_leaves_turns_that_cannot_fit_untrained(train_world: TrainWorld,
                                                                                     tiny_tokenizer: Any) -> None:
    from shoparena.train.format import ELISION, _runs, fit_turns

    tok = tiny_tokenizer
    rows = [r for r in train_world.sft_rows if any(len(m.get("reasoning_content") or "") > 200 for m in r["messages"])]
    row = rows[0]
    whole = render_sample(tok, row["messages"], row["tools"])
    lengths = [b - a for a, b in _runs(whole.assistant_masks)]
    budget = sorted(lengths)[len(lengths) // 2]
    assert max(lengths) > budget  # some turns are over the budget
    config = FormatConfig(max_length=100_000, turn_tokens=budget)
    messages, sample, shortened, untrained = fit_turns(tok, row["messages"], row["tools"], config)
    assert shortened >= 1 and validate_mask(tok, sample).assistant_turns == len(lengths)
    fitted = [b - a for a, b in _runs(sample.assistant_masks)]
    assert all(n <= budget for k, n in enumerate(fitted) if k not in untrained)
    for before, after in zip(row["messages"], messages, strict=True):
        assert {k: v for k, v in before.items() if k != "reasoning_content"} == \
            {k: v for k, v in after.items() if k != "reasoning_content"}  # only reasoning changes
        if before.get("reasoning_content") != after.get("reasoning_content"):
            short = after["reasoning_content"]
            assert ELISION in short and 0 < len(short) < len(before["reasoning_content"])
    # encode_rows: the same fit, counted; untrained turns stay in the ids but out of the loss
    plain = encode_rows(tok, rows, FormatConfig(max_length=100_000))
    fit = encode_rows(tok, rows, config)
    assert fit.counts["turns_shortened"] >= 1 and fit.counts["rows_shortened"] >= 1
    assert max(b - a for s in plain.samples for a, b in _runs(s["assistant_masks"])) > budget
    assert max(b - a for s in fit.samples for a, b in _runs(s["assistant_masks"])) <= budget
    # a budget no tool call fits in: every turn stays as written, untrained; a row left with nothing is dropped
    tiny = FormatConfig(max_length=100_000, turn_tokens=16)
    _, same, n, untrained = fit_turns(tok, row["messages"], row["tools"], tiny)
    assert n == 0 and untrained == list(range(len(lengths))) and same.input_ids == whole.input_ids
    none = encode_rows(tok, rows, tiny)
    assert none.counts["dropped_turn_too_long"] == len(rows) and not none.samples
    assert none.counts["turns_untrained"] == sum(sum(m["role"] == "assistant" for m in r["messages"]) for r in rows)
