"""``shoparena loop``: arena days → corpus → training → held-out evaluation → the trained model served and raced
as a new miner (:mod:`shoparena.evaluate.loop`).

The console shows the loop's steps and its result table; library warnings, the trainers' per-step logs and
whatever the libraries print go to ``OUT/loop.log`` (``--verbose``: on the console instead)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shoparena.cli._common import console, one_of, print_json, progress_bar, sandbox_name, seed_option


def loop(
    out: Annotated[Path, typer.Option("--out", help="Working directory (arena/, corpus/, train/, eval/, "
                                                    "arena-loop/, loop.json, loop.md).")],
    days: Annotated[int, typer.Option("--days", min=1, help="Simulated days before training.")] = 1,
    race_days: Annotated[int, typer.Option("--race-days", min=1, help="Days the trained model races after "
                                                                      "joining.")] = 1,
    recipe: Annotated[str, typer.Option("--recipe", help="Training recipe: tiny, cpu-mini, paper or a YAML "
                                                         "file.")] = "tiny",
    seed: Annotated[int, seed_option("Seed of everything.")] = 0,
    miners: Annotated[int, typer.Option("--miners", min=1, help="Simulated miner teams.")] = 6,
    validators: Annotated[int, typer.Option("--validators", min=1, help="Simulated validators.")] = 3,
    per_bucket: Annotated[int, typer.Option("--per-bucket", min=1, help="Held-out problems per bucket.")] = 2,
    n: Annotated[int, typer.Option("-n", "--n", min=1, help="Samples per held-out problem.")] = 2,
    serve: Annotated[str, typer.Option("--serve", help="hf or llamacpp: how the trained model is served.",
                                       callback=one_of(("hf", "llamacpp")))] = "hf",
    sandbox: Annotated[str, typer.Option("--sandbox", help="bubblewrap (default) or process (not isolated).",
                                         callback=sandbox_name)]
    = "bubblewrap",
    as_json: Annotated[bool, typer.Option("--json", help="Print loop.json.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library warnings and trainer logs on the "
                                                                  "console as they come instead of in OUT/loop.log.")]
    = False,
) -> None:
    """Close the loop offline: simulated arena days, their corpus, a training run, the trained model evaluated on
    held-out problems beside its base, then served and entered into the arena as a new miner for more days."""
    from shoparena.cli._extras import require_extra
    from shoparena.cli._output import library_output
    from shoparena.evaluate.loop import LoopConfig, check_loop, render_loop, run_loop

    require_extra("train", "loop")  # the loop trains: say so before any simulated day
    if serve == "llamacpp":
        require_extra("llamacpp", "loop")
    cfg = LoopConfig(out=str(out), days=days, race_days=race_days, recipe=recipe, seed=seed, miners=miners,
                     validators=validators, eval_per_bucket=per_bucket, eval_samples=n, serve=serve,  # type: ignore[arg-type]
                     sandbox=sandbox)
    _claim(out, cfg)
    check_loop(cfg)  # before the log file: a loop that cannot run leaves no directory behind
    with library_output(None if verbose else out / "loop.log", verbose=verbose):
        body = run_loop(cfg, progress=None if as_json else (lambda m: console.print(f"[bold cyan]{m}[/]")),
                        bars=None if as_json else progress_bar)
    if as_json:
        print_json(body)
        return
    console.print(render_loop(body))
    log = "" if verbose else f", library warnings and trainer logs: {out}/loop.log"
    console.print(f"[dim]→ {out}/loop.json, {out}/loop.md, report: {out}/eval/report.html{log}[/]")


def _claim(out: Path, cfg: object) -> None:
    """``--out`` must be new, empty or an earlier loop run: never another command's artefact or a foreign folder.
    A finished loop made with other settings is refused; the same settings run the loop again there."""
    from shoparena.artefact import Found, claim_out

    def differs(found: Found) -> list[str]:
        old = (found.body or {}).get("config") or {}
        new = cfg.model_dump(mode="json")  # type: ignore[attr-defined]
        return sorted(k for k in new if k != "out" and k in old and old[k] != new[k])

    claim_out(out, "loop", differs=differs, ignore=("loop.log",))
