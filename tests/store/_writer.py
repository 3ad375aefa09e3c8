"""A writer process for the crash and concurrency tests (run as a script, not collected by pytest).

    python _writer.py URL --start 0 --count 400 [--seed 7] [--size 20000] [--batch 1]

Appends synthetic records ``start … start+count-1`` (``--batch`` > 1: ``append_many`` in batches) and prints,
after each committed call, one ``ack <record_id>`` line per record of that call, flushed; at the end
``done <records newly added>``.
"""

from __future__ import annotations

import argparse
import sys

from shoparena.store import open_store
from shoparena.store.testing import synthetic_record


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    added = 0
    out = sys.stdout
    with open_store(args.url) as store:
        ids = range(args.start, args.start + args.count)
        for k in range(0, len(ids), args.batch):
            records = [synthetic_record(i, seed=args.seed, size=args.size) for i in ids[k:k + args.batch]]
            if args.batch == 1:  # unsealed: append seals it
                added += store.append(records[0])
            else:  # sealed beforehand: append_many checks it
                records = [r.sealed(0) for r in records]
                added += store.append_many(records)
            records = [r if r.is_sealed else r.sealed(0) for r in records]  # same ids, whatever created_at
            out.write("".join(f"ack {r.record_id}\n" for r in records))
            out.flush()
    out.write(f"done {added}\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
