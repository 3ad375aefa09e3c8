"""``shoparena train RECIPE``: run a training recipe's stages over a built corpus (a thin face over
:func:`shoparena.train.recipe.run_recipe`). The console shows a progress bar per stage phase, one line per finished
stage and the result table (or the run manifest as JSON); the libraries' warnings and the trainers' per-step logs go
to ``OUT/train.log`` (``--verbose``: on the console as they come)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json, progress_bar
from shoparena.train import BUILTIN_RECIPES

if TYPE_CHECKING:
    from shoparena.train.types import StageResult

RECIPE_HELP = (f"A built-in recipe ({', '.join(BUILTIN_RECIPES)}: shoparena/train/recipes/) or a recipe YAML file "
               "(the experiments' recipes: docs/experiments/recipes/*.yaml).")
LOG_FILE = "train.log"
"""The run's log file, inside ``--out``: library warnings and every trainer's per-step log."""


def train(
    recipe: Annotated[str, typer.Argument(help=RECIPE_HELP)],
    corpus: Annotated[Path, typer.Option("--corpus", help="A corpus directory (`shoparena corpus build --out`).")],
    out: Annotated[Path, typer.Option("--out", help="Run directory (one folder per stage, manifest.json, "
                                                    "train.log).")],
    resume: Annotated[bool, typer.Option("--resume", help="Skip finished stages; continue an interrupted one "
                                                          "from its last checkpoint.")] = False,
    stages: Annotated[str | None, typer.Option("--stages", help="Comma-separated subset of "
                                                                "sft,rs,teacher,kto,grpo.")] = None,
    catalog: Annotated[Path | None, typer.Option("--catalog", help="Catalog directory the harness stages (rs, "
                                                                   "teacher, grpo) search.")] = None,
    base: Annotated[str | None, typer.Option("--base", help="Override the recipe's base model (tiny, hf:DIR or a "
                                                            "checkpoint directory).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run manifest as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show library warnings and the trainers' per-step logs "
                                                            "on the console instead of OUT/train.log.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace a training run in --out made with another recipe, "
                                                        "corpus or base.")] = False,
) -> None:
    """Train: SFT → rejection-sampled re-SFT → teacher SFT → KTO → Dr. GRPO, each stage resumable."""
    import os

    from shoparena.train.recipe import load_recipe, run_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    chosen = _stages(stages)  # a bad --stages is refused before the recipe or the corpus is read
    spec, text = load_recipe(recipe)
    if base is not None:
        spec = spec.model_copy(update={"base": base})
    if catalog is None:
        from shoparena.artefact import resolve_input
        from shoparena.corpus import read_manifest

        src = (read_manifest(corpus, verify=False).get("sources") or {}) if corpus.is_dir() else {}
        found = src.get("catalog") if isinstance(src, dict) else None
        catalog = resolve_input(found, corpus) if isinstance(found, str) and found else None

    def finished(result: StageResult, skipped: bool) -> None:
        if not as_json:
            state = "found done (--resume)" if skipped else f"{result.steps} steps, {result.seconds:.1f} s"
            err_console.print(f"[dim]  {result.stage}: {state}[/]")

    _claim(out, corpus=corpus, catalog=catalog, base=spec.base, recipe_text=text, recipe=recipe, resume=resume,
           force=force)
    from shoparena.artefact import fresh_out

    with fresh_out(out), _quiet_run(out, verbose=verbose):  # a run refused before any work leaves no directory
        manifest = run_recipe(spec, corpus, out, stages=chosen, resume=resume, catalog_dir=catalog,
                              recipe_text=text, progress=False if as_json else progress_bar, on_stage=finished)
    for name in manifest.redone:
        err_console.print(f"[yellow]{name}: the weights under {out / name} no longer matched the hash its stage.json "
                          "records; the stage was trained again[/]")
    if as_json:
        from shoparena.train.recipe import portable

        print_json(portable(manifest, out).model_dump(mode="json"))  # as manifest.json holds it
        return
    table = Table(title=f"train {spec.name} → {out}", title_justify="left")
    for col in ("stage", "steps", "loss first → last", "eval loss", "tokens/s", "seconds", "cpu s", "peak GiB",
                "checkpoint"):
        table.add_column(col, justify="left" if col in ("stage", "checkpoint") else "right")
    for r in manifest.stages:
        m = r.metrics
        first, last = m.get("loss_first"), m.get("loss_last")
        loss = f"{first:.3f} → {last:.3f}" if first is not None and last is not None else "–"
        ev = f"{m['eval_loss']:.3f}" if m.get("eval_loss") is not None else "–"
        skipped = (" (resumed: done)" if r.stage in manifest.skipped else
                   " (trained again: its weights had changed)" if r.stage in manifest.redone else "")
        cpu = m.get("stage_cpu_s")  # the whole stage over every process that worked on it
        peak = m.get("stage_peak_rss_mib")  # the stage's peak resident set (shoparena.train.clock)
        table.add_row(r.stage + skipped, str(r.steps), loss, ev, f"{r.tokens_per_s or 0:.0f}", f"{r.seconds:.1f}",
                      f"{cpu:.0f}" if isinstance(cpu, (int, float)) else "–",
                      f"{peak / 1024:.1f}" if isinstance(peak, int) else "–", r.checkpoint_sha256[:12])
    console.print(table)
    if manifest.cpu_s is not None:
        wall = f", {manifest.stages_wall_s:.0f} s wall" if manifest.stages_wall_s is not None else ""
        console.print(f"compute: {manifest.cpu_s:.0f} CPU-s{wall} over the run's stages, every process included")
    console.print(f"final model: hf:{manifest.final_model}  (manifest: {out / 'manifest.json'}, log: "
                  f"{out / LOG_FILE})")


def _stages(value: str | None) -> list[str] | None:
    """The ``--stages`` subset: ``None`` (the recipe's stages) when the option is not given. An empty value (``''``
    or ``','``), an empty name (``sft,,kto``) or an unknown one is a :class:`~shoparena.errors.ConfigError` (exit 2)
    listing the stages: a run that trains nothing must not look like one that trained."""
    from shoparena.errors import ConfigError, closest
    from shoparena.train.recipe import STAGES

    if value is None:
        return None
    known = ",".join(STAGES)
    names = [s.strip() for s in value.split(",")]
    if not any(names):
        raise ConfigError(f"--stages {value!r} names no stage",
                          hint=f"a comma-separated subset of {known}; leave --stages out to run the recipe's stages")
    if not all(names):
        raise ConfigError(f"--stages {value!r} has an empty stage name", hint=f"a comma-separated subset of {known}")
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        near = closest(unknown[0], tuple(STAGES))
        raise ConfigError(f"--stages: unknown stage {unknown[0]!r}" + (f" (did you mean {near!r}?)" if near else ""),
                          hint=f"the stages are {known}")
    return names


def _claim(out: Path, *, corpus: Path, catalog: Path | None, base: str, recipe_text: str, recipe: str,
           resume: bool, force: bool) -> None:
    """Refuse an --out that is another command's artefact, one of the run's inputs, or a training run made with
    another recipe, corpus or base (without --resume, which keeps only the stages whose key still matches)."""
    import hashlib

    from shoparena.artefact import Found, claim_out
    from shoparena.corpus import read_manifest, training_hash

    def differs(found: Found) -> list[str]:
        if found.body is None or resume:
            return []
        # the corpus as the stages read it (its training files and split) where the run recorded that, else (a run
        # made before it did) the whole corpus manifest
        field = "corpus_training_sha256" if found.body.get("corpus_training_sha256") else "corpus_manifest_sha256"
        body = read_manifest(corpus, verify=False) if (corpus / "manifest.json").is_file() else {}
        corpus_sha = training_hash(body) if field == "corpus_training_sha256" else body.get("manifest_hash")
        now = {"recipe": hashlib.sha256(recipe_text.encode()).hexdigest(), "corpus": corpus_sha, "base": base}
        was = {"recipe": found.body.get("recipe_sha256"), "corpus": found.body.get(field),
               "base": found.body.get("base")}
        return [f"{k} {'(its text)' if k == 'recipe' else repr(was[k])} (asked: "
                f"{recipe if k == 'recipe' else repr(now[k])})" for k in now if now[k] != was[k]]

    base_dir = None if base == "tiny" else Path(base.removeprefix("hf:")).expanduser()
    claim_out(out, "train", inputs=[("--corpus", corpus), ("--catalog", catalog), ("--base", base_dir)],
              differs=differs, force=force, ignore=(LOG_FILE,),
              again=f"shoparena train {recipe} --corpus {corpus} --out {out} --resume")


@contextlib.contextmanager
def _quiet_run(out: Path, *, verbose: bool) -> Iterator[None]:
    """While the stages run: library warnings and log records, the trainers' per-step logs (the
    ``shoparena.train`` logger) and anything a library prints go to ``OUT/train.log``; with ``verbose`` to stderr
    (stdout stays for the result)."""
    import logging
    import sys

    from shoparena.cli._output import library_output
    from shoparena.train.trainer import LOGGER

    log_file = out / LOG_FILE
    fresh = not out.exists()
    logger = logging.getLogger(LOGGER)
    saved = (logger.level, logger.propagate)
    with contextlib.ExitStack() as stack:
        if verbose:
            handler: logging.Handler = logging.StreamHandler(sys.stderr)
            sink = sys.stderr
        else:
            out.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_file, encoding="utf-8")
            sink = stack.enter_context(open(log_file, "a", encoding="utf-8", buffering=1))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        stack.callback(handler.close)
        stack.callback(logger.removeHandler, handler)
        stack.callback(lambda: (logger.setLevel(saved[0]), setattr(logger, "propagate", saved[1])))
        stack.enter_context(library_output(None if verbose else log_file, verbose=verbose))
        stack.enter_context(contextlib.redirect_stdout(sink))  # what a library prints never reaches stdout
        try:
            yield
        except BaseException:
            stack.close()
            _drop_if_empty(out, fresh)
            raise


def _drop_if_empty(out: Path, fresh: bool) -> None:
    """A run refused before any work (no corpus, no catalog, a missing extra) leaves no directory behind that it
    created: only an empty ``train.log`` would be in it."""
    if not fresh or not out.is_dir():
        return
    entries = list(out.iterdir())
    if all(e.name == LOG_FILE and e.is_file() and e.stat().st_size == 0 for e in entries):
        for e in entries:
            e.unlink()
        out.rmdir()
