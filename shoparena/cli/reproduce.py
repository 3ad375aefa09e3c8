"""``shoparena reproduce``: the paper's tables from nothing in one command, and a check of a finished run against
the expected figures (a thin face over :mod:`shoparena.evaluate.reproduce`; ``docs/reproduce.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json, seed_option

app = typer.Typer(help="Reproduce the paper's tables from nothing; check a run against the expected figures.",
                  no_args_is_help=True)

PROFILES = ("smoke", "cpu", "gpu")


def _profile(value: str) -> str:
    if value not in PROFILES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(PROFILES)}")
    return value


@app.command("table1")
def table1(
    profile: Annotated[str, typer.Option("--profile", help="smoke (tiny model, minutes), cpu (SmolLM2 on a CPU, "
                                                           "hours) or gpu (SmolLM2 on one GPU).",
                                         callback=_profile)],
    out: Annotated[Path, typer.Option("--out", help="Run directory: one sub-directory per step, results.json, "
                                                    "results.md.")],
    seed: Annotated[int, seed_option("Moves every seed: catalog, arena, problems, split, "
                                                     "training, evaluation.")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out: finished steps whose outputs "
                                                          "still verify are skipped.")] = False,
    all_stages: Annotated[bool, typer.Option("--all-stages", help="Evaluate every stage of the recipe, not only "
                                                                  "stage 1 and the chain's output.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Run nothing: compare --out's results.json with the "
                                                        "expected figures (exit 1 when one falls outside).")]
    = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show library warnings and logs live instead of in "
                                                            "--out/reproduce.log.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json (or the check) as JSON.")] = False,
) -> int | None:
    """Table 1 in one command: synthetic catalog → simulated arena days → corpus → base model → the recipe's
    stages → evaluation of base / stage 1 / the chain's output / the teacher on the eval and never_touch
    partitions with paired tests → OUT/results.md and OUT/results.json.

    Exit codes: 1 --check found a figure outside its interval, 2 bad options, an OUT made by something else or
    with other settings, a missing extra, model wheel or llama.cpp, 3 damaged artefacts, 4 a missing file.
    """
    if check:
        return _check(out, profile, as_json)
    from shoparena.cli._output import library_output
    from shoparena.evaluate.reproduce import Table1Config, preflight, run_table1

    cfg = Table1Config(profile=profile, out=str(out), seed=seed, resume=resume, all_stages=all_stages)
    spec, _matrix = preflight(cfg)
    say = (lambda _m: None) if as_json else (lambda m: err_console.print(f"[dim]{m}[/]"))
    err_console.print(f"reproducing table1, profile [bold]{profile}[/] (recipe {spec.recipe}, seed {seed}) → {out}: "
                      f"expect about {_minutes(spec.expected_minutes)} on {_where(spec.device)}"
                      + ("; finished steps are skipped" if resume else ""))
    with library_output(out.resolve() / "reproduce.log", verbose=verbose):
        body = run_table1(cfg, progress=say)
    if as_json:
        body.pop("ran", None)
        print_json(body)
        return None
    _render(body)
    ran = body.get("ran") or []
    console.print(f"[dim]{'ran: ' + ', '.join(ran) if ran else 'nothing to run: every step was done'}; "
                  f"{out / 'results.md'}; check it: shoparena reproduce table1 --profile {profile} --out {out} "
                  f"--check[/]")
    return None


def _minutes(m: float) -> str:
    return f"{m:.0f} min" if m < 90 else f"{m / 60:.1f} h"


def _where(device: str) -> str:
    return "one GPU" if device == "cuda" else "2 CPU cores"


def _render(body: dict[str, Any]) -> None:
    roles = {v: k for k, v in body["roles"].items()}
    for part, block in body["partitions"].items():
        k = list(next(iter(block["models"].values()))["pass@k"])[-1]
        table = Table(title=f"table1 {body['profile']}: {part}, {block['problems']} problems × {block['samples']}",
                      title_justify="left")
        for col in ("model", "ASR [95 % CI]", f"pass@{k}", "finished", "vs base", "vs stage 1"):
            table.add_column(col, justify="left" if col == "model" else "right")
        for label, m in block["models"].items():
            vs = block["comparisons"]
            table.add_row(label + (f" ({roles[label]})" if roles.get(label, label) != label else ""),
                          f"{m['asr']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]", f"{m['pass@k'][k]:.3f}",
                          f"{m['statuses'].get('SUCCESS', 0)} / {m['episodes']}",
                          _cmp(vs.get("vs_base", {}).get(label)), _cmp(vs.get("vs_stage1", {}).get(label)))
        console.print(table)


def _cmp(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    return f"{c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] {c['sign']['b_better']}/{c['sign']['a_better']}"


def _check(out: Path, profile: str, as_json: bool) -> int:
    from shoparena.errors import ConfigError
    from shoparena.evaluate.reproduce import check_results, get_profile, load_matrix, read_results

    matrix = load_matrix()
    spec = get_profile(matrix, profile)
    results = dict(read_results(out))
    if results.get("profile") != profile:
        raise ConfigError(f"{out / 'results.json'} is a run of profile {results.get('profile')!r}, not {profile!r}",
                          hint=f"--profile {results.get('profile')}")
    if not spec.conditions:
        raise ConfigError(f"the {matrix.table} matrix holds no expected figures for profile {profile!r}",
                          hint=f"{spec.source}; record a run's figures in the matrix to check against them")
    rows = check_results(results, spec)
    bad = [r for r in rows if not r.inside]
    if as_json:
        print_json({"profile": profile, "matrix_version": matrix.version, "seed": results.get("seed"),
                    "passed": not bad, "conditions": [{**r.condition.model_dump(mode="json"), "measured": r.measured,
                                                       "inside": r.inside, "reason": r.reason} for r in rows]})
        return 1 if bad else 0
    table = Table(title=f"table1 {profile} against the matrix (version {matrix.version})", title_justify="left")
    for col in ("model", "partition", "figure", "expected", "interval", "measured", ""):
        table.add_column(col, justify="left" if col in ("model", "partition", "figure", "") else "right")
    for r in rows:
        c = r.condition
        table.add_row(c.model, c.partition, c.figure, f"{c.expected:.3f}", f"[{c.interval[0]:.3f}, {c.interval[1]:.3f}]",
                      "–" if r.measured is None else f"{r.measured:.3f}",
                      "[green]inside[/]" if r.inside else f"[red]{r.reason}[/]")
    console.print(table)
    if results.get("seed"):
        console.print(f"[yellow]this run used --seed {results['seed']}; the expected figures are seed 0's[/]")
    console.print(f"[{'red' if bad else 'green'}]{len(rows) - len(bad)} of {len(rows)} figures inside their "
                  f"intervals[/]")
    return 1 if bad else 0
