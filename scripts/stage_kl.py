"""How far each stage of a training run moved the model: the evidence that a stage can or cannot have changed behaviour.

    python scripts/stage_kl.py RUN_DIR --rows ROWS.jsonl [--stages sft,rs,teacher,kto,grpo] [--rows-max 6]
        [--max-tokens 3000] [--json]

``RUN_DIR`` is a ``shoparena train`` output (``RUN_DIR/<stage>/model``); ``ROWS.jsonl`` SFT-shaped rows
(``messages``, ``tools``: a corpus's ``sft_eval.jsonl`` or ``sft_validation.jsonl``), rendered as training renders
them (:func:`shoparena.train.format.render_sample`, the first stage's observation compaction and the harness
system prompt). For every pair of stages it prints:

- the mean per-token KL divergence ``KL(a || b)`` of the next-token distributions on the rows' assistant tokens
  (fp32, transformers): how differently the two checkpoints would sample the turns a model makes;
- the relative L2 distance of the weights, ``||w_b - w_a|| / ||w_a||`` over every tensor.

For scale: a model served by llama.cpp at Q8_0 carries a rounding error of about 1/256 of each block's largest
weight, so two checkpoints whose weights differ by far less than that are the same model once served, whatever
their evaluations say.

Bad input (a missing run, stage or rows file, a row that is not a JSON object, no row that renders) is one
``error:`` line and a ``hint:`` line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script


def _fail(message: str, hint: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    print(f"hint: {hint}", file=sys.stderr)
    raise SystemExit(2)


def _rows(path: Path, n: int) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"{path}: cannot read ({exc.__class__.__name__})", "give a corpus's sft_eval.jsonl or sft_validation.jsonl")
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            _fail(f"{path}:{i}: not JSON", "one JSON object per line")
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            _fail(f"{path}:{i}: not an SFT row (no messages list)", "give a corpus's sft_*.jsonl")
        rows.append(row)
    return rows[: n * 4]  # a few spare rows: some may not render or be too long


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", type=Path, required=True)
    ap.add_argument("--stages", default="sft,rs,teacher,kto,grpo")
    ap.add_argument("--rows-max", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=3000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    if len(stages) < 2 or args.rows_max < 1 or args.max_tokens < 16:
        _fail("need two stages or more, --rows-max ≥ 1 and --max-tokens ≥ 16", "e.g. --stages sft,teacher,kto")
    models = {s: args.run / s / "model" for s in stages}
    for s, d in models.items():
        if not (d / "model.safetensors").is_file():
            _fail(f"{d}: no checkpoint (model.safetensors)", f"is {args.run} a shoparena train output with a {s} stage?")
    rows = _rows(args.rows, args.rows_max)

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.errors import DataError
    from shoparena.llm.compact import read_compact
    from shoparena.train.format import render_sample

    torch.manual_seed(0)
    first = models[stages[0]]
    tok = AutoTokenizer.from_pretrained(first, local_files_only=True)
    compact = read_compact(first)
    samples = []
    for row in rows:
        try:
            s = render_sample(tok, row["messages"], row.get("tools"), compact=compact, system="harness")
        except DataError:
            continue
        if len(s.input_ids) <= args.max_tokens and any(s.assistant_masks):
            samples.append(s)
        if len(samples) == args.rows_max:
            break
    if not samples:
        _fail("no row renders within --max-tokens", "raise --max-tokens or give other rows")

    logps: dict[str, list[Any]] = {}
    weights: dict[str, dict[str, Any]] = {}
    for s_name, d in models.items():
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, local_files_only=True).eval()
        out = []
        with torch.no_grad():
            for s in samples:
                lp = torch.log_softmax(model(torch.tensor([s.input_ids])).logits[0, :-1].float(), -1)
                out.append(lp[torch.tensor(s.assistant_masks[1:], dtype=torch.bool)])
        logps[s_name] = out
        weights[s_name] = load_file(str(d / "model.safetensors"))
        del model

    def kl(a: str, b: str) -> float:
        total, n = 0.0, 0
        for x, y in zip(logps[a], logps[b], strict=True):
            total += float((x.exp() * (x - y)).sum())
            n += x.shape[0]
        return total / n

    def rel_l2(a: str, b: str) -> float:
        wa, wb = weights[a], weights[b]
        num = sum(float(((wb[k].float() - wa[k].float()) ** 2).sum()) for k in wa)
        den = sum(float((wa[k].float() ** 2).sum()) for k in wa)
        return (num / den) ** 0.5

    pairs = [{"a": a, "b": b, "kl_per_token": kl(a, b), "weights_rel_l2": rel_l2(a, b)}
             for i, a in enumerate(stages) for b in stages[i + 1:]]
    tokens = sum(int(sum(s.assistant_masks)) for s in samples)
    if args.json:
        print(json.dumps({"rows": len(samples), "assistant_tokens": tokens, "pairs": pairs}))
        return 0
    print(f"{len(samples)} rows, {tokens} assistant tokens")
    print(f"{'a':>10} {'b':>10} {'KL(a||b)/token':>15} {'weights rel L2':>15}")
    for p in pairs:
        print(f"{p['a']:>10} {p['b']:>10} {p['kl_per_token']:>15.5f} {p['weights_rel_l2']:>15.2e}")
    return 0


if __name__ == "__main__":
    run_script(main)
