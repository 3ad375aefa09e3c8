"""The teacher stage's rows without its training: sample the teacher on a corpus's train problems as the stage does,
keep the successes, and say what fitting them to the serving cap does.

    python scripts/teacher_rows.py --corpus DIR --catalog DIR --recipe RECIPE --tokenizer DIR --out OUT
        [--teacher URI] [--json]

The teacher, its samples per problem, temperature, seed and per-episode timeout, and the fitting (``max_length``,
``turn_tokens``, ``compact``, the tool profile) come from the recipe's ``teacher:`` section; ``--teacher`` replaces
the teacher URI (for example ``policy:expert?view=2``, the expert asking for no more products per call than
``compact.max_items`` shows the student). The problems are the corpus's train problems (``grpo_train.jsonl``), the
stage's draw without ``bank_problems`` (the first ``max_problems`` when the recipe sets it). OUT receives the run (``samples/``), the successful rows (``rows.jsonl``, as
the stage trains on them before fitting; ``scripts/row_turns.py`` reads them) and ``teacher_rows.json`` (the
settings and figures). Rerun with the same settings to reuse the samples; other settings in an existing OUT are
refused. Printed: the teacher's ASR, rows, its ``view_product_information`` calls and products asked per call, and
the fit counts (:func:`shoparena.train.teacher.fit_rows`).

Bad input (a missing corpus, catalog, recipe or tokenizer; a recipe without a ``teacher:`` section; an OUT made with
other settings) is one ``error:`` line and a ``hint:`` line on stderr, exit 2.
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
from shoparena.errors import ConfigError, ShopArenaError

MANIFEST = "teacher_rows.json"


def view_calls(rows: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(``view_product_information`` calls, products they ask for) over the assistant turns of ``rows``."""
    calls = ids = 0
    for row in rows:
        for message in row["messages"]:
            if message.get("role") != "assistant":
                continue
            for call in message.get("tool_calls") or []:
                fn = call.get("function", call)
                if fn.get("name") != "view_product_information":
                    continue
                args = fn.get("arguments")
                args = json.loads(args) if isinstance(args, str) else args or {}
                calls += 1
                ids += len([x for x in str(args.get("product_ids", "")).split(",") if x.strip()])
    return calls, ids


def run(corpus: Path, catalog: Path, recipe_path: str, tokenizer_dir: Path, out: Path,
        teacher: str | None) -> dict[str, Any]:
    from shoparena.corpus.export import read_jsonl_rows
    from shoparena.train.harness import collect_successes, problems_of_rows
    from shoparena.train.recipe import load_recipe
    from shoparena.train.teacher import fit_rows

    recipe, _ = load_recipe(recipe_path)
    config = recipe.teacher
    if config is None:
        raise ConfigError(f"{recipe_path}: the recipe has no teacher: section", hint="use a recipe that trains stage 3")
    if teacher:
        config = config.model_copy(update={"teacher": teacher})
    if not (corpus / "grpo_train.jsonl").is_file():
        raise ConfigError(f"{corpus}: no grpo_train.jsonl (not a corpus with train problems)",
                          hint="pass the --out of `shoparena corpus build --banks …`")
    if not catalog.is_dir():
        raise ConfigError(f"no catalog directory at {catalog}", hint="pass the catalog the corpus was built on")
    if not (tokenizer_dir / "tokenizer_config.json").is_file():
        raise ConfigError(f"no tokenizer at {tokenizer_dir} (tokenizer_config.json missing)",
                          hint="pass the checkpoint the teacher stage continues (its tokenizer renders the rows)")
    settings = {"corpus": str(corpus.resolve()), "catalog": str(catalog.resolve()), "teacher": config.teacher,
                "max_problems": config.max_problems, "n_samples": config.n_samples, "temperature": config.temperature, "seed": config.seed,
                "timeout_s": config.timeout_s}
    manifest = out / MANIFEST
    if out.exists() and any(out.iterdir()):
        try:
            before = json.loads(manifest.read_text(encoding="utf-8")).get("settings")
        except (OSError, ValueError, AttributeError):
            before = None
        if before != settings:
            raise ConfigError(f"{out} is not this script's output with these settings",
                              hint="choose another --out (rerunning with the same settings reuses its samples)")
    out.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"kind": "teacher-rows", "settings": settings}, indent=1), encoding="utf-8")
    problems = problems_of_rows(read_jsonl_rows(corpus / "grpo_train.jsonl"))
    if config.max_problems:  # the stage's own cut
        problems = problems[: config.max_problems]
    got = collect_successes(catalog, problems, model=config.teacher, k=config.n_samples,
                            temperature=config.temperature, seed=config.seed, out_dir=out / "samples",
                            timeout_s=config.timeout_s, resume=True)
    with open(out / "rows.jsonl", "w", encoding="utf-8") as fh:
        for row in got.rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    fitted, counts = fit_rows(tokenizer, got.rows, config)
    calls, ids = view_calls(got.rows)
    figures = {"problems": len(problems), "samples": dict(got.counts), "asr": got.asr, "rows": len(got.rows),
               "view_calls": calls, "products_per_view_call": round(ids / calls, 2) if calls else None,
               "rows_fitting": len(fitted), "fit_counts": dict(counts)}
    manifest.write_text(json.dumps({"kind": "teacher-rows", "settings": settings, "figures": figures}, indent=1),
                        encoding="utf-8")
    return {"settings": settings, "figures": figures}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, type=Path, help="a corpus directory (corpus build --banks)")
    parser.add_argument("--catalog", required=True, type=Path, help="the catalog the corpus was built on")
    parser.add_argument("--recipe", required=True, help="a recipe name or YAML file with a teacher: section")
    parser.add_argument("--tokenizer", required=True, type=Path, help="the checkpoint the teacher stage continues")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--teacher", default=None, help="a model URI replacing the recipe's teacher")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args(argv)
    try:
        body = run(args.corpus, args.catalog, args.recipe, args.tokenizer, args.out, args.teacher)
    except ShopArenaError as exc:
        print(f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(body, indent=1))
        return 0
    f = body["figures"]
    c = f["fit_counts"]
    print(f"{body['settings']['teacher']}: ASR {f['asr']:.3f} on {f['problems']} problems × "
          f"{body['settings']['n_samples']}; {f['rows']} rows; {f['view_calls']} view calls, "
          f"{f['products_per_view_call']} products each; fitting: {f['rows_fitting']} rows kept, "
          f"{c.get('turns_shortened', 0)} turns shortened in {c.get('rows_shortened', 0)} rows, "
          f"{c.get('turns_untrained', 0)} out of the loss, {c.get('dropped_too_long', 0)} rows too long")
    print(f"rows: {args.out / 'rows.jsonl'} (scripts/row_turns.py reads them)")
    return 0


if __name__ == "__main__":
    run_script(main)
