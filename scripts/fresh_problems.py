"""Fresh problems to measure a checkpoint's behaviour on without touching a corpus's held-out partitions.

    python scripts/fresh_problems.py --corpus DIR --catalog DIR -n 24 [--seed 0] [--banks DIR] --out FILE.jsonl

Draws ``n`` problems from the arena's banks the way the teacher stage draws its fresh bank problems
(:func:`shoparena.train.teacher.draw_bank_problems`, docs/training.md "Teacher budget and the learning curve"): in
the train-visible bank partitions, not a train problem of the corpus, sharing no leak cluster, GT product or query
with its eval / never_touch / validation partitions, proven by the leak guard; seeded, stratified by bucket. The
file is a problems JSONL for ``shoparena evaluate --problems FILE``. Such problems are for ablations of training
mechanisms (counting think-then-stop or cut turns) on checkpoints that never sampled them; choices between final
models belong on a corpus's validation partition. A teacher stage run with ``bank_problems`` may have trained on
the same pool: do not measure its checkpoints here.

Bad input is one ``error:`` line and a ``hint:`` line on stderr, exit 2 (4 for a missing file); an existing
``--out`` is refused (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from shoparena.cli.pipes import run_script
from shoparena.errors import ConfigError, NotFoundError, ShopArenaError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, type=Path, help="the corpus whose partitions to stay clear of")
    parser.add_argument("--catalog", required=True, type=Path, help="the catalog (every GT product must be in it)")
    parser.add_argument("-n", type=int, required=True, help="problems to draw (fewer when fewer qualify)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--banks", type=Path, default=None, help="the bank set (default: the corpus's own)")
    parser.add_argument("--out", required=True, type=Path, help="problems JSONL to write (must not exist)")
    args = parser.parse_args(argv)
    try:
        if args.n < 1:
            raise ConfigError(f"-n {args.n}: draw at least one problem")
        if args.out.exists():
            raise ConfigError(f"{args.out} exists", hint="choose a new --out (nothing is overwritten)")
        if not (args.corpus / "split.json").is_file():
            raise NotFoundError(f"{args.corpus}: no split.json (not a corpus)", hint="pass a `corpus build --out`")
        from shoparena.corpus.export.common import read_jsonl_rows
        from shoparena.tasks.banks import BankSet
        from shoparena.tasks.loader import dump_problems
        from shoparena.train.harness import problems_of_rows
        from shoparena.train.teacher import (
            TeacherConfig,
            _catalog_check,
            draw_bank_problems,
            find_banks,
            held_out_problems,
        )

        config = TeacherConfig(banks=str(args.banks) if args.banks else None)
        banks = find_banks(config, args.corpus)
        split, held = held_out_problems(args.corpus, banks=banks)
        grpo = args.corpus / "grpo_train.jsonl"
        train_ids = {p.problem_id for p in problems_of_rows(read_jsonl_rows(grpo))} if grpo.is_file() else set()
        draw = draw_bank_problems(BankSet.load(banks), split, held, train_ids, args.n, args.seed,
                                  partitions=config.bank_partitions, known_product=_catalog_check(args.catalog))
        if not draw.problems:
            raise ConfigError("no bank problem qualifies", hint=f"refused: {dict(draw.refused)}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        dump_problems(draw.problems, args.out)
    except ShopArenaError as exc:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 4 if isinstance(exc, NotFoundError) else 2
    by_bucket: dict[str, int] = {}
    for p in draw.problems:
        by_bucket[p.bucket] = by_bucket.get(p.bucket, 0) + 1
    print(json.dumps({"out": str(args.out), "problems": len(draw.problems), "by_bucket": by_bucket,
                      "pool": draw.pool, "refused": dict(draw.refused), "checks": draw.checks}))
    return 0


if __name__ == "__main__":
    run_script(main)
