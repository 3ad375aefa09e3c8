"""The assistant turns of training rows, against the serving cap per turn: the evidence for the think-then-stop turn.

    python scripts/row_turns.py FILE.jsonl [FILE.jsonl ...] --tokenizer DIR [--turn-tokens 256] [--tools A,B,…]
        [--json]

A file holds SFT rows (``messages``, ``tools``: the corpus's ``sft_*.jsonl``) or KTO rows (``prompt``,
``completion``, ``label``, ``tools``: ``kto_*.jsonl``); which, is read from its first row. ``--tools``: only the
rows that offer exactly these tools, as a recipe's ``tools`` profile keeps them (the others counted ``off_profile``).
Per file it prints:

- rows, assistant turns (SFT: every assistant turn, all trained; KTO: the judged turn of each row, the one trained);
- callless turns (no tool call, :func:`shoparena.env.turns.callless`), think-then-stop-shaped turns (callless and
  the reasoning or text states the decision, :func:`shoparena.env.turns.think_then_stop`), and the rows the
  training guard leaves out (a trained turn ends a thought without its call before any ``terminate``,
  :func:`shoparena.env.turns.open_callless_turns`; ``callless_turns: drop``);
- trained-turn token lengths (think + content + tool calls + end of turn, rendered by the tokenizer's chat template
  as training renders them, :func:`shoparena.train.format.render_sample`): p50 / p90 / max, how many are over the
  cap and how many sit within 16 tokens under it;
- what fitting to the cap does (:func:`shoparena.train.format.fit_turns`, ``turn_tokens``): turns shortened, turns
  left out of the loss (for KTO: rows dropped), and the same lengths after fitting, the turns within 16 tokens under
  the cap counted by the tool they call — a fitted turn is shortened to just under the cap, so a model trained on
  it learns turns that, sampled at a temperature, can run past the cap and be cut before their call;
- KTO: the same split by label, and the judged turns that call ``recommend_product``, with those among them that
  state the decision in their reasoning first (for undesirable rows: a failed trace's final recommend turn, the
  shape ``undesirable_exclude: [recommend_product]`` leaves out).

Bad input (a missing or unreadable file, a line that is not a JSON object, rows of neither kind, no tokenizer) is one
``error:`` line and a ``hint:`` line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script
from shoparena.env.turns import (
    call_names,
    callless,
    open_callless_turns,
    states_decision,
    think_then_stop,
    turn_text,
)
from shoparena.errors import ConfigError, DataError, ShopArenaError

NEAR = 16
"""A turn within this many tokens under the cap counts as pushed up to it."""


def _runs(mask: Sequence[int]) -> list[int]:
    out, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            out.append(i - start)
            start = None
    return out


def _pct(values: Sequence[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def _lengths(values: Sequence[int], cap: int) -> dict[str, int | None]:
    return {"p50": _pct(values, 0.5), "p90": _pct(values, 0.9), "max": max(values) if values else None,
            "over_cap": sum(v > cap for v in values), "near_cap": sum(cap - NEAR <= v <= cap for v in values)}


class _Group:
    """The counts of one set of turns (a file, or one KTO label)."""

    def __init__(self) -> None:
        self.rows = self.turns = self.callless = self.think_then_stop = self.guard_rows = 0
        self.unrenderable = self.shortened = self.untrained = 0
        self.raw: list[int] = []
        self.fitted: list[int] = []
        self.near_by_tool: dict[str, int] = {}
        self.recommend = self.recommend_decision = 0

    def to_dict(self, cap: int, kto: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rows": self.rows, "turns": self.turns, "callless": self.callless, "think_then_stop": self.think_then_stop,
            "rows_guard_drops": self.guard_rows, "unrenderable_rows": self.unrenderable,
            "tokens": _lengths(self.raw, cap), "fit": {"shortened": self.shortened, "out_of_loss": self.untrained,
                                                       "tokens": _lengths(self.fitted, cap),
                                                       "near_cap_by_tool": dict(sorted(self.near_by_tool.items()))}}
        if kto:
            out["recommend_turns"] = self.recommend
            out["recommend_after_stated_decision"] = self.recommend_decision
        return out


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})",
                          hint="pass JSONL row files, e.g. CORPUS/sft_train.jsonl CORPUS/kto_train.jsonl") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}:{n}: not JSON ({exc})", hint="pass JSONL row files") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: a line is not a JSON object", hint="pass JSONL row files")
        rows.append(row)
    if not rows:
        raise DataError(f"{path}: no rows", hint="pass a non-empty JSONL row file")
    return rows


def _kind(path: Path, rows: Sequence[dict[str, Any]]) -> str:
    first = rows[0]
    if isinstance(first.get("messages"), list):
        return "sft"
    if {"prompt", "completion", "label"} <= first.keys():
        return "kto"
    raise DataError(f"{path}: rows are neither SFT rows (messages) nor KTO rows (prompt / completion / label)",
                    hint="pass the corpus's sft_*.jsonl or kto_*.jsonl")


def _conversation(path: Path, n: int, row: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    if kind == "sft":
        msgs = row.get("messages")
    else:
        prompt, completion = row.get("prompt"), row.get("completion")
        if not (isinstance(prompt, list) and isinstance(completion, list) and len(completion) == 1
                and isinstance(row.get("label"), bool)):
            raise DataError(f"{path}: row {n} is not a KTO row (prompt list, one completion turn, boolean label)",
                            hint="pass one kind of rows per file")
        msgs = [*prompt, *completion]
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        raise DataError(f"{path}: row {n} has no message list", hint="pass one kind of rows per file")
    return msgs


def analyse(path: Path, tokenizer: Any, cap: int, tools: Sequence[str] | None = None) -> dict[str, Any]:
    """The figures of one row file (module docstring); ``tools``: only the rows offering exactly these tools."""
    from shoparena.train.format import FormatConfig, fit_turns, render_sample
    from shoparena.train.sft import in_profile

    every = _read(path)
    kind = _kind(path, every)
    rows, off_profile = in_profile(every, tools)
    config = FormatConfig(max_length=1 << 20, turn_tokens=cap)
    groups: dict[str, _Group] = {}
    for n, row in enumerate(rows, 1):
        msgs = _conversation(path, n, row, kind)
        label = "all" if kind == "sft" else ("desirable" if row["label"] else "undesirable")
        g = groups.setdefault(label, _Group())
        g.rows += 1
        assistant = [m for m in msgs if m.get("role") == "assistant"]
        judged = list(range(len(assistant))) if kind == "sft" else [len(assistant) - 1]
        turns = [assistant[k] for k in judged]
        g.turns += len(turns)
        g.callless += sum(callless(m) for m in turns)
        g.think_then_stop += sum(think_then_stop(m) for m in turns)
        g.guard_rows += bool(set(open_callless_turns(msgs)) & set(judged))
        if kind == "kto" and "recommend_product" in call_names(turns[0]):
            g.recommend += 1
            g.recommend_decision += states_decision(turn_text(turns[0]))
        try:
            sample = render_sample(tokenizer, msgs, row.get("tools"))
            raw = _runs(sample.assistant_masks)
            if len(raw) != len(assistant):
                raise DataError("trained runs do not match the assistant turns")
            _, fitted_sample, _, hopeless = fit_turns(tokenizer, msgs, row.get("tools"), config, sample) \
                if max(raw) > cap else (msgs, sample, 0, [])
        except DataError:
            g.unrenderable += 1
            continue
        fitted = _runs(fitted_sample.assistant_masks)
        for k in judged:
            g.raw.append(raw[k])
            if k in hopeless:
                g.untrained += 1
                continue
            g.fitted.append(fitted[k])
            if cap - NEAR <= fitted[k] <= cap:
                tool = (call_names(assistant[k]) or ["(no call)"])[0]
                g.near_by_tool[tool] = g.near_by_tool.get(tool, 0) + 1
            g.shortened += fitted[k] != raw[k]
    out: dict[str, Any] = {"file": str(path), "kind": kind, "rows": len(every), "off_profile": off_profile,
                           "turn_tokens": cap}
    out["groups"] = {k: v.to_dict(cap, kind == "kto") for k, v in sorted(groups.items())}
    return out


def _line(name: str, d: dict[str, Any]) -> list[str]:
    t, f = d["tokens"], d["fit"]
    lines = [f"  {name}: rows {d['rows']}, turns {d['turns']}, callless {d['callless']}, think-then-stop "
             f"{d['think_then_stop']}, rows the guard drops {d['rows_guard_drops']}"
             + (f", unrenderable rows {d['unrenderable_rows']}" if d["unrenderable_rows"] else ""),
             f"    trained-turn tokens p50 {t['p50']} / p90 {t['p90']} / max {t['max']}; over the cap {t['over_cap']}, "
             f"within {NEAR} under it {t['near_cap']}",
             f"    fitted: shortened {f['shortened']}, out of the loss {f['out_of_loss']}; tokens p50 "
             f"{f['tokens']['p50']} / p90 {f['tokens']['p90']} / max {f['tokens']['max']}, within {NEAR} under the "
             f"cap {f['tokens']['near_cap']} (by the tool they call: "
             + (", ".join(f"{k} {v}" for k, v in f["near_cap_by_tool"].items()) or "none") + ")"]
    if "recommend_after_stated_decision" in d:
        lines.append(f"    recommend_product turns {d['recommend_turns']}, stating the decision in their reasoning "
                     f"first {d['recommend_after_stated_decision']}")
    return lines


def _tools(spec: str | None) -> tuple[str, ...] | None:
    from shoparena.env.output import known_tools

    if spec is None:
        return None
    names = tuple(n.strip() for n in spec.split(",") if n.strip())
    unknown = sorted(set(names) - known_tools())
    if not names or unknown:
        raise ConfigError(f"--tools {spec!r}: " + (f"unknown tools {', '.join(unknown)}" if unknown else "no names"),
                          hint=f"registered tools: {', '.join(sorted(known_tools()))}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="SFT or KTO row files (JSONL)")
    parser.add_argument("--tokenizer", required=True, type=Path, help="a transformers checkpoint dir (its tokenizer)")
    parser.add_argument("--turn-tokens", type=int, default=256, help="the serving cap per turn (default 256)")
    parser.add_argument("--tools", default=None,
                        help="comma-separated tool names: only the rows offering exactly these (a recipe's profile)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args(argv)
    try:
        if args.turn_tokens < 16:
            raise ConfigError(f"--turn-tokens {args.turn_tokens} is below 16", hint="the serving cap, e.g. 256")
        tools = _tools(args.tools)
        if not (args.tokenizer / "tokenizer_config.json").is_file():
            raise ConfigError(f"no tokenizer at {args.tokenizer} (tokenizer_config.json missing)",
                              hint="pass a transformers checkpoint dir, e.g. /tmp/sa/smollm2-135m")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
        results = [analyse(path, tokenizer, args.turn_tokens, tools) for path in args.files]
    except ShopArenaError as exc:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"turn_tokens": args.turn_tokens, "near": NEAR, "tokenizer": str(args.tokenizer),
                          "tools": list(tools) if tools else None, "files": results}, indent=1))
        return 0
    for r in results:
        off = f", {r['off_profile']} off the tool profile" if r["off_profile"] else ""
        print(f"{r['file']} ({r['kind']}, {r['rows']} rows{off}, cap {r['turn_tokens']} tokens)")
        for name, d in r["groups"].items():
            print("\n".join(_line(name, d)))
        if not r["groups"]:
            print("  no row offers exactly these tools")
    return 0


if __name__ == "__main__":
    run_script(main)
