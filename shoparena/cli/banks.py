"""``shoparena arena banks``: build, verify and summarise leak-guarded problem banks (:mod:`shoparena.tasks.banks`).

``--problems`` and ``--static`` repeat (one file or quoted glob each); there are no positional files, so an
unquoted shell glob after ``--static`` fails loudly instead of silently turning suites into bank problems.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import console, print_error, print_json, seed_option
from shoparena.errors import ConfigError, DataError

app = typer.Typer(help="Problem banks with the leak-cluster guard.", no_args_is_help=True)


def _expand(patterns: list[str], what: str) -> list[Path]:
    paths: list[Path] = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not found:
            raise ConfigError(f"{what} pattern {pattern!r} matches no file")
        paths.extend(Path(p) for p in found)
    return paths


def _suite_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _render(stats: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    for col in ("partition", "problems", "clusters", "buckets"):
        table.add_column(col, justify="left" if col in ("partition", "buckets") else "right")
    for part, size in stats["sizes"].items():
        buckets = " ".join(f"{b}:{n}" for b, n in stats["buckets"][part].items())
        table.add_row(part, str(size["problems"]), str(size["clusters"]), buckets)
    console.print(table)
    clusters = stats.get("clusters")
    if clusters:
        largest = clusters["largest"] or {}
        console.print(f"clusters: {clusters['clusters']} over {clusters['problems']} problems, sizes "
                      f"{clusters['sizes']}, largest {largest.get('size')} ({', '.join(largest.get('kinds', []))})")
        console.print(f"merges by kind: {clusters['merges']}")


@app.command()
def build(
    out: Annotated[Path, typer.Option("--out", help="Bank directory to write.")],
    problems: Annotated[list[str], typer.Option("--problems", help="Problem file or quoted glob (repeat).")],
    static: Annotated[list[str] | None, typer.Option("--static", help="ORO suite file or glob (repeat).")] = None,
    seed: Annotated[int, seed_option("Seed of the partition order.")] = 0,
    held_out_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of non-static problems held "
                                                     "out.")] = 0.2,
    open_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of non-static problems open at "
                                                 "build.")] = 0.3,
    force: Annotated[bool, typer.Option("--force", help="Replace a bank set already in --out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Cluster the problems, split them into static / reserve / held-out / open, verify and save."""
    from shoparena.artefact import claim_new
    from shoparena.tasks import BankConfig, BankSet, load_problems

    problem_files = _expand(problems, "--problems")
    static_files = _expand(static or [], "--static")
    claim_new(out, "banks", force=force, inputs=[*(("--problems", f) for f in problem_files),
                                                  *(("--static", f) for f in static_files)])
    loaded = [p for path in problem_files for p in load_problems(path, refuse_conflicts=True)]
    suites = {_suite_name(path): load_problems(path, refuse_conflicts=True) for path in static_files}
    try:
        config = BankConfig(held_out_fraction=held_out_fraction, open_fraction=open_fraction)
    except ValueError as exc:  # a pydantic ValidationError: its first message, on one line
        errors = getattr(exc, "errors", None)
        first = errors()[0].get("msg", str(exc)) if callable(errors) and errors() else str(exc)
        raise ConfigError(f"bad bank fractions: {first}") from None
    banks = BankSet.build(loaded, static=suites, seed=seed, config=config)
    report = banks.verify()
    if not report.ok:
        raise DataError("the built bank fails its own guard: " + "; ".join(v.detail for v in report.violations))
    manifest = banks.save(out)
    stats = banks.stats()
    if as_json:
        print_json({**stats, "manifest": str(manifest)})
        return
    _render(stats, f"banks → {out}")


@app.command()
def verify(
    directory: Annotated[Path, typer.Argument(help="Bank directory (manifest.json).")],
    no_recluster: Annotated[bool, typer.Option("--no-recluster", help="Trust the stored clusters.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the guard report as JSON.")] = False,
) -> None:
    """Re-check hashes and prove the guard; exit 3 when anything fails."""
    from shoparena.tasks import BankSet

    try:
        banks = BankSet.load(directory, verify=False)
        result: dict[str, Any] = banks.verify(recluster=not no_recluster).model_dump(mode="json")
    except DataError as exc:
        result = {"ok": False, "checks": ["integrity"], "reclustered": False, "sizes": {},
                  "violations": [{"check": "integrity", "detail": exc.message}]}
    if as_json:
        print_json(result)
    else:
        for v in result["violations"]:
            console.print(f"[red]✗ {v['check']}[/]: {v['detail']}")
        if result["ok"]:
            console.print(f"[green]✓ guard holds[/] ({', '.join(result['checks'])}) sizes {result['sizes']}")
    if not result["ok"]:
        print_error(f"the bank in {directory} fails {len(result['violations'])} check(s): "
                    f"{result['violations'][0]['check']}" if result["violations"] else f"the bank in {directory} fails")
        raise typer.Exit(code=DataError.exit_code)


@app.command()
def stats(
    directory: Annotated[Path, typer.Argument(help="Bank directory (manifest.json).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Partition sizes per bucket, rotation state, suite pins and cluster statistics."""
    from shoparena.tasks import BankSet

    result = BankSet.load(directory, verify=False).stats()
    if as_json:
        print_json(result)
        return
    _render(result, f"banks in {directory}")
