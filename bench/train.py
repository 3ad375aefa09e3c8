"""Training benchmark: a stage wrapper against plain TRL on the same model, data and settings; the issue asks
the wrapper to cost ≤ 5 %. ``--stage sft`` (default): :func:`shoparena.train.sft.train_sft` against
``SFTTrainer``; ``--stage kto``: :func:`shoparena.train.kto.train_kto` against ``KTOTrainer``; ``--stage grpo``:
:func:`shoparena.train.grpo.train_grpo` against ``GRPOTrainer``; ``--stage precision``: ``train_sft`` in fp32 against
``train_sft`` with ``bf16: true`` (on a CPU: bf16 autocast over fp32 weights), same rows, config and seed. ``--bf16``
runs both sides of ``--stage sft`` in bf16.

    python bench/train.py [--stage sft|kto|grpo|precision] [--steps 20] [--repeats 2] [--model tiny|DIR]
                          [--max-length 2048] [--batch 2] [--bf16] [--threads 1]

Setup (not timed): the seeded corpus world (:mod:`shoparena.corpus.testing` → ``build_corpus``) and the tiny Qwen3
(or ``--model DIR``, e.g. a prepared SmolLM2); the samples are encoded once with :func:`encode_rows` for the plain
run. Timed ``--repeats`` times each, the order alternating between repeats:
- plain: ``trl.SFTTrainer(model, SFTConfig(...), Dataset(input_ids, assistant_masks), peft_config)`` +
  ``train()`` with the same arguments as the wrapper (checkpoints every ``save_steps``, LoRA r 8 all-linear);
- wrapper: ``train_sft`` (encoding + mask validation, step log, merge + save, ``stage.json``).
Figures: train-loop tokens/s (input tokens / wall seconds of ``train()``) and tokens per CPU-second (less
sensitive to other processes on the machine) of each, the wrapper's end-to-end seconds, and
the ratio wrapper / plain of the train-loop throughput (best and median of the repeats). One torch thread;
other processes on the machine make single figures noisy, so run several repeats.

``--stage kto``: the corpus's ``kto_train`` rows through the wrapper's own preparation (:func:`kto_rows`,
:func:`fitting_rows`) for both; plain is ``trl.KTOTrainer(model, KTOConfig(...), Dataset(rows), peft_config)`` with
the wrapper's arguments and weights; the wrapper is ``train_kto`` with its emission probe replaced by a constant
(sampling is a stage feature, not trainer throughput). Both train loops are timed by the same callback
(``on_train_begin`` → ``on_train_end``); tokens are prompt + completion tokens of the rows stepped over.

``--stage grpo``: the corpus's ``grpo_train`` rows; plain is ``trl.GRPOTrainer(model, reward_funcs=[outcome, tool
match], args=trl_config(cfg), Dataset(prompts), peft_config, rollout_func=make_rollout_func(RolloutEnv(rows)))`` —
TRL cannot play a multi-turn episode without a ``rollout_func``, so both sides get the same one over the same real
environment; what differs is the wrapper (tool-profile check, the episode log, merge + save, ``stage.json``). Tokens
are TRL's own ``num_tokens`` (prompt + completion, tool results included) of the episodes played; the rollouts
(``run_token_episodes``) are timed on both sides, so the figures also say how much of a step is sampling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def _world(root: Path) -> tuple[list[dict[str, Any]], Path]:
    from shoparena.corpus.build import build_corpus
    from shoparena.corpus.export.common import read_jsonl_rows
    from shoparena.corpus.testing import seed_world

    world = seed_world(root / "world")
    build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog)
    return read_jsonl_rows(root / "corpus" / "sft_train.jsonl") + read_jsonl_rows(root / "corpus" /
                                                                                 "sft_eval.jsonl"), world.catalog


def _plain(model_dir: Path, samples: list[dict[str, list[int]]], cfg: Any, out: Path) -> tuple[float, float]:
    import peft
    import torch
    import transformers
    import trl
    from datasets import Dataset

    transformers.set_seed(cfg.seed)
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = trl.SFTConfig(output_dir=str(out), learning_rate=cfg.learning_rate, max_steps=cfg.max_steps,
                         per_device_train_batch_size=cfg.batch_size, max_length=cfg.max_length, logging_steps=1,
                         save_strategy="steps", save_steps=cfg.save_steps, seed=cfg.seed, data_seed=cfg.seed,
                         use_cpu=True, bf16=cfg.bf16, report_to="none", disable_tqdm=True, gradient_checkpointing=False)
    lora = peft.LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, target_modules="all-linear",
                           task_type="CAUSAL_LM")
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(samples), processing_class=tok,
                             peft_config=lora)
    trainer.remove_callback(transformers.PrinterCallback)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train()
    runtime, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = trainer.state.log_history[-2].get("num_tokens") or 0
    return tokens / runtime, tokens / cpu


def _clock() -> Any:
    """A ``TrainerCallback`` that times the train loop in wall and CPU seconds (``.wall``, ``.cpu``) and keeps TRL's
    last logged ``num_tokens`` (``.tokens``)."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        wall = cpu = tokens = 0.0

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kw: Any) -> None:
            if logs and "num_tokens" in logs:
                self.tokens = float(logs["num_tokens"])

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._t, self._c = time.perf_counter(), time.process_time()

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.wall, self.cpu = time.perf_counter() - self._t, time.process_time() - self._c

    return Clock()


