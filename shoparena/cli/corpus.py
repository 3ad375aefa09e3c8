"""``shoparena corpus``: build training sets from the trajectory firehose (normalise → filter → rewrite → split →
export), a thin face over :func:`shoparena.corpus.build.build_corpus`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.artefact import fresh_out
from shoparena.cli._common import console, ms_option, persistent_store, print_json, progress_bar, seed_option

app = typer.Typer(help="Build SFT / KTO / GRPO sets from stored or imported trajectories.", no_args_is_help=True)


@app.command("build")
def build(
    out: Annotated[Path, typer.Option("--out", help="Output directory (exports, split.json, manifest.json).")],
    store: Annotated[str | None, typer.Option("--from", help="Store URL: sqlite:///path.db or postgresql://…",
                                              callback=persistent_store)] = None,
    rollouts: Annotated[Path | None, typer.Option("--from-rollouts", help="Upstream rollout / ORO envelope "
                                                                            "JSONL file.")] = None,
    catalog: Annotated[Path | None, typer.Option("--catalog", help="Catalog directory: recommended ids must "
                                                                   "resolve in it; scores imported rollouts.")] = None,
    problems: Annotated[Path | None, typer.Option("--problems", help="Problem file (default for a store: the "
                                                                     "problems as the records describe them).")] = None,
    banks: Annotated[Path | None, typer.Option("--banks", help="Saved bank set: its leak clusters, and its static "
                                                               "suites always never-touch.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Store records created at or after (ms or ISO-8601).")
                     ] = None,
    until: Annotated[str | None, typer.Option("--until", help="… and before (ms or ISO-8601).")] = None,
    split: Annotated[Path | None, typer.Option("--split", help="Reuse a frozen split.json (re-verified); rows "
                                                               "of problems it does not hold are not exported.")
                     ] = None,
    min_judge_score: Annotated[float, typer.Option("--min-judge-score", min=0.0, max=1.0,
                                                   help="Reasoning-coefficient gate threshold.")] = 0.5,
    require_success: Annotated[bool, typer.Option("--require-success/--allow-failed",
                                                  help="Outcome gate for the SFT set.")] = False,
    per_problem: Annotated[int, typer.Option("--per-problem", min=1, max=2, help="Rows kept per problem.")] = 2,
    max_length: Annotated[int, typer.Option("--max-length", min=1, help="Token limit of a trace.")] = 14_336,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help="Tokenizer path for the length gate "
                                                                      "(default: a fast estimate).")] = None,
    rewrite: Annotated[str, typer.Option("--rewrite", help="Axis-B rewriter: template, none or a model URI.")
                       ] = "template",
    eval_fraction: Annotated[float, typer.Option("--eval-fraction", min=0.0, max=1.0)] = 0.15,
    never_touch_fraction: Annotated[float, typer.Option("--never-touch-fraction", min=0.0, max=1.0)] = 0.0,
    validation: Annotated[float | None, typer.Option(
        "--validation", help="Carve this fraction (in [0, 0.5)) of each bucket's train leak clusters into a "
                             "validation partition (sft_validation; `evaluate --split DIR:validation`) for "
                             "choosing learning rates, row counts and stopping points. Default 0: none.")] = None,
    seed: Annotated[int, seed_option("Seed of the split.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace a corpus in --out built with other settings.")
                     ] = False,
) -> None:
    """Normalise, filter, rewrite, split by leak cluster and export; prints per-stage kept / rejected counts."""
    from shoparena.corpus import CorpusConfig, FilterConfig, SplitConfig, build_corpus
    from shoparena.store.types import RecordQuery

    query = None
    if since is not None or until is not None:
        if store is None:
            from shoparena.errors import ConfigError

            raise ConfigError("--since / --until select store records", hint="use them with --from STORE_URL")
        query = RecordQuery(since=ms_option(since, "--since"), until=ms_option(until, "--until"))

    _check_validation(validation, split)
    cfg = CorpusConfig(
        filter=FilterConfig(min_judge_score=min_judge_score, require_success=require_success, per_problem=per_problem,
                            max_length=max_length, tokenizer=tokenizer),
        split=SplitConfig(seed=seed, eval_fraction=eval_fraction, never_touch_fraction=never_touch_fraction,
                          validation_fraction=validation or 0.0),
        seed=seed, rewrite=rewrite)
    if (store is None) == (rollouts is None):  # the first mistake to name, before what --out holds
        from shoparena.errors import ConfigError

        raise ConfigError("give exactly one source", hint="--from STORE_URL or --from-rollouts FILE")
    _claim(out, cfg, force=force, inputs=[("--from", _sqlite_file(store)), ("--from-rollouts", rollouts),
                                          ("--catalog", catalog), ("--problems", problems), ("--banks", banks),
                                          ("--split", split)])
    with fresh_out(out), _bars(not as_json) as progress:
        report = build_corpus(out, store=store, rollouts=rollouts, catalog=catalog, problems=problems, banks=banks,
                              split=split, config=cfg, query=query, progress=progress)
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    render(report)


def _check_validation(validation: float | None, split: Path | None) -> None:
    """``--validation`` lies in [0, 0.5) and carves a new split: a reused ``--split`` brings its own partitions."""
    import math

    from shoparena.corpus import MAX_VALIDATION_FRACTION
    from shoparena.errors import ConfigError

    if validation is None:
        return
    if not (math.isfinite(validation) and 0 <= validation < MAX_VALIDATION_FRACTION):
        raise ConfigError(f"--validation {validation:g}: the validation fraction lies in "
                          f"[0, {MAX_VALIDATION_FRACTION:g})",
                          hint="e.g. --validation 0.2 (a fifth of each bucket's train leak clusters)")
    if split is not None:
        raise ConfigError("--validation carves a new split, and --split reuses a frozen one with its own partitions",
                          hint="drop --validation: a split.json carrying a validation partition keeps it")


def _sqlite_file(url: str | None) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url and url.startswith("sqlite:///") else None


def _claim(out: Path, cfg: Any, *, force: bool, inputs: list[tuple[str, Path | None]]) -> None:
    """Refuse an --out that is another command's artefact, one of the build's inputs, or a corpus built with other
    filter, split or rewrite settings (unless --force)."""
    import json

    from shoparena.artefact import Found, claim_out
    from shoparena.corpus import jsonable

    def differs(found: Found) -> list[str]:
        was = (found.body or {}).get("filter_config")
        if not isinstance(was, dict):
            return []
        now = json.loads(json.dumps(jsonable(cfg.model_dump(mode="json"))))
        return [k for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]

    claim_out(out, "corpus", inputs=inputs, differs=differs, force=force)


class _bars:
    """One progress bar per pipeline phase that reports a total (closed when the build returns)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.open: list[Any] = []

    def __enter__(self) -> Callable[[str, int | None], Callable[[int], None]] | None:
        if not self.on:
            return None

        def start(description: str, total: int | None) -> Callable[[int], None]:
            cm = progress_bar(description, total)
            self.open.append(cm)
            return cm.__enter__()

        return start

    def __exit__(self, *exc: object) -> None:
        for cm in reversed(self.open):
            cm.__exit__(None, None, None)


