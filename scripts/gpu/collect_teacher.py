"""Expert (``policy:expert``) trajectories on every problem of the corpus split's ``train`` partition, through the
real harness: the teacher stage's collection (:mod:`shoparena.train.teacher`) run on the CPU, so that a GPU job only
trains. Successful samples become SFT rows, exact duplicates (same messages) are kept once, the voucher bucket is
up-sampled 3x (paper §4).

    python -P scripts/gpu/collect_teacher.py CORPUS_DIR CATALOG_DIR OUT_DIR [--k 2]

Writes ``OUT_DIR/teacher_rows.jsonl`` and the harness run under ``OUT_DIR/samples`` (reused when complete).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from shoparena.corpus.problems import partition_problems
from shoparena.errors import DataError, ShopArenaError
from shoparena.train.harness import collect_successes, upsample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("catalog", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    if a.k < 1:
        ap.error(f"--k must be at least 1, not {a.k}")
    problems = partition_problems(a.corpus, "train")
    got = collect_successes(a.catalog, problems, model="policy:expert", k=a.k, temperature=0.7, seed=0,
                            out_dir=a.out / "samples", agent="react", timeout_s=60, concurrency=2, resume=True)
    unique, keys = [], set()
    for r in got.rows:
        key = json.dumps(r["messages"], sort_keys=True)
        if key not in keys:
            keys.add(key)
            unique.append(r)
    if not unique:
        raise DataError(f"policy:expert solved none of {len(problems)} train problems ({dict(got.counts)})")
    rows = upsample(unique, "voucher", 3)
    with open(a.out / "teacher_rows.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({"problems": len(problems), "asr": got.asr, "counts": dict(got.counts), "kept": len(got.rows),
                      "unique": len(unique), "by_bucket": dict(Counter(r["bucket"] for r in unique)),
                      "rows": len(rows)}))


if __name__ == "__main__":
    try:
        main()
    except (ShopArenaError, OSError, ValueError, KeyError, IndexError) as exc:  # one line, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
