"""``shoparena arena``: simulate a whole subnet, inspect problem banks, and run a validator against an arena API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shoparena.cli import banks as banks_cli
from shoparena.cli._common import (
    console,
    err_console,
    finite,
    http_url,
    persistent_store,
    print_json,
    sandbox_name,
    seed_option,
)

app = typer.Typer(help="The SN15-style arena: simulation, banks, validators.", no_args_is_help=True)
app.add_typer(banks_cli.app, name="banks")


def richness_weight_option(value: float) -> float:
    """Typer callback: the richness weight must be a finite number in [0, 1] (a usage error, exit 2, otherwise)."""
    from shoparena.scoring.richness import check_weight

    try:
        return check_weight(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command()
def simulate(
    miners: Annotated[int, typer.Option(min=1, help="Simulated miner teams.")] = 12,
    validators: Annotated[int, typer.Option(min=1, help="Simulated validators.")] = 3,
    days: Annotated[int, typer.Option(min=1, help="Simulated days.")] = 2,
    seed: Annotated[int, seed_option("Seed of everything.")] = 0,
    store: Annotated[str | None, typer.Option(help="Store URL (default: a SQLite file under --out).",
                                              callback=persistent_store)] = None,
    out: Annotated[Path | None, typer.Option(help="Working directory to keep (default: temporary).")] = None,
    qualifying_problems: Annotated[int, typer.Option(min=1)] = 50,
    race_problems: Annotated[int, typer.Option(min=1)] = 50,
    catalog_size: Annotated[int, typer.Option(min=200)] = 3000,
    problems: Annotated[int, typer.Option(min=10, help="Problems in the rotating banks.")] = 450,
    sandbox: Annotated[str, typer.Option(help="bubblewrap (default) or process (not isolated).",
                                         callback=sandbox_name)] = "bubblewrap",
    judge: Annotated[str, typer.Option(help="rubric or llm:<model-uri>.")] = "rubric",
    richness_weight: Annotated[float, typer.Option(
        help="Agentic-richness weight of the score in [0, 1] (0 = ORO's scoring; docs/incentives.md).",
        callback=richness_weight_option)] = 0.0,
    force: Annotated[bool, typer.Option("--force", help="Replace an arena simulation already in --out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole summary as JSON.")] = False,
) -> None:
    """Run miners, validators, races, weights and emissions for DAYS simulated days on the embedded default.
    ``--json`` gives per day ``axis_a_share`` (trajectories whose searches the model emitted), ``design_changes``
    and the top agent's held-out ASR."""
    from shoparena.arena.simulate import SimulationConfig
    from shoparena.arena.simulate import simulate as run

    if out is not None:
        from shoparena.artefact import claim_new

        if claim_new(out, "arena", force=force):
            import shutil

            shutil.rmtree(out)  # a simulation cannot continue another: its store would mix two runs
    cfg = SimulationConfig(miners=miners, validators=validators, days=days, seed=seed, store=store,
                           out=str(out) if out else None, qualifying_problems=qualifying_problems,
                           race_problems=race_problems, catalog_size=catalog_size, problems=problems,
                           sandbox=sandbox, judge=judge, richness_weight=richness_weight)
    result = run(cfg, progress=None if as_json else (lambda m: err_console.print(f"[dim]{m}[/]")))
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    render(result)