def _rl_world(root: Path, export: str) -> tuple[list[dict[str, Any]], Path]:
    """The rows of one export (``kto_train``, ``grpo_train``) of the RL tests' world — failed traces as well as
    successes — and its catalog."""
    from shoparena.corpus.build import build_corpus
    from shoparena.corpus.export.common import read_jsonl_rows
    from shoparena.corpus.testing import seed_world

    world = seed_world(root / "world", n_problems=6)
    build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog)
    return read_jsonl_rows(root / "corpus" / f"{export}.jsonl"), world.catalog


def _plain_kto(model_dir: Path, rows: list[dict[str, Any]], cfg: Any, out: Path) -> Any:
    import transformers
    import trl
    from datasets import Dataset

    from shoparena.train.checkpoint import load_model, peft_config, trainer_args
    from shoparena.train.kto import class_weights

    transformers.set_seed(cfg.seed)
    model, tok = load_model(model_dir)
    w = class_weights(rows)
    args = trl.KTOConfig(**{**trainer_args(cfg, out), "disable_tqdm": True}, beta=cfg.beta, loss_type=cfg.loss_type,
                         max_length=cfg.max_length, desirable_weight=w["desirable_weight"],
                         undesirable_weight=w["undesirable_weight"], disable_dropout=True)
    clock = _clock()
    trainer = trl.KTOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok,
                             peft_config=peft_config(cfg), callbacks=[clock])
    trainer.remove_callback(transformers.PrinterCallback)
    trainer.train()
    return clock


