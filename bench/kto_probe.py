"""KTO's emission probe (docs/training.md §4.3): the probe prompts sampled one at a time against ``batch`` at a time in
one left-padded ``generate`` (:class:`shoparena.train.kto.EmissionProbe`). On a GPU a one-at-a-time probe is
launch-bound and can cost far more than a KTO step; this measures what batching buys on the machine it runs on.

    python bench/kto_probe.py [--model DIR] [--corpus DIR] [--size 8] [--batch 8] [--max-new 256]
                              [--max-length 14336] [--system harness] [--turn-tokens 256] [--threads 2]

Setup (not timed): the model (default: the tiny Qwen3, built here), the corpus's ``kto_train`` rows (default: the
seeded corpus world) prepared as ``train_kto`` prepares them (``fit_kto_turns`` when
``--turn-tokens``, ``kto_rows``, ``fitting_rows``), and the probe set (:func:`probe_prompts`, ``--size``). Timed, in
the order one-at-a-time, batched, one-at-a-time, batched: one probe call each, at the recipe's sampling settings
(T 0.7, top-p 0.95, seed 0). Figures: seconds per probe call, generated tokens per second, the rate each measured
(the two orders of sampling draw differently, so rates may differ) and the ratio one-at-a-time / batched.
On a CPU batching can be slower (it is compute-bound and the batch pads every prompt to the longest);
docs/results.md has the measured figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _rows(corpus: Path | None, root: Path) -> list[dict[str, Any]]:
    from shoparena.corpus.export.common import read_jsonl_rows

    if corpus is None:
        from shoparena.corpus.build import build_corpus
        from shoparena.corpus.testing import seed_world

        world = seed_world(root / "world")
        build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog)
        corpus = root / "corpus"
    return read_jsonl_rows(corpus / "kto_train.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=14336)
    ap.add_argument("--system", choices=["row", "harness"], default="harness")
    ap.add_argument("--turn-tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    for name in ("size", "batch", "max_new", "max_length", "threads"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.model is not None and not (a.model / "config.json").is_file():
        ap.error(f"--model {a.model}: not a checkpoint directory (no config.json)")
    if a.corpus is not None and not (a.corpus / "kto_train.jsonl").is_file():
        ap.error(f"--corpus {a.corpus}: no kto_train.jsonl (build one with `shoparena corpus build`)")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.llm.compact import read_compact
    from shoparena.train.kto import EmissionProbe, fit_kto_turns, fitting_rows, kto_rows, probe_prompts

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = a.model
        if model_dir is None:
            from shoparena.llm.tiny import build_tiny_qwen3

            model_dir = build_tiny_qwen3(root / "tiny")
        raw = _rows(a.corpus, root)
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        compact = read_compact(Path(model_dir))
        if a.turn_tokens is not None:
            raw, _ = fit_kto_turns(raw, tokenizer, a.turn_tokens, system=a.system, compact=compact)
        probes = probe_prompts(fitting_rows(kto_rows(raw, system=a.system, compact=compact), tokenizer, a.max_length),
                               a.size)
        if not probes:
            ap.error(f"no probe prompt: no kto_train row recommending fits --max-length {a.max_length}")
        model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
        generate, made = model.generate, []

        def counted(**kw: Any) -> Any:
            out = generate(**kw)
            made.append(int((out[:, kw["input_ids"].shape[1]:] != (tokenizer.pad_token_id or -1)).sum()))
            return out

        model.generate = counted
        times: dict[int, list[float]] = {1: [], a.batch: []}
        tokens: dict[int, list[int]] = {1: [], a.batch: []}
        rates: dict[int, list[float]] = {1: [], a.batch: []}
        for batch in (1, a.batch, 1, a.batch):
            probe = EmissionProbe(tokenizer, probes, max_new_tokens=a.max_new, temperature=0.7, top_p=0.95, seed=0,
                                  batch=batch)
            made.clear()
            t0 = time.perf_counter()
            rates[batch].append(probe(model))
            times[batch].append(time.perf_counter() - t0)
            tokens[batch].append(sum(made))
        print(f"model {model_dir}  probe prompts {len(probes)}  max_new {a.max_new}  threads {a.threads}")
        for batch in (1, a.batch):
            s = statistics.median(times[batch])
            tps = statistics.median(t / x for t, x in zip(tokens[batch], times[batch], strict=True))
            print(f"batch {batch:>2}: {s:8.1f} s per probe (runs {', '.join(f'{x:.1f}' for x in times[batch])}), "
                  f"{tps:7.1f} generated tokens/s, rates {rates[batch]}")
        print(f"one-at-a-time / batched: {statistics.median(times[1]) / statistics.median(times[a.batch]):.2f}x")


if __name__ == "__main__":
    run_script(main)
