"""``shoparena train RECIPE``: run a training recipe's stages over a built corpus (a thin face over
:func:`shoparena.train.recipe.run_recipe`); prints one row per stage or the run manifest as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json
from shoparena.train import BUILTIN_RECIPES

RECIPE_HELP = f"A built-in recipe ({', '.join(BUILTIN_RECIPES)}: shoparena/train/recipes/) or a recipe YAML file."


def train(
    recipe: Annotated[str, typer.Argument(help=RECIPE_HELP)],
    corpus: Annotated[Path, typer.Option("--corpus", help="A corpus directory (`shoparena corpus build --out`).")],
    out: Annotated[Path, typer.Option("--out", help="Run directory (one folder per stage, manifest.json).")],
    resume: Annotated[bool, typer.Option("--resume", help="Skip finished stages; continue an interrupted one "
                                                          "from its last checkpoint.")] = False,
    stages: Annotated[str | None, typer.Option("--stages", help="Comma-separated subset of "
                                                                "sft,rs,teacher,kto,grpo.")] = None,
    catalog: Annotated[Path | None, typer.Option("--catalog", help="Catalog directory the harness stages (rs, "
                                                                   "teacher, grpo) search.")] = None,
    base: Annotated[str | None, typer.Option("--base", help="Override the recipe's base model (tiny, hf:DIR or a "
                                                            "checkpoint directory).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run manifest as JSON.")] = False,
) -> None:
    """Train: SFT → rejection-sampled re-SFT → teacher SFT → KTO → Dr. GRPO, each stage resumable."""
    import contextlib
    import os
    import sys

    from shoparena.train.recipe import load_recipe, run_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    spec, text = load_recipe(recipe)
    if base is not None:
        spec = spec.model_copy(update={"base": base})
    chosen = [s.strip() for s in stages.split(",") if s.strip()] if stages else None
    if catalog is None:
        from shoparena.corpus import read_manifest

        src = (read_manifest(corpus, verify=False).get("sources") or {}) if corpus.is_dir() else {}
        found = src.get("catalog") if isinstance(src, dict) else None
        catalog = Path(found) if found else None
    with contextlib.redirect_stdout(sys.stderr):  # trainers print their log dicts; stdout is for the result
        manifest = run_recipe(spec, corpus, out, stages=chosen, resume=resume, catalog_dir=catalog,
                              recipe_text=text, progress=not as_json and err_console.is_terminal)
    if as_json:
        print_json(manifest.model_dump(mode="json"))
        return
    table = Table(title=f"train {spec.name} → {out}", title_justify="left")
    for col in ("stage", "steps", "loss first → last", "eval loss", "tokens/s", "seconds", "checkpoint"):
        table.add_column(col, justify="left" if col in ("stage", "checkpoint") else "right")
    for r in manifest.stages:
        m = r.metrics
        first, last = m.get("loss_first"), m.get("loss_last")
        loss = f"{first:.3f} → {last:.3f}" if first is not None and last is not None else "–"
        ev = f"{m['eval_loss']:.3f}" if m.get("eval_loss") is not None else "–"
        skipped = " (resumed: done)" if r.stage in manifest.skipped else ""
        table.add_row(r.stage + skipped, str(r.steps), loss, ev, f"{r.tokens_per_s or 0:.0f}", f"{r.seconds:.1f}",
                      r.checkpoint_sha256[:12])
    console.print(table)
    console.print(f"final model: hf:{manifest.final_model}  (manifest: {out / 'manifest.json'})")
