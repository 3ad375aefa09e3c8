"""Compare two finished ``shoparena train`` runs, stage by stage: did the same inputs give the same bytes?

    python scripts/same_runs.py RUN_A RUN_B [--json]

For every stage both runs finished (``stage.json`` present in each):

- ``checkpoint``: the ``checkpoint_sha256`` each ``stage.json`` records, after checking it against the weights on disk
  (a run whose weights no longer match its record is refused: exit 3);
- ``losses``: the loss of every logged training step (the stage's ``log.jsonl``, else its ``<stage> step N`` lines
  in the run's ``train.log``); a step trained twice across a resume counts with its last loss;
- ``samples``: for a stage that sampled episodes (``samples/``: RS, teacher), its run lines without their
  ``seconds`` and its call records without their clock readings (``started_at``, ``duration_ms``), line by line.

A check that one run lacks (no step log, no samples) is reported as missing, not as the same. Prints one line per
stage and check, then ``SAME`` or ``DIFFERENT``; exit 0 when every check of every common stage is the same, 1 when
one differs or the runs share no finished stage, and the README's exit codes (``error:`` and ``hint:`` lines) on bad
input. Reads only: writes nothing, not even into the runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

STEP_LINE = re.compile(r"shoparena\.train: (?P<stage>[a-z]+) step (?P<step>\d+) (?P<body>\{.*\})\s*$")
"""A per-step line the training loop logs to ``train.log``: ``<stage> step <n> {json}``."""
CLOCK_FIELDS = {"runs": ("seconds",), "calls": ("started_at", "duration_ms")}
"""Per sample file: the fields that read a clock, left out of the comparison."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_a", type=Path, help="a `shoparena train --out` directory (manifest.json inside)")
    p.add_argument("run_b", type=Path, help="another one, made with the same recipe, corpus, base and seed")
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    return p


def _manifest(run: Path) -> dict[str, Any]:
    from shoparena.errors import DataError, NotFoundError
    from shoparena.seal import read_json

    path = run / "manifest.json"
    if not path.is_file():
        raise NotFoundError(f"{run}: not a training run (no manifest.json)",
                            hint="pass two directories `shoparena train --out` wrote")
    body = read_json(path, what="training manifest")
    if not isinstance(body, dict) or not str(body.get("format", "")).startswith("shoparena-train/"):
        raise DataError(f"{path}: not a training manifest", hint="pass two directories `shoparena train --out` wrote")
    return body


def _checkpoint(stage_dir: Path) -> str:
    """The stage's recorded checkpoint hash, refused unless its weights on disk still hash to it."""
    from shoparena.errors import DataError
    from shoparena.seal import read_json
    from shoparena.train.checkpoint import checkpoint_sha256, stage_model_dir

    body = read_json(stage_dir / "stage.json", what="stage file")
    recorded = body.get("checkpoint_sha256") if isinstance(body, dict) else None
    if not isinstance(recorded, str) or not isinstance(body.get("model_dir"), str):
        raise DataError(f"{stage_dir / 'stage.json'}: no checkpoint_sha256 or model_dir",
                        hint="the stage did not finish; resume its run with `shoparena train ... --resume`")
    model_dir = stage_model_dir(stage_dir, body["model_dir"])
    try:
        actual = checkpoint_sha256(model_dir)
    except OSError as exc:
        raise DataError(f"{model_dir}: cannot hash the stage's weights ({exc})",
                        hint="the run is damaged: train it again with `--resume`") from exc
    if actual != recorded:
        raise DataError(f"{model_dir}: the weights hash {actual[:12]}…, their stage.json records {recorded[:12]}…",
                        hint="the run was changed after it finished: train it again with `--resume`")
    return recorded


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _losses(run: Path, stage: str) -> dict[int, float] | None:
    """Step → loss of one stage: its ``log.jsonl`` where it keeps one (read as the stage reads it when it resumes,
    :func:`shoparena.train.sft.read_step_log`), else the run's ``train.log``; None when neither logs a step of it."""
    from shoparena.errors import DataError
    from shoparena.train.sft import read_step_log

    log = run / stage / "log.jsonl"
    try:
        rows, _ = read_step_log(log)
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{log}: not a step log ({exc})", hint="the run is damaged: train it again") from None
    losses = {int(r["step"]): float(r["loss"]) for r in rows if _number(r.get("loss"))}
    text_log = run / "train.log"
    if not losses and text_log.is_file():
        for line in text_log.read_text(encoding="utf-8", errors="replace").split("\n"):
            m = STEP_LINE.search(line)
            if not m or m["stage"] != stage:
                continue
            try:
                body = json.loads(m["body"])
            except ValueError:
                continue
            if isinstance(body, dict) and _number(body.get("loss")):
                losses[int(m["step"])] = float(body["loss"])
    return losses or None


