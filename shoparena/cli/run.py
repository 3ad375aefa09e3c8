"""``shoparena run``: run an agent over problems through the logging gateway and score it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.artefact import fresh_out
from shoparena.cli._common import (
    console,
    episode_tokens_option,
    finite,
    one_of,
    print_json,
    progress_bar,
    seed_option,
)

LATEST = Path("runs/latest")
"""The default --out: the latest run, replaced by the next one whatever its settings."""


def run(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    problems: Annotated[Path, typer.Option("--problems", help="Problems: our JSONL, upstream JSONL or ORO suite.")],
    agent: Annotated[str, typer.Option("--agent", help="react | oro7 | pipeline | PATH.py (defines agent_main).")],
    model: Annotated[str, typer.Option("--model", help="Model URI: policy:NAME, hf:PATH, openai:URL/MODEL.")]
    = "policy:expert",
    n: Annotated[int, typer.Option("-n", "--n", min=1, help="Samples per problem (pass@k up to n).")] = 1,
    seed: Annotated[int, seed_option("Seed of the per-run sampling seeds.")] = 0,
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = LATEST,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0, or 0.7 if n > 1).",
                                                      callback=finite(0.0))] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Problems run at once (default: CPU cores).")]
    = None,
    timeout: Annotated[float, typer.Option(help="Seconds per agent call.", callback=finite(0.0, above=True))]
    = 300.0,
    episode_tokens: Annotated[int | None, episode_tokens_option()] = None,
    protocol: Annotated[str | None, typer.Option(help="native | tags, for the ReAct built-ins.",
                                                 callback=one_of(("native", "tags")))] = None,
    mode: Annotated[str, typer.Option("--mode", help="Scoring mode: strict (ORO) or upstream.",
                                      callback=one_of(("strict", "upstream")))] = "strict",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N problems.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Keep the episodes an interrupted run of the same "
                                                          "settings left in --out; run only the others.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace a run in --out made with other settings (the "
                                                        "default --out, runs/latest, is always replaced).")] = False,
) -> None:
    """Run an agent on every problem n times; write rollouts.jsonl, calls.jsonl, runs.jsonl, summary.json.

    A model that cannot work stops it before any problem runs.
    Exit codes: 2 unknown model scheme or policy, 4 no hf: model at the path, 5 openai: server unreachable.
    """
    from rich.markup import escape

    from shoparena.cli._common import err_console
    from shoparena.tasks import ProblemLoadReport, load_problems
    from shoparena.validator import RunConfig, run_agents

    skipped = ProblemLoadReport(path=str(problems))
    loaded = load_problems(problems, skipped, refuse_conflicts=True)
    if skipped.bad_count:  # said before anything runs, as `problems stats` does, and kept in summary.json
        err_console.print(f"[yellow]{escape(skipped.summary())}[/]", soft_wrap=True)
    if limit is not None:
        loaded = loaded[:limit]
    config = RunConfig(agent=agent, model=model, n_samples=n, seed=seed, temperature=temperature,
                       concurrency=concurrency, timeout_s=timeout, episode_tokens=episode_tokens,
                       protocol=protocol,  # type: ignore[arg-type]
                       score_mode=mode)  # type: ignore[arg-type]
    _claim(out, config, catalog=catalog, problems=problems, resume=resume, force=force or out == LATEST)
    with fresh_out(out), progress_bar(f"{agent} × {model}", len(loaded) * n) as advance:
        summary = run_agents(catalog, loaded, config, out, progress=advance, resume=resume,
                             skipped=skipped.to_dict())
    if as_json:
        print_json(summary.model_dump())
        _backend_failures(out, loaded, model)
        return
    table = Table(title=f"{agent} with {model}: {summary.n_problems} problems × {n}", title_justify="left")
    for col in ("ASR", *summary.asr_by_bucket, *summary.pass_at_k, "gt rate", "runs", "search A/B", "time"):
        table.add_column(col, justify="right")
    statuses = ", ".join(f"{k} {v}" for k, v in summary.statuses.items())
    axes = f"{summary.calls.get('search_axis_A', 0)}/{summary.calls.get('search_axis_B', 0)}"
    table.add_row(f"{summary.asr:.3f}", *(f"{v:.3f}" for v in summary.asr_by_bucket.values()),
                  *(f"{v:.3f}" for v in summary.pass_at_k.values()), f"{summary.gt_rate:.3f}", statuses, axes,
                  f"{summary.seconds:.1f} s")
    console.print(table)
    console.print(f"[dim]→ {out}/rollouts.jsonl, calls.jsonl, runs.jsonl, summary.json[/]")
    _backend_failures(out, loaded, model)


def _backend_failures(out: Path, problems: list[Any], model: str) -> None:
    """Exit 5, as ``evaluate`` does, when every episode failed on the model backend: the figures above are those
    of no agent."""
    from shoparena.errors import BackendError
    from shoparena.evaluate.diagnostics import run_diagnostics

    d = run_diagnostics(out, problems) or {}
    if not d.get("all_failed_on_backend"):
        return
    example = (d.get("failure_examples") or {}).get("BackendError") or "no message recorded"
    raise BackendError(f"every episode failed on the model backend {model} ({d['episodes']} of {d['episodes']}): "
                       f"{example}", hint=f"check that the model server answers ({out}/summary.json was written; its "
                                          "figures are those of no agent)")


def _claim(out: Path, config: Any, *, catalog: Path, problems: Path, resume: bool, force: bool) -> None:
    """Refuse an --out that is another command's artefact, one of the run's inputs, or a run made with other
    settings (its files would be replaced by episodes of another kind)."""
    from shoparena.artefact import Found, claim_out

    def differs(found: Found) -> list[str]:
        was = (found.body or {}).get("config")
        if not isinstance(was, dict):
            return []
        was, now = config.stored_identity(was), config.identity()
        return [k for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]

    claim_out(out, "harness-run", inputs=[("--catalog", catalog), ("--problems", problems)], differs=differs,
              force=force)
