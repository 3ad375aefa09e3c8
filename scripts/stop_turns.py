"""What a model's think-then-stop turns say: the figures behind "a decision stated, no call made".

    python scripts/stop_turns.py RUN [RUN ...] [--json]

RUN is a model's run directory (the one holding ``calls.jsonl``: ``<evaluation>/models/<name>``, an RS or teacher
stage's ``samples/``), or an evaluation directory (every ``models/<name>`` inside it). Over the answered inference
turns of its call log, the think-then-stop turns are those the evaluation's diagnostics count
(:func:`shoparena.evaluate.diagnostics.is_think_then_stop`: no tool call, none lost to the parser, the reasoning or
text states a recommendation decision). For each run it prints:

- ``turns``: think-then-stop turns, the episodes with one, and those cut at the token cap;
- ``opens_recommending``: turns whose reasoning (or text, where there is no reasoning) opens with "Recommending",
  the expert's recommend template (``policy:expert`` writes "Recommending <id>. <why>" before its call);
- what the decision names: the digit runs of 6 or more in the sentence that states it (from where
  :data:`shoparena.env.turns.DECISION` matches in the turn's reasoning and text to the end of that sentence),
  against the product ids the episode's own searches had returned before that turn: ``names_returned_id`` (at
  least one was returned: the model held a valid id and did not call), ``names_unreturned_ids`` (ids, none of them
  returned), ``names_no_id`` (no id-like number: "Recommending 200.").

Reads only. Bad input (a missing directory, a directory without a call log, a line that is not JSON) is one
``error:`` line and a ``hint:`` line on stderr, with the README's exit codes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

ID = re.compile(r"(?<![\d-])\d{6,}(?![\d-])")
"""A product id as the catalogs write them: a run of 6 or more digits; shorter runs are prices, counts and list
numbers, and a hyphenated run ("1080-5945") is none."""
SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
OPENER = "Recommending"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", type=Path, nargs="+",
                   help="a model's run directory (calls.jsonl) or an evaluation directory")
    p.add_argument("--json", action="store_true", help="print one JSON object: run → figures")
    return p


def _run_dirs(path: Path) -> dict[str, Path]:
    """``label → run directory`` for one argument: the directory itself, or each model of an evaluation."""
    from shoparena.errors import NotFoundError

    if (path / "calls.jsonl").is_file():
        return {str(path): path}
    models = path / "models"
    found = {str(d): d for d in sorted(models.iterdir()) if (d / "calls.jsonl").is_file()} if models.is_dir() else {}
    if not found:
        raise NotFoundError(f"{path}: no calls.jsonl here or in {models}/*",
                            hint="pass a model's run directory or an evaluation directory `shoparena evaluate` wrote")
    return found


def decision_ids(call: dict[str, Any]) -> set[str]:
    """The id-like numbers (:data:`ID`) of the sentence in which the turn states its decision; empty when none is
    stated."""
    from shoparena.env.turns import DECISION, turn_text

    text = turn_text(call)
    found = DECISION.search(text)
    if found is None:
        return set()
    end = SENTENCE_END.search(text, found.end())
    return set(ID.findall(text[found.start():end.start() if end else len(text)]))


def stop_turns(run_dir: Path) -> dict[str, Any]:
    """The figures of the module docstring for one run directory."""
    from shoparena.errors import DataError
    from shoparena.evaluate.diagnostics import is_think_then_stop
    from shoparena.validator.run import read_run_file

    path = run_dir / "calls.jsonl"
    try:
        calls = read_run_file(path)
    except DataError as exc:
        raise DataError(exc.message,
                        hint=exc.hint or "pass a call log a run wrote; a damaged one is not read") from None
    if not all(isinstance(c, dict) for c in calls):
        raise DataError(f"{path}: a line is not a JSON object", hint="pass a call log a run wrote")
    seen: dict[tuple[Any, Any], set[str]] = {}
    counts: Counter[str] = Counter()
    episodes: set[tuple[Any, Any]] = set()
    for c in calls:  # one episode's records are appended in the order it made them
        key = (c.get("problem_id"), c.get("sample"))
        if c.get("kind") == "search":
            ids = c.get("result_product_ids")
            if isinstance(ids, list):
                seen.setdefault(key, set()).update(str(x) for x in ids if x is not None)
            continue
        if c.get("kind") != "inference" or c.get("status") != 200:
            continue
        counts["answered_turns"] += 1
        if not is_think_then_stop(c):
            continue
        counts["think_then_stop"] += 1
        episodes.add(key)
        counts["cut"] += c.get("truncated") is True
        first = (str(c.get("reasoning_content") or "").strip() or str(c.get("content") or "").strip())
        counts["opens_recommending"] += first.startswith(OPENER)
        named = decision_ids(c)
        if not named:
            counts["names_no_id"] += 1
        elif named & seen.get(key, set()):
            counts["names_returned_id"] += 1
        else:
            counts["names_unreturned_ids"] += 1
    keys = ("answered_turns", "think_then_stop", "cut", "opens_recommending", "names_returned_id",
            "names_unreturned_ids", "names_no_id")
    return {**{k: counts[k] for k in keys}, "episodes_think_then_stop": len(episodes)}


def main(argv: list[str] | None = None) -> int:
    """Print the figures (module docstring); the exit code."""
    args = _parser().parse_args(argv)
    from shoparena.errors import NotFoundError, ShopArenaError

    try:
        dirs: dict[str, Path] = {}
        for path in args.runs:
            if not path.is_dir():
                raise NotFoundError(f"{path}: no such directory",
                                    hint="pass a run directory or an evaluation directory")
            dirs.update(_run_dirs(path))
        body = {label: stop_turns(d) for label, d in dirs.items()}
    except ShopArenaError as exc:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    for label, f in body.items():
        print(f"{label}: {f['think_then_stop']} think-then-stop turns of {f['answered_turns']} answered, in "
              f"{f['episodes_think_then_stop']} episodes, {f['cut']} cut; {f['opens_recommending']} open with "
              f"\"{OPENER}\"; naming a returned id {f['names_returned_id']}, only unreturned ids "
              f"{f['names_unreturned_ids']}, no id {f['names_no_id']}")
    return 0


if __name__ == "__main__":
    run_script(main)
