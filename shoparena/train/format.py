"""The one text format of training: a conversation (OpenAI messages: ``reasoning_content``, ``tool_calls`` with
JSON-string arguments, ``role: "tool"`` results) + tools → token ids + assistant mask, rendered by the tokenizer's
own chat template exactly as the ``hf:`` backend renders prompts at rollout and evaluation time (same message
preparation, :func:`shoparena.llm.hf_backend.template_messages`; same optional observation compaction,
:func:`shoparena.llm.compact.compact_messages`).

The mask comes from rendering message prefixes: assistant turn *i* spans the text of ``render(msgs[:i+1])`` beyond
``render(msgs[:i], add_generation_prompt=True)``, and the generation prompt must be a prefix of the full rendering
(prefix stability: what the model is trained to continue is what it is prompted with). :func:`validate_mask`
proves a sample (docs/training.md §8, bugs #4/#5): every trained token decodes to assistant output (think + content +
tool calls), every assistant ``<|im_end|>`` is trained, nothing of the system / user / tool text is.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena.env.turns import open_callless_turns
from shoparena.errors import DataError
from shoparena.llm.compact import CompactConfig, compact_messages
from shoparena.llm.hf_backend import template_messages

__all__ = [
    "END_OF_TURN", "EncodedRows", "FormatConfig", "MaskReport", "Sample", "encode_rows", "fit_turns",
    "parse_tools", "render_sample", "validate_mask", "with_system",
]

END_OF_TURN = "<|im_end|>"


class FormatConfig(BaseModel):
    """How rows become training samples. ``truncation``: rows over ``max_length`` tokens are dropped or cut to
    their first ``max_length`` tokens (``keep_start``); either way they are counted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_length: int = Field(2048, ge=16)
    truncation: Literal["drop", "keep_start"] = "drop"
    compact: CompactConfig | None = None
    system: Literal["row", "harness"] = "row"
    """``harness``: a row without a system turn gets the one the harness's native protocol sends
    (:data:`shoparena.env.prompts.NATIVE`, what ``react`` and every native-protocol episode is prompted with), so
    training renders the prompt evaluation and rollouts render. ``row``: rows as they are."""
    turn_tokens: int | None = Field(None, ge=16)
    """The longest assistant turn (think + tool calls + end of turn, in tokens) a sample may teach: the serving cap
    per turn (the checkpoint's ``generation_config.json`` ``max_new_tokens``). A longer turn is one the model can
    never finish when served (it is cut before its tool call, and the episode loops), so its reasoning is
    shortened, middle sentences first (:func:`fit_turns`); a turn that does not fit even so (its tool calls alone
    are too long) stays in the sample as context but out of the loss. ``None``: turns as they are."""
    callless_turns: Literal["drop", "keep"] = "keep"
    """A row with a trained assistant turn that makes no tool call while the episode is open (it ends a thought
    without its call, :func:`shoparena.env.turns.open_callless_turns`) teaches the think-then-stop turn evaluation
    counts (a decision stated, no call made, the episode waits for a call that never comes): ``drop`` leaves such
    rows out (counted ``dropped_callless_turn``); ``keep`` trains them as they are (counted, ``rows_callless``).
    A callless turn left out of the loss (:attr:`turn_tokens`) or after a ``terminate`` call does not count."""


def with_system(messages: list[dict[str, Any]], system: str = "harness") -> list[dict[str, Any]]:
    """``messages`` with the harness's native system turn in front when they have none (``system="harness"``)."""
    from shoparena.env.prompts import NATIVE

    if system != "harness" or (messages and isinstance(messages[0], dict) and messages[0].get("role") == "system"):
        return messages
    return [{"role": "system", "content": NATIVE}, *messages]


