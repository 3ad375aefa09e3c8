"""``shoparena validate``: evaluate one agent file like a validator (sandbox → score → judge → records)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import (
    console,
    finite,
    persistent_store,
    print_json,
    progress_bar,
    sandbox_name,
    seed_option,
)


def validate(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    problems: Annotated[Path, typer.Option("--problems", help="Problems: our JSONL, upstream JSONL or ORO suite.")],
    agent: Annotated[str, typer.Option("--agent", help="PATH.py defining agent_main, or react|oro7|pipeline.")],
    model: Annotated[str, typer.Option("--model", help="Model URI the agent may call through the gateway.")]
    = "policy:expert",
    store: Annotated[str, typer.Option("--store", help="Trajectory store URL (sqlite:///… or postgresql://…).",
                                       callback=persistent_store)] = "sqlite:///runs/trajectories.db",
    judge: Annotated[str, typer.Option("--judge", help="rubric, or a model URI for the LLM judge (llm:URI,…).")]
    = "rubric",
    sandbox: Annotated[str, typer.Option("--sandbox", help="bubblewrap | docker | process (not isolated).",
                                         callback=sandbox_name)]
    = "bubblewrap",
    allow_non_hermetic: Annotated[bool, typer.Option(
        "--allow-non-hermetic", help="Permit --sandbox process (trusted code only).")] = False,
    workers: Annotated[int | None, typer.Option(min=1, help="Problems in parallel (default: CPU cores).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per problem.", callback=finite(0.0, above=True))] = 300.0,
    seed: Annotated[int, seed_option("Seed of the per-problem sampling seeds (as for run).")] = 0,
    temperature: Annotated[float, typer.Option(help="Sampling temperature the agent is given.",
                                               callback=finite(0.0))] = 0.0,
    agent_id: Annotated[str | None, typer.Option(help="Agent id recorded (default: the file name).")] = None,
    agent_version: Annotated[str, typer.Option(help="Agent version recorded.")] = "v1",
    miner_hotkey: Annotated[str | None, typer.Option(help="Miner hotkey recorded.")] = None,
    validator_hotkey: Annotated[str | None, typer.Option(help="Validator hotkey recorded.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N problems.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the score components and problem lines as JSON.")]
    = False,
) -> None:
    """Run the agent in the sandbox on every problem, score and judge it, and append one record per problem.

    A model that cannot work stops it before any problem runs.
    Exit codes: 2 unknown model scheme or policy, 4 no hf: model at the path, 5 openai: server unreachable.
    """
    from shoparena.agents import agent_path
    from shoparena.store import open_store
    from shoparena.tasks import load_problems
    from shoparena.validator import AgentSpec, SandboxLimits, ValidatorConfig, evaluate

    path = agent_path(agent)
    loaded = load_problems(problems, refuse_conflicts=True)
    loaded = loaded[:limit] if limit else loaded
    config = ValidatorConfig(model=model, judge=judge, sandbox=sandbox, allow_non_hermetic=allow_non_hermetic,
                             workers=workers, limits=SandboxLimits(timeout_s=timeout),
                             validator_hotkey=validator_hotkey, seed=seed, temperature=temperature)
    spec = AgentSpec(path=str(path), agent_id=agent_id or path.stem, agent_version=agent_version,
                     miner_hotkey=miner_hotkey)
    with open_store(store) as st, progress_bar(f"validating {path.name}", len(loaded)) as advance:
        summary = evaluate(spec, loaded, catalog, st, config, progress=lambda _line: advance(1))
    if as_json:
        print_json(summary.model_dump())
        _fail_if_failed(summary)
        return
    table = Table(title=f"{spec.agent_id} {spec.agent_version}: {summary.status} ({summary.eval_run_id})",
                  title_justify="left")
    for col in ("gt rate", "success", "format", "field match", "reasoning q", "coeff", "final", "judge fails",
                "records"):
        table.add_column(col, justify="right")
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    table.add_row(fmt(summary.ground_truth_rate), fmt(summary.success_rate), fmt(summary.format_score),
                  fmt(summary.field_matching), fmt(summary.reasoning_quality), fmt(summary.reasoning_coefficient),
                  fmt(summary.final_score), f"{summary.judge_inference_failed}/{summary.judge_inference_total}",
                  f"{summary.records_written} (+{summary.records_skipped} earlier)")
    console.print(table)
    for line in summary.problems:
        judged = "–" if line.judge_score is None else f"{line.judge_score:.1f}"
        console.print(f"  {line.problem_id:40s} {line.status:9s} {'✓' if line.success else '✗'}  judge {judged}")
    if summary.failure_reason:
        console.print(f"[yellow]{summary.failure_reason}[/]")
    _fail_if_failed(summary)


def _fail_if_failed(summary: Any) -> None:
    """A FAILED evaluation (the judge failed or could not be reached) is an error: exit 5, never a success."""
    if summary.status == "FAILED":
        from shoparena.errors import BackendError

        raise BackendError(f"evaluation FAILED: {summary.failure_reason}",
                           hint="problems the judge could not judge got no record; fix the judge (or use --judge "
                                "rubric) and rerun: recorded problems are kept")