def render(result: object) -> None:
    """The readable summary of a :class:`~shoparena.arena.simulate.SimulationResult`."""
    r = result  # typed loosely: the CLI only renders
    board = Table(title=f"leaderboard after {r.config.days} simulated days ({r.sandbox} sandbox, "  # type: ignore[attr-defined]
                        f"richness weight {r.config.richness_weight:g})",  # type: ignore[attr-defined]
                  title_justify="left")
    for col in ("rank", "miner", "version", "state", "qualifying", "last race", "wins", "top"):
        board.add_column(col, justify="left" if col in ("miner", "state") else "right")
    for row in r.leaderboard:  # type: ignore[attr-defined]
        board.add_row(str(row["rank"]), row["miner"], f"v{row['version_number']}", row["state"],
                      _f(row["qualifying_score"]), _f(row["last_race_score"]), str(row["races_won"]),
                      "★" if row["is_top_agent"] else "")
    console.print(board)
    races = Table(title="races", title_justify="left")
    for col in ("race", "status", "qualifiers", "threshold", "winner", "score", "promoted"):
        races.add_column(col)
    winners = {w["race"]: w for w in r.winners}  # type: ignore[attr-defined]
    for race in r.races:  # type: ignore[attr-defined]
        w = winners.get(race["race_number"], {})
        races.add_row(str(race["race_number"]), race["status"], str(race["qualifier_count"]),
                      _f(race["qualifying_threshold"]), str(w.get("winner") or "–"), _f(w.get("score")),
                      "yes" if race["promoted"] else "")
    console.print(races)
    rejected = [s for s in r.submissions if s["status"] != "ACCEPTED"]  # type: ignore[attr-defined]
    console.print(f"submissions: {len(r.submissions)} ({len(rejected)} rejected: "  # type: ignore[attr-defined]
                  + ", ".join(f"{s['miner']} {s['reason']} {s['violations'][:3]}" for s in rejected) + ")")
    console.print(f"weights (race {r.weights.get('race_id')}): {json.dumps(r.weights.get('vector', {}))}")  # type: ignore[attr-defined]
    console.print(f"emissions: {json.dumps(r.emissions)}")  # type: ignore[attr-defined]
    days = Table(title="trajectory firehose", title_justify="left")
    for col in ("day", "trajectories", "evaluations", "failed", "axis A / B / none", "A share", "redesigns",
                "product / shop / voucher", "wall"):
        days.add_column(col, justify="right")
    for d in r.days:  # type: ignore[attr-defined]
        days.add_row(str(d.day), str(d.trajectories), str(d.evaluations), str(sum(d.failures.values())),
                     f"{d.by_axis.get('A', 0)} / {d.by_axis.get('B', 0)} / {d.by_axis.get('none', 0)}",
                     f"{d.axis_a_share:.3f}", str(d.design_changes),
                     f"{d.by_bucket.get('product', 0)} / {d.by_bucket.get('shop', 0)} / {d.by_bucket.get('voucher', 0)}",
                     f"{d.wall_s:.0f} s")
    console.print(days)
    for d in r.days:  # type: ignore[attr-defined]
        if d.failures:  # which errors, so a day of sandbox failures never reads as a quiet day
            infra = f"; {d.infra_failures} the validator's infrastructure" if d.infra_failures else ""
            console.print(f"day {d.day}: {sum(d.failures.values())} of {d.episodes} episodes failed: "
                          + ", ".join(f"{kind} {n}" for kind, n in d.failures.items()) + infra)
    console.print(f"[dim]records in {r.store} · total wall time {r.wall_s:.0f} s[/]")  # type: ignore[attr-defined]


def _f(v: object) -> str:
    return "–" if v is None else f"{float(v):.3f}"  # type: ignore[arg-type]


@app.command("validator")
def validator(
    api: Annotated[str, typer.Option("--api", help="Arena API base URL (http://host:port).", callback=http_url)],
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory the problems refer to.")],
    store: Annotated[str, typer.Option("--store", help="Trajectory store URL for this validator's records.",
                                       callback=persistent_store)],
    name: Annotated[str, typer.Option(help="Dev identity name (hotkey derived from name and seed).")] = "validator",
    seed: Annotated[int, seed_option("Dev identity seed.")] = 0,
    model: Annotated[str, typer.Option(help="Default model URI agents get.")] = "policy:careful",
    models: Annotated[str, typer.Option(help="Comma list of further allowed model URIs.")]
    = "policy:novice,policy:careful,policy:expert",
    sandbox: Annotated[str, typer.Option(help="bubblewrap | docker | process.", callback=sandbox_name)] = "bubblewrap",
    allow_non_hermetic: Annotated[bool, typer.Option("--allow-non-hermetic")] = False,
    judge: Annotated[str, typer.Option(help="rubric or llm:<uri>.")] = "rubric",
    max_items: Annotated[int | None, typer.Option(min=1, help="Stop after this many work items.")] = None,
    idle: Annotated[float, typer.Option(help="Stop after the queue stayed empty this many seconds.",
                                        callback=finite(0.0))] = 0.0,
    workdir: Annotated[Path, typer.Option(help="Where fetched agent files are written.")] = Path("runs/agents"),
    richness_weight: Annotated[float, typer.Option(
        help="The arena's agentic-richness weight in [0, 1] (the arena refuses runs scored with another).",
        callback=richness_weight_option)] = 0.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A validator process: claim leased work from an arena API, evaluate it here, complete it. Run one per
    machine (or several per machine) against the same arena to scale out."""
    from shoparena.arena.client import ArenaClient
    from shoparena.arena.identity import new_identity
    from shoparena.store import open_store
    from shoparena.validator import ValidatorConfig, work_until_empty

    ident = new_identity(name, seed)
    config = ValidatorConfig(model=model, models=tuple(m for m in models.split(",") if m), judge=judge,
                             sandbox=sandbox, allow_non_hermetic=allow_non_hermetic,
                             validator_hotkey=ident.hotkey_ss58, richness_weight=richness_weight)
    with ArenaClient(api, ident.hotkey) as client, open_store(store) as st:
        done = work_until_empty(client, catalog, st, config, workdir / name, max_items=max_items, idle_s=idle)
    rows = [{"eval_run_id": d.eval_run_id, "kind": d.kind, "agent_version_id": d.agent_version_id,
             "status": d.summary.status, "final_score": d.summary.final_score,
             "records_written": d.summary.records_written} for d in done]
    if as_json:
        print_json({"validator": ident.hotkey_ss58, "items": rows})
        return
    for r in rows:
        console.print(f"{r['kind']:10s} {r['agent_version_id']} {r['status']} final={r['final_score']} "
                      f"records={r['records_written']}")
