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
from collections import Counter
from pathlib import Path

from shoparena.tasks.loader import load_problems
from shoparena.tasks.types import Problem
from shoparena.train.harness import collect_successes, upsample


def train_problems(corpus: Path) -> list[Problem]:
    """The bank problems whose leak cluster the corpus split put in ``train``."""
    split = json.loads((corpus / "split.json").read_text(encoding="utf-8"))
    clusters, of = set(split["partitions"]["train"]["clusters"]), split["clusters"]
    src = Path(json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))["sources"]["problems"])
    if not src.exists():
        src = corpus.parent / src
    files = (sorted(src.glob("problems-*.jsonl")) or sorted(src.glob("*.jsonl"))) if src.is_dir() else [src]
    seen: dict[str, Problem] = {}
    for f in files:
        for p in load_problems(f):
            if of.get(p.problem_id) in clusters:
                seen.setdefault(p.problem_id, p)
    return [seen[k] for k in sorted(seen)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("catalog", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    problems = train_problems(a.corpus)
    got = collect_successes(a.catalog, problems, model="policy:expert", k=a.k, temperature=0.7, seed=0,
                            out_dir=a.out / "samples", agent="react", timeout_s=60, concurrency=2, resume=True)
    unique, keys = [], set()
    for r in got.rows:
        key = json.dumps(r["messages"], sort_keys=True)
        if key not in keys:
            keys.add(key)
            unique.append(r)
    rows = upsample(unique, "voucher", 3)
    with open(a.out / "teacher_rows.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({"problems": len(problems), "asr": got.asr, "counts": dict(got.counts), "kept": len(got.rows),
                      "unique": len(unique), "by_bucket": dict(Counter(r["bucket"] for r in unique)),
                      "rows": len(rows)}))


if __name__ == "__main__":
    main()