def _samples(stage_dir: Path) -> dict[str, list[Any]] | None:
    """The stage's sample files as parsed lines, clock readings left out; None when it sampled nothing."""
    root = stage_dir / "samples"
    if not root.is_dir():
        return None
    out: dict[str, list[Any]] = {}
    for name, clock in CLOCK_FIELDS.items():
        path = root / f"{name}.jsonl"
        if not path.is_file():
            continue
        rows: list[Any] = []
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = line  # a damaged line is compared as text
            if isinstance(row, dict):
                row = {k: v for k, v in row.items() if k not in clock}
            rows.append(row)
        out[name] = rows
    return out or None


def _same(a: Any, b: Any) -> str:
    if a is None and b is None:
        return "absent"
    if a is None or b is None:
        return "missing in " + ("a" if a is None else "b")
    return "same" if a == b else "different"


def _first_difference(a: dict[int, float], b: dict[int, float]) -> str:
    for step in sorted(set(a) | set(b)):
        if a.get(step) != b.get(step):
            return f"first at step {step}: {a.get(step)} / {b.get(step)}"
    return ""


def compare(run_a: Path, run_b: Path) -> dict[str, Any]:
    """Every check of every stage both runs finished (module docstring)."""
    from shoparena.errors import ConfigError

    if run_a.resolve() == run_b.resolve():
        raise ConfigError(f"{run_a} and {run_b} are the same directory", hint="compare two runs")
    manifests = [_manifest(run_a), _manifest(run_b)]
    notes: list[str] = []
    for key in ("recipe_sha256", "corpus_training_sha256", "base_sha256", "seeds"):
        if manifests[0].get(key) != manifests[1].get(key):
            notes.append(f"the runs' {key} differ: they were not made from the same inputs")
    order = [s for s in manifests[0].get("stages_requested") or [] if isinstance(s, str)]
    common = [s for s in order if (run_a / s / "stage.json").is_file() and (run_b / s / "stage.json").is_file()]
    stages: dict[str, dict[str, Any]] = {}
    for stage in common:
        sha = [_checkpoint(run_a / stage), _checkpoint(run_b / stage)]
        losses = [_losses(run_a, stage), _losses(run_b, stage)]
        samples = [_samples(run_a / stage), _samples(run_b / stage)]
        entry: dict[str, Any] = {
            "checkpoint": "same" if sha[0] == sha[1] else "different", "sha256": sha,
            "losses": _same(*losses), "steps": [len(x) if x else 0 for x in losses],
            "samples": _same(*samples),
            "sample_lines": [sum(len(v) for v in x.values()) if x else 0 for x in samples]}
        if entry["losses"] == "different" and losses[0] and losses[1]:
            entry["losses_note"] = _first_difference(losses[0], losses[1])
        stages[stage] = entry
    checks = [v for e in stages.values() for k, v in e.items() if k in ("checkpoint", "losses", "samples")]
    same = bool(stages) and all(v in ("same", "absent") for v in checks)
    return {"runs": [str(run_a), str(run_b)], "stages": stages, "notes": notes,
            "unfinished": [s for s in order if s not in common], "same": same}


def main(argv: list[str] | None = None) -> int:
    """Run the comparison (module docstring); the exit code."""
    args = _parser().parse_args(argv)
    from shoparena.errors import ShopArenaError

    try:
        body = compare(args.run_a, args.run_b)
    except ShopArenaError as exc:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(body, indent=2))
        return 0 if body["same"] else 1
    for note in body["notes"]:
        print(f"note: {note}")
    for stage, e in body["stages"].items():
        print(f"{stage}: checkpoint {e['checkpoint']} ({e['sha256'][0][:12]}… / {e['sha256'][1][:12]}…)")
        print(f"{stage}: losses {e['losses']} ({e['steps'][0]} / {e['steps'][1]} steps)"
              + (f", {e['losses_note']}" if e.get("losses_note") else ""))
        print(f"{stage}: samples {e['samples']} ({e['sample_lines'][0]} / {e['sample_lines'][1]} lines)")
    if body["unfinished"]:
        print(f"not compared (unfinished in one run or both): {', '.join(body['unfinished'])}")
    if not body["stages"]:
        print("no stage finished in both runs")
    print("SAME" if body["same"] else "DIFFERENT")
    return 0 if body["same"] else 1


if __name__ == "__main__":
    run_script(main)