@app.command("show")
def show(
    directory: Annotated[Path, typer.Argument(help="A corpus directory (the --out of corpus build).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Verify a built corpus (every file against its manifest hash) and print its report."""
    from shoparena.corpus import read_manifest

    manifest = read_manifest(directory, verify=True)  # a changed, missing or unlisted file is an error
    if as_json:
        print_json(manifest)
        return
    console.print(_stage_table(f"corpus {directory} (source: {manifest['sources'].get('kind')}, "
                               f"{len(manifest['files'])} files verified)", manifest["counts"]))
    proof = manifest.get("proof") or {}
    console.print("split by leak cluster: " + ", ".join(
        f"{name} {v['problems']} problems / {v['clusters']} clusters" for name, v in (proof.get("sizes") or {}).items())
        + f"; guard proof {'ok' if proof.get('ok') else 'missing or failed'} ({len(proof.get('checks') or [])} checks)")
    for name, e in sorted(manifest["exports"].items()):
        console.print(f"  {name}: {e['rows']} rows")


def _stage_table(title: str, stages: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("stage", "seen", "kept", "rejected (reason: count)"):
        table.add_column(col, justify="left" if col in ("stage", "rejected (reason: count)") else "right")
    for s in stages:
        rej = ", ".join(f"{k}: {v}" for k, v in sorted(s["rejected"].items(), key=lambda kv: -kv[1])) or "–"
        table.add_row(s["stage"], str(s["seen"]), str(s["kept"]), rej)
    return table


def render(report: Any) -> None:
    """The readable corpus report: one row per stage, then the split and the exports."""
    console.print(_stage_table(f"corpus build → {report.out}", report.stages))
    axis = next((s.get("notes", {}).get("by_source") for s in report.stages if s["stage"] == "axis"), None)
    if axis:
        console.print("axis decided from: " + "; ".join(
            f"{src} ({', '.join(f'{a} {n}' for a, n in sorted(by.items()))})" for src, by in sorted(axis.items())))
    growth = f"{report.growth:+.0%}" if report.growth is not None else "–"
    console.print(f"agentic rows {report.agentic_rows} + rewritten axis-B rows {report.rewritten_rows} "
                  f"(agentic corpus grows {growth})")
    sizes = report.split["sizes"]
    console.print("split by leak cluster: " + ", ".join(
        f"{name} {v.get('problems', 0)} problems / {v.get('clusters', 0)} clusters" for name, v in sizes.items())
        + f"; rows {report.split['rows']}; guard proof {report.split['proof']}")
    for name, e in report.exports.items():
        files = sorted({f.split("/")[0] + ("/" if "/" in f else "") for f in e.get("files", {})})
        rejected = (e.get("report") or {}).get("rejected") or {}
        why = "" if e.get("rows") or not rejected else " (none kept: " + ", ".join(
            f"{k} {v}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1])) + ")"
        console.print(f"  {name}: {e.get('rows')} rows → {', '.join(files)}{why}")
        if rejected.get("no_ground_truth"):
            console.print("  [yellow]the problems came from the store's records, which hold no ground truth: "
                          "pass --banks DIR or --problems FILE for GRPO prompts[/]")
    console.print(f"[dim]manifest: {report.manifest}[/]")
