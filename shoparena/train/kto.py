"""Stage 4: KTO on per-turn rows (``docs/training.md`` §3, §4.3) with the ``recommend_product`` emission-rate early stop.

Input: the corpus's ``kto.jsonl`` rows — unpaired ``prompt`` (every message before the judged assistant turn),
``completion`` (that one turn: TRL trains every completion token), ``label`` (desirable = a turn of a strictly
successful agentic trace, undesirable = a turn of a failed or sub-task trace), ``tools`` as a JSON string.
:func:`kto_rows` checks them and :func:`class_weights` turns the class balance into TRL's
``desirable_weight`` / ``undesirable_weight`` (the minority class up-weighted so ``λ_D·n_D = λ_U·n_U``, inside
TRL's recommended ``[1, 4/3]`` ratio). A recipe may keep one tool profile (``tools``), fit every assistant turn
to the serving cap as SFT does (``turn_tokens``, :func:`fit_kto_turns`) and take a seeded, label-balanced
subsample (``max_rows``, :func:`balanced_subsample`) — how the ``cpu-mini`` recipe fits a CPU's budget. A judged turn
that makes no tool call while the episode is open is never desirable (``callless_turns``), and the undesirable turns
that call given tools can be left out (``undesirable_exclude``; both :func:`turn_filter`).

Training: TRL ``KTOTrainer`` with a PEFT LoRA on q/k/v/o (r 16; the reference is the adapter-disabled model, so
the input checkpoint must already hold the previous stage's merged weights), ``use_cpu`` / fp32 on a CPU,
checkpoints every ``save_steps`` under ``out_dir/checkpoints`` (``resume=True`` continues from the newest), the
adapter merged into ``out_dir/model``.

Early stop (the paper's rule): :func:`emission_stop`'s callback samples a fixed probe set every ``probe_every`` steps — the
prompts at which a teacher turn recommended (``recommend_product`` in the completion) — under ``model.eval()`` +
``torch.no_grad()`` (train mode restored after) and stops training when the share of probe prompts whose sampled
turn holds a parseable ``recommend_product`` call falls below ``probe_threshold`` (0.9). The rate function is
injectable (``rate_fn``) so the rule can be tested without a model that recommends. ``probe_sampler: llamacpp``
samples the probe turns from an exported copy of the current policy through llama.cpp's batched engine, all at once
(:class:`EmissionProbe`'s ``sampler``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from shoparena.errors import DataError
from shoparena.train.trainer import StageProgress
from shoparena.train.types import LearningRate, LoraConfig, StageConfig, StageResult, ToolProfile

__all__ = ["ATTENTION_TARGETS", "PROBE_SAMPLER_DIR", "EmissionProbe", "KTOConfig", "balanced_subsample",
           "class_weights", "emission_stop", "fit_kto_turns", "fitting_rows", "kto_rows", "probe_prompts", "row_tokens",
           "train_kto", "turn_filter"]

ATTENTION_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
PROBE_SAMPLER_DIR = "probe-sampler"
"""Under the stage's out dir: the llama.cpp probe sampler's GGUF of the policy (removed when the stage ends)."""
RECOMMEND = "recommend_product"


def _excluded_tools(v: tuple[str, ...]) -> tuple[str, ...]:
    from shoparena.env.output import known_tools

    unknown = sorted(set(v) - known_tools())
    if unknown or len(set(v)) != len(v):
        raise ValueError("undesirable_exclude must be distinct registered tool names"
                         + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return v


ExcludedTools = Annotated[tuple[str, ...], AfterValidator(_excluded_tools)]
"""Tool names a stage leaves out of a class: distinct registered names, possibly none."""


class KTOConfig(StageConfig):
    """Stage 4's settings; the defaults are the recipe's (``docs/training.md`` §3 row 4)."""

    learning_rate: LearningRate = 5e-6
    epochs: float = Field(1.0, gt=0)
    batch_size: int = Field(4, ge=2)
    """≥ 2: TRL's KL estimate pairs each prompt with a neighbour's completion inside the batch."""
    max_length: int = Field(14336, ge=16)
    lora: LoraConfig | None = Field(default_factory=lambda: LoraConfig(r=16, alpha=32, dropout=0.0,
                                                                      target_modules=ATTENTION_TARGETS))
    beta: float = Field(0.02, gt=0)
    loss_type: Literal["kto", "apo_zero_unpaired"] = "kto"
    desirable_weight: float | None = Field(None, gt=0)
    """None: from the class balance (:func:`class_weights`)."""
    undesirable_weight: float | None = Field(None, gt=0)
    probe_every: int = Field(10, ge=1)
    """Measure the emission rate every N optimiser steps."""
    probe_size: int = Field(8, ge=1)
    probe_threshold: float = Field(0.9, ge=0.0, le=1.0)
    """Stop when the ``recommend_product`` emission rate falls below this."""
    probe_max_new_tokens: int = Field(256, ge=1)
    probe_temperature: float = Field(0.7, ge=0.0)
    probe_top_p: float = Field(0.95, gt=0.0, le=1.0)
    probe_sampler: Literal["hf", "llamacpp"] = "hf"
    """Who samples the probe turns: ``hf`` — the training model through transformers ``generate``; ``llamacpp`` — an
    exported copy of the current policy (LoRA merged, ``probe_sampler_dtype``) through llama.cpp's batched engine,
    every probe prompt at once (:mod:`shoparena.train.rollout_llamacpp`; llama checkpoints; faster on a CPU)."""
    probe_sampler_dtype: Literal["F32", "F16", "Q8_0"] = "F16"
    probe_sampler_mode: Literal["batched", "slots"] = "batched"
    """``llamacpp``: one batched engine for the probe set, or an engine per probe prompt (``slots``: the rates, and
    so the step the probe stops at, repeat byte for byte; GRPO's ``sampler_mode``)."""
    system: Literal["row", "harness"] = "row"
    """``harness``: prompts without a system turn get the harness's native one (as SFT's ``system``)."""
    tools: ToolProfile = None
    """Only rows that offer exactly these tools (SFT's ``tools``: the profile the input checkpoint was trained on)."""
    turn_tokens: int | None = Field(None, ge=16)
    """The serving cap per turn (SFT's ``turn_tokens``): every assistant turn of a row, the prompt's and the judged
    one, has its reasoning shortened until it fits (:func:`~shoparena.train.format.fit_turns`); a row whose judged
    turn cannot fit is left out (the model could never emit it when served)."""
    max_rows: int | None = Field(None, ge=2)
    """A seeded subsample of at most this many rows, half of each label where both have enough (a CPU budget);
    ``None``: every row."""
    callless_turns: Literal["drop", "keep"] = "drop"
    """A desirable row whose judged turn makes no tool call while the episode is open (it ends a thought without its
    call, :func:`shoparena.env.turns.open_callless_turns`) is never desirable: ``drop`` leaves it out (counted
    ``dropped_desirable_callless``); ``keep`` trains it as labelled. Undesirable callless rows stay: they push the
    stop-without-a-call down."""
    undesirable_exclude: ExcludedTools = ()
    """Tool names: an undesirable row whose judged turn calls one of them is left out (counted
    ``undesirable_excluded``). ``[recommend_product]`` ablates a failed trace's final recommend turn (its reasoning
    states the decision, then the call), which as an undesirable target may push down the call that follows such a
    thought. Registered tool names, each once."""


def kto_rows(rows: Iterable[dict[str, Any]], *, system: str = "row", compact: Any = None) -> list[dict[str, Any]]:
    """The trainer's columns of ``kto.jsonl`` rows (``prompt``, ``completion``, ``label``, ``tools`` as a JSON
    string), checked: a bad row raises :class:`DataError` naming it. Prompts are rendered as the model is served:
    ``system="harness"`` puts the harness's native system turn in front of a prompt without one, ``compact`` (the
    input checkpoint's observation compaction) shortens tool results exactly as its backend does."""
    from shoparena.llm.compact import compact_messages
    from shoparena.train.format import with_system

    out = []
    for n, row in enumerate(rows):
        where = f"KTO row {row.get('id', n)!r}" if isinstance(row, dict) else f"KTO row {n}"
        if not isinstance(row, dict) or not {"prompt", "completion", "label"} <= row.keys():
            raise DataError(f"{where} lacks prompt / completion / label", hint="pass the corpus's kto.jsonl rows")
        if not isinstance(row["label"], bool):
            raise DataError(f"{where}: label must be true or false, not {row['label']!r}")
        completion = row["completion"]
        if not (isinstance(completion, list) and len(completion) == 1 and completion[0].get("role") == "assistant"):
            raise DataError(f"{where}: completion must be exactly the judged assistant turn")
        if not isinstance(row["prompt"], list) or not row["prompt"]:
            raise DataError(f"{where}: prompt must be a non-empty message list")
        tools = row.get("tools")
        prompt = compact_messages(with_system(row["prompt"], system), compact)
        out.append({"prompt": prompt, "completion": completion, "label": row["label"],
                    "tools": tools if isinstance(tools, str) or tools is None else json.dumps(tools)})
    if not out:
        raise DataError("no KTO rows", hint="the corpus's kto.jsonl is empty")
    return out


def turn_filter(rows: Sequence[dict[str, Any]], *, callless: str = "drop", exclude: Sequence[str] = ()
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``rows`` (raw ``kto.jsonl`` rows) less the desirable rows whose judged turn ends a thought without its call
    (``callless="drop"``; :attr:`KTOConfig.callless_turns`) and the undesirable rows whose judged turn calls a tool
    in ``exclude`` (:attr:`KTOConfig.undesirable_exclude`), with the counts ``dropped_desirable_callless`` and
    ``undesirable_excluded`` (by tool in ``undesirable_excluded_by_tool``). A row without the columns is passed on
    for :func:`kto_rows` to name."""
    from shoparena.env.turns import call_names, open_callless_turns

    drop_callless, excluded = callless == "drop", set(exclude)
    kept: list[dict[str, Any]] = []
    counts: dict[str, Any] = {"dropped_desirable_callless": 0, "undesirable_excluded": 0}
    by_tool: dict[str, int] = {}
    for row in rows:
        completion = row.get("completion") if isinstance(row, dict) else None
        prompt = row.get("prompt") if isinstance(row, dict) else None
        if not (isinstance(completion, list) and len(completion) == 1 and isinstance(completion[0], dict)
                and isinstance(prompt, list)):
            kept.append(row)
            continue
        turn = completion[0]
        if row.get("label") is True and drop_callless:
            messages = [*prompt, *completion]
            last = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant") - 1
            if last in open_callless_turns(messages):
                counts["dropped_desirable_callless"] += 1
                continue
        if row.get("label") is False and excluded:
            hit = sorted(excluded.intersection(call_names(turn)))
            if hit:
                counts["undesirable_excluded"] += 1
                for name in hit:
                    by_tool[name] = by_tool.get(name, 0) + 1
                continue
        kept.append(row)
    if by_tool:
        counts["undesirable_excluded_by_tool"] = dict(sorted(by_tool.items()))
    return kept, counts


def fitting_rows(rows: Sequence[dict[str, Any]], tokenizer: Any, max_length: int) -> list[dict[str, Any]]:
    """The rows whose whole rendering — prompt with the generation prompt, then the judged turn to its end of turn —
    is at most ``max_length`` tokens. TRL cuts a longer sequence from the right, which would train a turn without
    its tool call or end of turn (or no completion token at all), so such rows are left out and the class balance is
    taken over the rest."""
    return [row for row in rows if row_tokens(row, tokenizer) <= max_length]


def row_tokens(row: dict[str, Any], tokenizer: Any) -> int:
    """Tokens of a :func:`kto_rows` row rendered whole: prompt, then the judged turn to its end of turn."""
    tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
    text = tokenizer.apply_chat_template([*row["prompt"], *row["completion"]], tools=tools, tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def fit_kto_turns(rows: Sequence[dict[str, Any]], tokenizer: Any, turn_tokens: int, *, system: str = "row",
                  compact: Any = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``rows`` (raw ``kto.jsonl`` rows) with every assistant turn fitted to ``turn_tokens`` as SFT fits them
    (prompt turns included: they are the model's own turns when it is served), and the counts ``turns_shortened``,
    ``dropped_turn_too_long`` (the judged turn cannot fit) and ``dropped_unrenderable``."""
    from shoparena.train.format import FormatConfig, fit_turns

    config = FormatConfig(max_length=1 << 20, compact=compact, system=system, turn_tokens=turn_tokens)
    kept: list[dict[str, Any]] = []
    counts = {"turns_shortened": 0, "dropped_turn_too_long": 0, "dropped_unrenderable": 0}
    for row in rows:
        messages = [*row["prompt"], *row["completion"]]
        try:
            fitted, _, shortened, hopeless = fit_turns(tokenizer, messages, row.get("tools"), config)
        except DataError:
            counts["dropped_unrenderable"] += 1
            continue
        n_assistant = sum(1 for m in messages if m.get("role") == "assistant")
        if n_assistant - 1 in hopeless:
            counts["dropped_turn_too_long"] += 1
            continue
        counts["turns_shortened"] += shortened
        kept.append({**row, "prompt": fitted[:-1], "completion": fitted[-1:]})
    return kept, counts


def balanced_subsample(rows: Sequence[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """At most ``n`` rows, drawn with ``seed``: half of each label (the rest from the other label when one has
    fewer), in their original order."""
    import random

    if len(rows) <= n:
        return list(rows)
    by_label = {label: [i for i, r in enumerate(rows) if bool(r["label"]) is label] for label in (True, False)}
    small = min(by_label.values(), key=len)
    take_small = min(len(small), n // 2)
    other = by_label[True] if small is by_label[False] else by_label[False]
    rng = random.Random(seed)
    chosen = rng.sample(small, take_small) + rng.sample(other, min(len(other), n - take_small))
    return [rows[i] for i in sorted(chosen)]


def class_weights(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Class balance and the weights that even it out: ``{"desirable", "undesirable", "desirable_weight",
    "undesirable_weight"}``. One class missing → :class:`DataError` (KTO needs both)."""
    n_d = sum(1 for r in rows if r["label"])
    n_u = len(rows) - n_d
    if not n_d or not n_u:
        raise DataError(f"KTO needs both labels (desirable {n_d}, undesirable {n_u})",
                        hint="the corpus needs successful and failed agentic traces")
    return {"desirable": n_d, "undesirable": n_u, "desirable_weight": max(1.0, n_u / n_d),
            "undesirable_weight": max(1.0, n_d / n_u)}


def _calls(message: dict[str, Any]) -> list[str]:
    return [(c.get("function") or c).get("name", "") for c in message.get("tool_calls") or []]


def probe_prompts(rows: Sequence[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The fixed probe set: distinct prompts whose judged turn recommended (desirable rows first), in row order."""
    seen: set[str] = set()
    out = []
    for row in sorted(rows, key=lambda r: not r["label"]):
        if RECOMMEND not in _calls(row["completion"][0]):
            continue
        key = json.dumps(row["prompt"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append({"prompt": row["prompt"], "tools": row.get("tools")})
        if len(out) == size:
            break
    return out


GPU_PROBE_BATCH = 8
"""Probe prompts per ``generate`` on a GPU (:class:`EmissionProbe`; not measured there yet)."""


class EmissionProbe:
    """The real rate function: sample one turn per probe prompt and count parseable ``recommend_product`` calls.
    The prompts are sampled ``batch`` at a time in one left-padded ``generate`` (GRPO's
    :func:`~shoparena.train.rollout.sample_turns`); ``batch=None`` picks :data:`GPU_PROBE_BATCH` on a GPU, where
    sampling one prompt at a time is launch-bound (one-at-a-time, an 8-prompt probe of SmolLM2 on an H200 took
    minutes where a KTO step took seconds), and 1 on a CPU, where decoding is compute-bound and a batch pads every prompt to the
    longest (``bench/kto_probe.py``: batched 0.34× one-at-a-time with the tiny model) — so CPU runs still sample one
    prompt at a time. A turn ends at the tokenizer's or the generation config's end token (GRPO's rule). Sampling is
    seeded in a forked RNG (the training RNG is left alone) and asserts ``not model.training``.

    ``sampler`` (a :class:`~shoparena.train.rollout.TurnSampler`, e.g. the llama.cpp one): every probe prompt is
    sampled at once through it from a copy of the current policy instead, probe ``i`` drawing with the same seed at
    every measurement (as the forked RNG does), so a change of the rate is the model's."""

    def __init__(self, tokenizer: Any, probes: Sequence[dict[str, Any]], *, max_new_tokens: int = 256,
                 temperature: float = 0.7, top_p: float = 0.95, seed: int = 0, batch: int | None = None,
                 sampler: Any = None) -> None:
        if batch is not None and batch < 1:
            raise ValueError("batch must be at least 1")
        self.sampler = sampler
        self.tokenizer = tokenizer
        self.batch = batch
        self.probes = list(probes)
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed

    def __call__(self, model: Any) -> float:
        import torch

        from shoparena.llm.hf_backend import completion_to_message
        from shoparena.train.rollout import render_prompt_ids, sample_concurrently, sample_turns, turn_end_ids

        assert not model.training, "sampling in train mode (docs/training.md §7 bug #2)"
        if not self.probes:
            return 1.0
        eos_ids, pad = turn_end_ids(self.tokenizer, model)
        contexts = [render_prompt_ids(self.tokenizer, probe["prompt"], probe["tools"]) for probe in self.probes]
        hits = 0
        if self.sampler is not None:
            turns = sample_concurrently(self.sampler, model, contexts, [self.max_new_tokens] * len(contexts), eos_ids,
                                        self.temperature, self.top_p)
            for turn in turns:
                reply = self.tokenizer.decode([t for t in turn if t not in eos_ids], skip_special_tokens=False)
                hits += any(c.name == RECOMMEND for c in completion_to_message(reply).tool_calls)
            return hits / len(self.probes)
        device = next(model.parameters()).device
        batch = self.batch or (GPU_PROBE_BATCH if device.type == "cuda" else 1)
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            torch.manual_seed(self.seed)
            for i in range(0, len(contexts), batch):  # one left-padded generate per batch of prompts
                chunk = contexts[i:i + batch]
                turns = sample_turns(model, chunk, [self.max_new_tokens] * len(chunk), eos_ids, pad,
                                     self.temperature, self.top_p)
                for turn in turns:
                    reply = self.tokenizer.decode([t for t in turn if t not in eos_ids], skip_special_tokens=False)
                    hits += any(c.name == RECOMMEND for c in completion_to_message(reply).tool_calls)
        return hits / len(self.probes)


def emission_stop(rate_fn: Callable[[Any], float], *, every: int, threshold: float) -> Any:
    """The early-stop ``TrainerCallback`` (built here so this module imports without transformers): every ``every``
    steps, ``rate_fn(model)`` under ``eval()`` + ``no_grad`` (train mode restored), then
    ``control.should_training_stop`` when the rate is below ``threshold``. ``.history`` holds ``(step, rate)``,
    starting with ``(0, rate)`` of the input checkpoint on a fresh run (measured before the first update, never a stop);
    ``.stopped_at`` the step it stopped at (None: never)."""
    import torch
    from transformers import TrainerCallback

    class EmissionStop(TrainerCallback):
        def __init__(self) -> None:
            self.history: list[tuple[int, float]] = []
            self.stopped_at: int | None = None

        def _rate(self, model: Any) -> float:
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    return float(rate_fn(model))
            finally:
                if was_training:
                    model.train()

        def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
            # the input checkpoint's own rate (before the first update of a fresh run; a resumed run's first step
            # is past 0): recorded, never a stop, so a reader can tell a drop KTO caused from a rate that was low
            # before it (on_train_begin runs before the Trainer loads a resumed state, so it cannot tell)
            if model is not None and state.global_step == 0 and not self.history:
                self.history.append((0, self._rate(model)))
            return control

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
            if model is None or state.global_step % every:
                return control
            rate = self._rate(model)
            self.history.append((state.global_step, rate))
            if rate < threshold:
                self.stopped_at = state.global_step
                control.should_training_stop = True
            return control

    return EmissionStop()


def train_kto(model_dir: Path, kto_rows_in: Iterable[dict[str, Any]], config: KTOConfig, out_dir: Path, *,
              resume: bool = False, rate_fn: Callable[[Any], float] | None = None,
              callbacks: Sequence[Any] = (), progress: StageProgress | None = None) -> StageResult:
    """Run stage 4 (module docstring) and return its :class:`StageResult` (also ``out_dir/stage.json``).
    ``rate_fn`` replaces the sampling probe (tests); ``callbacks`` are extra ``TrainerCallback`` s; ``progress`` a
    bar over the optimiser steps; metrics hold the class balance, the weights, losses and the
    emission-rate history."""
    from shoparena.train.checkpoint import (
        import_torch_stack,
        last_checkpoint,
        load_model,
        loss_metrics,
        peft_config,
        save_stage,
    )
    from shoparena.train.trainer import quiet, quiet_datasets, trainer_args, trainer_callbacks

    import_torch_stack()
    quiet_datasets()
    from datasets import Dataset
    from trl import KTOConfig as TRLKTOConfig
    from trl import KTOTrainer

    started = time.perf_counter()
    if config.probe_sampler == "llamacpp" and rate_fn is None:
        from shoparena.train.rollout_llamacpp import require_llamacpp

        require_llamacpp(model_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model(model_dir, config)
    from shoparena.llm.compact import read_compact
    from shoparena.train.sft import require_profile

    compact = read_compact(Path(model_dir))
    raw, off_profile = require_profile(list(kto_rows_in), config.tools, "KTO")
    raw, turn_counts = turn_filter(raw, callless=config.callless_turns, exclude=config.undesirable_exclude)
    prep: dict[str, Any] = {"off_profile": off_profile, **turn_counts}
    if config.turn_tokens is not None:
        raw, fit_counts = fit_kto_turns(raw, tokenizer, config.turn_tokens, system=config.system, compact=compact)
        prep.update(fit_counts)
    given = kto_rows(raw, system=config.system, compact=compact)
    rows = fitting_rows(given, tokenizer, config.max_length)
    if not rows:
        raise DataError(f"no KTO row fits in max_length={config.max_length} tokens",
                        hint="raise max_length (the recipe uses 14336)")
    prep["dropped_too_long"] = len(given) - len(rows)
    # the probe set comes from every fitting row, not only a subsample: a handful of recommend prompts makes the
    # stop rule a coin toss (with 5 prompts a single miss is a rate of 0.8, below the 0.9 threshold)
    probes = probe_prompts(rows, config.probe_size)
    if config.max_rows is not None:
        prep["subsampled_from"] = len(rows)
        rows = balanced_subsample(rows, config.max_rows, config.seed)
    balance = {**class_weights(rows), "rows": len(rows), **prep}
    d_w = config.desirable_weight or balance["desirable_weight"]
    u_w = config.undesirable_weight or balance["undesirable_weight"]
    sampler = None
    if config.probe_sampler == "llamacpp" and rate_fn is None:
        from shoparena.train.rollout_llamacpp import LlamaCppSampler

        sampler = LlamaCppSampler(model_dir, out_dir / PROBE_SAMPLER_DIR, dtype=config.probe_sampler_dtype,
                                  seed=config.seed, mode=config.probe_sampler_mode)
    rate = rate_fn or EmissionProbe(tokenizer, probes, max_new_tokens=config.probe_max_new_tokens,
                                    temperature=config.probe_temperature, top_p=config.probe_top_p, seed=config.seed,
                                    sampler=sampler)
    stop = emission_stop(rate, every=config.probe_every, threshold=config.probe_threshold)
    args = TRLKTOConfig(**trainer_args(config, out_dir), beta=config.beta, loss_type=config.loss_type,
                        max_length=config.max_length, desirable_weight=d_w, undesirable_weight=u_w,
                        disable_dropout=True)
    try:
        trainer = quiet(KTOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                   processing_class=tokenizer, peft_config=peft_config(config),
                                   callbacks=trainer_callbacks("kto", progress, [stop, *callbacks])))
        resumed = last_checkpoint(out_dir, before=config.max_steps) if resume else None
        trainer.train(resume_from_checkpoint=resumed)
    finally:
        if sampler is not None:
            sampler.close()
    # tokens of the rows this process stepped over (prompt + judged turn: TRL's count, which restarts in a resumed
    # process); the dataset's total would count the rows an early stop never reached
    seen = [r["num_tokens"] for r in trainer.state.log_history if "num_tokens" in r]
    tokens = int(seen[-1]) if seen else sum(map(len, trainer.train_dataset["completion_ids"]))
    metrics = {**balance, "desirable_weight": d_w, "undesirable_weight": u_w, "probe_prompts": len(probes),
               "emission_rate": [list(h) for h in stop.history], "early_stopped_at": stop.stopped_at,
               **loss_metrics(trainer.state.log_history)}
    for key in ("rewards/chosen", "rewards/rejected", "kl"):
        metrics.update(loss_metrics(trainer.state.log_history, key))
    return save_stage("kto", trainer, tokenizer, out_dir, metrics=metrics, started=started, tokens=tokens,
                      resumed_from=resumed)
