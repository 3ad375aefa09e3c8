"""Held-out loss of checkpoints: the mean over assistant tokens of the first 16 four-tool rows of a corpus's
``sft_eval.jsonl`` (the rows ``train_sft``'s ``eval_loss`` uses), each checkpoint under the rendering it was trained
with (its ``shoparena_format.json``), max_length 8192, one sequence at a time.

    python -P scripts/gpu/eval_loss.py CORPUS_DIR CHECKPOINT_DIR...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers

from shoparena.errors import ShopArenaError
from shoparena.train.format import encode_rows
from shoparena.train.sft import SFTConfig, in_profile

TOOLS = ["find_product", "view_product_information", "recommend_product", "terminate"]


def main() -> None:
    corpus, dirs = Path(sys.argv[1]), sys.argv[2:]
    rows = [json.loads(x) for x in (corpus / "sft_eval.jsonl").read_text(encoding="utf-8").splitlines() if x]
    for d in dirs:
        fmt = json.loads((Path(d) / "shoparena_format.json").read_text(encoding="utf-8"))
        cfg = SFTConfig(tools=TOOLS, compact=fmt["compact"], system="harness", max_length=8192,
                        truncation="keep_start")
        tok = transformers.AutoTokenizer.from_pretrained(d, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(d, local_files_only=True, dtype=torch.float32)
        samples = encode_rows(tok, in_profile(rows, TOOLS)[0][:16], cfg.format()).samples
        total = n = 0.0
        with torch.no_grad():
            for s in samples:
                ids = torch.tensor([s["input_ids"]])
                labels = ids.clone()
                labels[0, torch.tensor(s["assistant_masks"]) == 0] = -100
                k = int((labels[0, 1:] != -100).sum())
                total += model.eval()(input_ids=ids, labels=labels).loss.item() * k
                n += k
        print(json.dumps({"model": d, "eval_loss": round(total / n, 4), "tokens": n, "rows": len(samples)}))


if __name__ == "__main__":
    try:
        main()
    except (ShopArenaError, OSError, ValueError, KeyError, IndexError) as exc:  # one line, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