@dataclass(frozen=True)
class Sample:
    """One rendered conversation: token ids, the assistant mask (1 = trained), the text and the character spans of
    the assistant output (think + content + tool calls + ``<|im_end|>``) in it."""

    input_ids: list[int]
    assistant_masks: list[int]
    text: str
    spans: list[tuple[int, int]]
    unstable_turns: int = 0
    """Assistant turns whose own rendering is not a prefix of the full one (the Qwen3 template drops an empty
    think block from turns before the last); their span ends at their ``<|im_end|>`` in the full text."""


@dataclass(frozen=True)
class MaskReport:
    trained_tokens: int
    assistant_turns: int
    end_of_turn_trained: int


@dataclass
class EncodedRows:
    """Encoded samples (``input_ids`` + ``assistant_masks``) and what happened to every row."""

    samples: list[dict[str, list[int]]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def parse_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Tools as the chat template wants them: a list (corpus rows carry a JSON string)."""
    if tools is None or tools == "":
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError as exc:
            raise DataError(f"tools is not valid JSON: {exc}") from exc
    if not isinstance(tools, list):
        raise DataError(f"tools must be a list of tool specs, got {type(tools).__name__}")
    return tools or None


def tool_names(tools: Any) -> tuple[str, ...]:
    """The sorted names of a row's tools (``()`` for none); :class:`DataError` when they are malformed."""
    names = []
    for spec in parse_tools(tools) or []:
        fn = spec.get("function", spec) if isinstance(spec, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            raise DataError("a tool spec has no function name")
        names.append(name)
    return tuple(sorted(names))


def _render(tokenizer: Any, msgs: list[dict[str, Any]], tools: list[dict[str, Any]] | None, gen: bool) -> str:
    return tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=gen)


def render_sample(tokenizer: Any, messages: list[dict[str, Any]], tools: Any = None, *,
                  compact: CompactConfig | None = None, system: str = "row") -> Sample:
    """Render one conversation and compute its assistant mask from message prefixes (module docstring);
    ``system``: see :attr:`FormatConfig.system`."""
    if not isinstance(messages, list) or not messages:
        raise DataError("a training row needs a non-empty messages list")
    tool_list = parse_tools(tools)
    msgs = template_messages(compact_messages(with_system(messages, system), compact))
    full = _render(tokenizer, msgs, tool_list, False)
    spans: list[tuple[int, int]] = []
    unstable = 0
    for i, m in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        prefix = _render(tokenizer, msgs[:i], tool_list, True) if i else None
        if prefix is None or not full.startswith(prefix):
            where = "the conversation starts with an assistant turn" if prefix is None else \
                "its generation prompt is not a prefix of the full rendering"
            raise DataError(f"assistant turn {i} cannot be trained: {where} (the chat template is not prefix-stable "
                            "here; split multi-query conversations per user query)")
        start = len(prefix)
        own = _render(tokenizer, msgs[: i + 1], tool_list, False)
        end_at = own.rfind(END_OF_TURN)
        if full.startswith(own) and end_at >= start:
            end = end_at + len(END_OF_TURN)
        else:
            unstable += 1
            at = full.find(END_OF_TURN, start)
            if at < 0:
                raise DataError(f"assistant turn {i} has no {END_OF_TURN} in the rendering")
            end = at + len(END_OF_TURN)
        spans.append((start, end))
    if not spans:
        raise DataError("the conversation has no assistant turn to train on")
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    mask = [0] * len(ids)
    k = 0
    for t, (s, e) in enumerate(enc["offset_mapping"]):
        while k < len(spans) and s >= spans[k][1]:
            k += 1
        if k < len(spans) and s >= spans[k][0] and e <= spans[k][1] and e > s:
            mask[t] = 1
    return Sample(input_ids=ids, assistant_masks=mask, text=full, spans=spans, unstable_turns=unstable)


def _runs(mask: list[int]) -> list[tuple[int, int]]:
    runs, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    return runs


def validate_mask(tokenizer: Any, sample: Sample) -> MaskReport:
    """Prove ``sample``'s mask or raise :class:`DataError` saying what is wrong: the trained runs decode, in order,
    to exactly the assistant spans (so every trained token is assistant output and nothing of the system / user /
    tool text is), and each run ends with a trained ``<|im_end|>``."""
    if len(sample.input_ids) != len(sample.assistant_masks):
        raise DataError("mask and ids differ in length")
    runs = _runs(sample.assistant_masks)
    expected = [sample.text[s:e] for s, e in sample.spans]
    got = [tokenizer.decode(sample.input_ids[a:b], skip_special_tokens=False) for a, b in runs]
    if got != expected:
        bad = next((i for i, (g, x) in enumerate(zip(got, expected, strict=False)) if g != x), min(len(got),
                                                                                                   len(expected)))
        g = got[bad] if bad < len(got) else None
        x = expected[bad] if bad < len(expected) else None
        raise DataError(f"mask run {bad} is not assistant output: trained {g!r:.120} where the assistant wrote "
                        f"{x!r:.120} ({len(got)} trained runs, {len(expected)} assistant turns)")
    eot = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    ends = sum(1 for a, b in runs if sample.input_ids[b - 1] == eot)
    if ends != len(runs):
        raise DataError(f"{len(runs) - ends} assistant turns do not end with a trained {END_OF_TURN}")
    trained_eot = sum(1 for i, bit in zip(sample.input_ids, sample.assistant_masks, strict=True) if bit and i == eot)
    return MaskReport(trained_tokens=sum(sample.assistant_masks), assistant_turns=len(runs),
                      end_of_turn_trained=trained_eot)


_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+")
ELISION = "…"
_MIN_REASONING = 8
"""Fewer reasoning tokens than this and a turn is not shortened but left untrained (:func:`fit_turns`)."""


def _n_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _shorten(tokenizer: Any, text: str, target: int) -> str:
    """``text`` in at most about ``target`` tokens: its first sentence, an elision and as many of its last
    sentences as fit (the reasoning's conclusion, the one its tool call acts on); failing that, its last tokens."""
    if target <= 0:
        return ""
    sentences = [x for x in _SENTENCE_END.split(text.strip()) if x]
    if len(sentences) >= 3:
        tail: list[str] = []
        for sentence in reversed(sentences[1:]):
            if _n_tokens(tokenizer, " ".join([sentences[0], ELISION, sentence, *tail])) > target:
                break
            tail.insert(0, sentence)
        if tail:
            return " ".join([sentences[0], ELISION, *tail])
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    end = tokenizer.decode(ids[len(ids) - max(1, target - 1):], skip_special_tokens=True)
    return ELISION + end.lstrip()


def fit_turns(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, config: FormatConfig,
              sample: Sample | None = None) -> tuple[list[dict[str, Any]], Sample, int, list[int]]:
    """``(messages, sample, turns shortened, turns left untrained)`` for :attr:`FormatConfig.turn_tokens`: the
    reasoning of every assistant turn longer than the budget is shortened until the turn fits; a turn that cannot
    fit (its tool calls alone, with a few tokens of reasoning, are over the budget) keeps its text and is returned
    by index among the assistant turns, to be left out of the loss (context only). ``sample``: ``messages``
    already rendered."""
    budget = config.turn_tokens

    def render(msgs: list[dict[str, Any]]) -> Sample:
        return render_sample(tokenizer, msgs, tools, compact=config.compact, system=config.system)

    sample = sample if sample is not None else render(messages)
    if budget is None:
        return messages, sample, 0, []
    assistant = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    original = list(messages)
    shortened: set[int] = set()
    hopeless: set[int] = set()
    for attempt in range(9):
        lengths = [b - a for a, b in _runs(sample.assistant_masks)]
        if len(lengths) != len(assistant):
            raise DataError(f"{len(lengths)} trained runs for {len(assistant)} assistant turns: turns cannot be fitted")
        over = [(k, n) for k, n in enumerate(lengths) if n > budget and k not in hopeless]
        if not over:
            break
        if attempt == 8:
            raise DataError(f"the assistant turns do not fit in {budget} tokens")
        messages = list(messages)
        for k, n in over:
            reasoning = messages[assistant[k]].get("reasoning_content") or ""
            target = _n_tokens(tokenizer, reasoning) - (n - budget) - 1 if reasoning else 0
            if target < _MIN_REASONING:
                hopeless.add(k)
                messages[assistant[k]] = original[assistant[k]]  # kept as written, as context
                continue
            messages[assistant[k]] = {**messages[assistant[k]], "reasoning_content": _shorten(tokenizer, reasoning,
                                                                                              target)}
            shortened.add(k)
        sample = render(messages)
    return messages, sample, len(shortened - hopeless), sorted(hopeless)


def _count_callless(counts: Counter[str], turns: int, *, dropped: bool) -> None:
    counts["rows_callless"] += 1
    counts["callless_turns_trained"] += turns
    if dropped:
        counts["dropped_callless_turn"] += 1


def encode_rows(tokenizer: Any, rows: Iterable[dict[str, Any]], config: FormatConfig, *,
                validate: bool = True) -> EncodedRows:
    """Rows ``{"messages", "tools"}`` → samples, every mask validated. Counts: ``rows``, ``kept``,
    ``dropped_too_long``, ``truncated``, ``dropped_unrenderable`` (a :class:`DataError` from rendering),
    ``unstable_turns``, ``tokens``, ``trained_tokens``; with ``turn_tokens``: ``turns_shortened``,
    ``rows_shortened``, ``turns_untrained`` (left out of the loss) and ``dropped_turn_too_long`` (no turn left to
    train). Rows with a trained callless turn (:attr:`FormatConfig.callless_turns`): ``rows_callless`` and
    ``callless_turns_trained`` (their trained callless turns), ``dropped_callless_turn`` when they are dropped."""
    out = EncodedRows()
    drop_callless = config.callless_turns == "drop"
    for row in rows:
        out.counts["rows"] += 1
        messages = row.get("messages")
        callless = open_callless_turns(messages) if isinstance(messages, list) else []
        if callless and drop_callless and config.turn_tokens is None:  # every turn is trained: drop unrendered
            _count_callless(out.counts, len(callless), dropped=True)
            continue
        try:
            sample = render_sample(tokenizer, messages, row.get("tools"), compact=config.compact,
                                   system=config.system)
        except DataError:
            out.counts["dropped_unrenderable"] += 1
            continue
        untrained: list[int] = []
        if config.turn_tokens is not None:
            try:
                _, sample, n, untrained = fit_turns(tokenizer, row["messages"], row.get("tools"), config, sample)
            except DataError:
                out.counts["dropped_unrenderable"] += 1
                continue
            out.counts["turns_shortened"] += n
            out.counts["rows_shortened"] += n > 0
            out.counts["turns_untrained"] += len(untrained)
        trained_callless = [k for k in callless if k not in untrained]
        if trained_callless:
            _count_callless(out.counts, len(trained_callless), dropped=drop_callless)
            if drop_callless:
                continue
        if validate:
            validate_mask(tokenizer, sample)
        ids, mask = sample.input_ids, sample.assistant_masks
        if untrained:  # turns the model could never finish when served: context, not targets
            runs = _runs(mask)
            mask = list(mask)
            for k in untrained:
                a, b = runs[k]
                mask[a:b] = [0] * (b - a)
            if not any(mask):
                out.counts["dropped_turn_too_long"] += 1
                continue
        if len(ids) > config.max_length:
            if config.truncation == "drop":
                out.counts["dropped_too_long"] += 1
                continue
            ids, mask = ids[: config.max_length], mask[: config.max_length]
            out.counts["truncated"] += 1
            if not any(mask):
                out.counts["dropped_too_long"] += 1
                continue
        out.counts["kept"] += 1
        out.counts["unstable_turns"] += sample.unstable_turns
        out.counts["tokens"] += len(ids)
        out.counts["trained_tokens"] += sum(mask)
        out.samples.append({"input_ids": ids, "assistant_masks": mask})
    return out