def _bench_kto(a: argparse.Namespace) -> None:
    import transformers

    from shoparena.llm.tiny import build_tiny_qwen3
    from shoparena.train.kto import KTOConfig, fitting_rows, kto_rows, row_tokens, train_kto

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw, _ = _rl_world(root, "kto_train")
        model_dir = build_tiny_qwen3(root / "tiny", seed=0) if a.model == "tiny" else Path(a.model)
        cfg = KTOConfig(max_steps=a.steps, batch_size=max(2, a.batch), max_length=a.max_length,
                        save_steps=max(1, a.steps // 2), learning_rate=1e-4, probe_every=a.steps + 1)
        tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        rows = fitting_rows(kto_rows(raw), tok, cfg.max_length)
        per_row = [row_tokens(r, tok) for r in rows]
        stepped = min(len(rows), a.steps * cfg.batch_size)
        tokens = statistics.mean(per_row) * stepped  # the mean row, times the rows the steps go over
        plain, wrapped, plain_cpu, wrapped_cpu, e2e = [], [], [], [], []
        for i in range(a.repeats):
            for which in (("plain", "wrapper") if i % 2 == 0 else ("wrapper", "plain")):
                if which == "plain":
                    clock = _plain_kto(model_dir, rows, cfg, root / f"plain{i}")
                    plain.append(tokens / clock.wall)
                    plain_cpu.append(tokens / clock.cpu)
                else:
                    clock = _clock()
                    t0 = time.perf_counter()
                    train_kto(model_dir, raw, cfg, root / f"wrap{i}", rate_fn=lambda m: 1.0, callbacks=[clock])
                    e2e.append(time.perf_counter() - t0)
                    wrapped.append(tokens / clock.wall)
                    wrapped_cpu.append(tokens / clock.cpu)
            print(f"repeat {i}: wall: plain {plain[-1]:,.0f} tok/s, wrapper {wrapped[-1]:,.0f} tok/s; per CPU-second: "
                  f"plain {plain_cpu[-1]:,.0f}, wrapper {wrapped_cpu[-1]:,.0f}; wrapper end to end {e2e[-1]:.1f} s")
        print(f"KTO, model {a.model}: {len(rows)} rows ({stepped} stepped over, ≈ {tokens:,.0f} tokens), {a.steps} "
              f"steps × batch {cfg.batch_size}, max_length {a.max_length}")
        _ratios(a.repeats, plain, wrapped, plain_cpu, wrapped_cpu)
        print(f"wrapper end to end (prepare rows + train + merge + save): best {min(e2e):.1f} s")


def _plain_grpo(model_dir: Path, rows: list[dict[str, Any]], catalog: Path, cfg: Any, out: Path) -> Any:
    import transformers
    import trl
    from datasets import Dataset

    from shoparena.llm.compact import read_compact
    from shoparena.train.checkpoint import load_model, peft_config
    from shoparena.train.grpo import REWARD_FUNCS, make_rollout_func, trl_config
    from shoparena.train.rollout import RolloutEnv

    transformers.set_seed(cfg.seed)
    env = RolloutEnv(rows, catalog, max_turns=cfg.max_turns, system=cfg.system, compact=read_compact(model_dir))
    model, tok = load_model(model_dir)
    args = trl_config(cfg, out)
    args.disable_tqdm = True
    clock = _clock()
    trainer = trl.GRPOTrainer(model=model, reward_funcs=list(REWARD_FUNCS), args=args,
                              train_dataset=Dataset.from_list([{"prompt": r["prompt"]} for r in env.rows.values()]),
                              processing_class=tok, peft_config=peft_config(cfg),
                              rollout_func=make_rollout_func(env, tok, cfg), callbacks=[clock])
    trainer.remove_callback(transformers.PrinterCallback)
    trainer.train()
    return clock


def _bench_grpo(a: argparse.Namespace) -> None:
    import shoparena.train.rollout as rollout
    from shoparena.llm.tiny import build_tiny_qwen3
    from shoparena.train.grpo import GRPOConfig, train_grpo

    played = rollout.run_token_episodes
    spent = [0.0]

    def timed(*args: Any, **kw: Any) -> Any:  # the rollouts' share of a step
        t0 = time.perf_counter()
        try:
            return played(*args, **kw)
        finally:
            spent[0] += time.perf_counter() - t0

    # timed on both sides; patch.object puts the function back however the bench ends
    with mock.patch.object(rollout, "run_token_episodes", timed), tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows, catalog = _rl_world(root, "grpo_train")
        model_dir = build_tiny_qwen3(root / "tiny", seed=0) if a.model == "tiny" else Path(a.model)
        cfg = GRPOConfig(max_steps=a.steps, num_generations=4, batch_size=1, grad_accum=4, max_turns=4,
                         max_completion_length=a.max_length, turn_max_tokens=64, learning_rate=1e-5,
                         save_steps=max(1, a.steps // 2))
        runs: dict[str, list[tuple[float, float, float, float]]] = {"plain": [], "wrapper": []}
        e2e = []
        for i in range(a.repeats):
            for which in (("plain", "wrapper") if i % 2 == 0 else ("wrapper", "plain")):
                spent[0] = 0.0
                if which == "plain":
                    clock = _plain_grpo(model_dir, rows, catalog, cfg, root / f"plain{i}")
                else:
                    clock = _clock()
                    t0 = time.perf_counter()
                    train_grpo(model_dir, rows, cfg, root / f"wrap{i}", catalog_dir=catalog, callbacks=[clock])
                    e2e.append(time.perf_counter() - t0)
                runs[which].append((clock.tokens / clock.wall, clock.tokens / clock.cpu, spent[0] / clock.wall,
                                    clock.tokens))
            p, w = runs["plain"][-1], runs["wrapper"][-1]
            print(f"repeat {i}: wall: plain {p[0]:,.0f} tok/s, wrapper {w[0]:,.0f} tok/s; per CPU-second: plain "
                  f"{p[1]:,.0f}, wrapper {w[1]:,.0f}; tokens plain {p[3]:,.0f}, wrapper {w[3]:,.0f}; rollouts "
                  f"{100 * p[2]:.0f} % / {100 * w[2]:.0f} % of the train loop; wrapper end to end {e2e[-1]:.1f} s")
        print(f"GRPO, model {a.model}: {len(rows)} prompts, {a.steps} steps × K {cfg.num_generations} episodes "
              f"(micro-batch 1 × accumulation 4), ≤ {cfg.max_turns} turns, ≤ {a.max_length} tokens an episode")
        _ratios(a.repeats, [r[0] for r in runs["plain"]], [r[0] for r in runs["wrapper"]],
                [r[1] for r in runs["plain"]], [r[1] for r in runs["wrapper"]])
        print(f"wrapper end to end (profile check + train + merge + save): best {min(e2e):.1f} s")


def _ratios(repeats: int, plain: list[float], wrapped: list[float], plain_cpu: list[float],
            wrapped_cpu: list[float]) -> None:
    for unit, p, w in (("tokens/s (wall)", plain, wrapped), ("tokens per CPU-second", plain_cpu, wrapped_cpu)):
        for name, pick in (("best", max), ("median", statistics.median)):
            ratio = pick(w) / pick(p)
            print(f"train loop, {unit}, {name} of {repeats}: plain TRL {pick(p):,.0f}  wrapper {pick(w):,.0f}  "
                  f"ratio {ratio:.3f} (overhead {100 * (1 - ratio):+.1f} %)")


def _bench_precision(a: argparse.Namespace, model_dir: Path, rows: list[dict[str, Any]], cfg: Any,
                     root: Path) -> None:
    """``train_sft`` fp32 against bf16 (autocast on a CPU), alternating; tokens/s, per CPU-second, and the losses."""
    from shoparena.train.sft import train_sft

    runs: dict[str, list[Any]] = {"fp32": [], "bf16": []}
    for i in range(a.repeats):
        for which in (("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32")):
            res = train_sft(model_dir, rows, [], cfg.model_copy(update={"bf16": which == "bf16"}),
                            root / f"{which}{i}")
            runs[which].append(res)
        f, b = runs["fp32"][-1], runs["bf16"][-1]
        print(f"repeat {i}: tokens/s fp32 {f.tokens_per_s:,.1f}  bf16 {b.tokens_per_s:,.1f}; mean train loss "
              f"fp32 {f.metrics['train_loss']:.4f}  bf16 {b.metrics['train_loss']:.4f}")
    print(f"model {a.model}: {a.steps} steps × batch {a.batch}, max_length {a.max_length}, {a.threads} torch "
          f"thread(s), {runs['fp32'][0].metrics['train_tokens_seen']:,.0f} tokens a run")
    for unit, key in (("tokens/s (wall)", lambda r: r.tokens_per_s),
                      ("tokens per CPU-second", lambda r: r.metrics["train_tokens_seen"] / r.metrics["train_cpu_s"])):
        for name, pick in (("best", max), ("median", statistics.median)):
            f, b = pick(key(r) for r in runs["fp32"]), pick(key(r) for r in runs["bf16"])
            print(f"train loop, {unit}, {name} of {a.repeats}: fp32 {f:,.1f}  bf16 {b:,.1f}  ratio bf16/fp32 "
                  f"{b / f:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", choices=("sft", "kto", "grpo", "precision"), default="sft")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--max-length", type=int, default=None,
                    help="default 2048 for sft, 8192 for kto (KTO rows are whole trajectories up to a turn), "
                         "1536 for grpo (an episode's token budget)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="sft: both sides with bf16 (autocast on a CPU)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    a = ap.parse_args()
    if a.max_length is None:
        a.max_length = {"kto": 8192, "grpo": 1536}.get(a.stage, 2048)

    import torch
    import transformers

    torch.set_num_threads(a.threads)
    if a.stage in ("kto", "grpo"):
        (_bench_kto if a.stage == "kto" else _bench_grpo)(a)
        return
    from shoparena.llm.compact import CompactConfig
    from shoparena.llm.tiny import build_tiny_qwen3
    from shoparena.train.format import encode_rows
    from shoparena.train.sft import SFTConfig, train_sft
    from shoparena.train.types import LoraConfig

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows, _ = _world(root)
        model_dir = build_tiny_qwen3(root / "tiny", seed=0) if a.model == "tiny" else Path(a.model)
        cfg = SFTConfig(max_steps=a.steps, batch_size=a.batch, max_length=a.max_length, truncation="keep_start",
                        compact=CompactConfig(max_items=3, max_chars=600), save_steps=max(1, a.steps // 2),
                        learning_rate=1e-3, lora=LoraConfig(r=8, alpha=16), bf16=a.bf16)
        if a.stage == "precision":
            _bench_precision(a, model_dir, rows, cfg, root)
            return
        tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        samples = encode_rows(tok, rows, cfg.format()).samples
        plain, wrapped, e2e, plain_cpu, wrapped_cpu = [], [], [], [], []
        for i in range(a.repeats):
            for which in (("plain", "wrapper") if i % 2 == 0 else ("wrapper", "plain")):  # alternate the order
                if which == "plain":
                    rate, per_cpu = _plain(model_dir, samples, cfg, root / f"plain{i}")
                    plain.append(rate)
                    plain_cpu.append(per_cpu)
                else:
                    t0 = time.perf_counter()
                    res = train_sft(model_dir, rows, [], cfg, root / f"wrap{i}")
                    e2e.append(time.perf_counter() - t0)
                    wrapped.append(res.tokens_per_s or 0.0)
                    wrapped_cpu.append(res.metrics["train_tokens_seen"] / res.metrics["train_cpu_s"])
            print(f"repeat {i}: wall: plain {plain[-1]:,.0f} tok/s, wrapper {wrapped[-1]:,.0f} tok/s; per CPU-second: "
                  f"plain {plain_cpu[-1]:,.0f}, wrapper {wrapped_cpu[-1]:,.0f}; wrapper end to end {e2e[-1]:.1f} s")
        print(f"model {a.model}: {len(samples)} samples, {a.steps} steps × batch {a.batch}, max_length {a.max_length}")
        _ratios(a.repeats, plain, wrapped, plain_cpu, wrapped_cpu)
        print(f"wrapper end to end (encode + validate masks + train + merge + save): best {min(e2e):.1f} s")


if __name__ == "__main__":
    run_script(main)
