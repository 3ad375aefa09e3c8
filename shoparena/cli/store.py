"""``shoparena store``: export, count and verify trajectory records (SQLite or PostgreSQL, chosen by URL)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from shoparena.cli._common import (
    console,
    err_console,
    finite,
    ms_option,
    one_of,
    output_file,
    print_error,
    print_json,
)

if TYPE_CHECKING:
    from shoparena.store.types import RecordQuery

# The values of shoparena.store.types.Status / Axis (not imported: it loads SQLAlchemy on every CLI start);
# tests/cli/test_bad_input.py checks they agree.
STATUSES: tuple[str, ...] = ("SUCCESS", "FAILED", "TIMED_OUT")
AXES: tuple[str, ...] = ("A", "B", "mixed", "none")

app = typer.Typer(help="Export, count and verify trajectory records.", no_args_is_help=True)

StoreOpt = Annotated[str, typer.Option("--store", help="Store URL: sqlite:///path.db or postgresql://user@host/db.")]


def _query(agent: list[str] | None, agent_version: list[str] | None, problem: list[str] | None,
           cluster: list[str] | None, suite: list[str] | None, eval_run: list[str] | None, pipeline: list[str] | None,
           axis: list[str] | None, status: list[str] | None, success: bool | None, since: str | None,
           until: str | None, min_judge: float | None, max_judge: float | None, limit: int | None) -> RecordQuery:
    from shoparena.store.types import RecordQuery

    many = lambda v: tuple(v) if v else None  # noqa: E731
    return RecordQuery(agent_id=many(agent), agent_version=many(agent_version), problem_id=many(problem),
                       cluster_id=many(cluster), suite=many(suite), eval_run_id=many(eval_run),
                       pipeline_version=many(pipeline), axis=many(axis), status=many(status), success=success,
                       since=ms_option(since, "--since"), until=ms_option(until, "--until"), min_judge_score=min_judge,
                       max_judge_score=max_judge, limit=limit)


@app.command("export")
def export(
    store: StoreOpt,
    out: Annotated[Path, typer.Option("--out", help="FILE.jsonl, FILE.jsonl.gz or FILE.parquet.")],
    agent: Annotated[list[str] | None, typer.Option("--agent", help="Agent id (repeatable).")] = None,
    agent_version: Annotated[list[str] | None, typer.Option("--agent-version", help="Agent version.")] = None,
    problem: Annotated[list[str] | None, typer.Option("--problem", help="Problem id (repeatable).")] = None,
    cluster: Annotated[list[str] | None, typer.Option("--cluster", help="Leak-cluster id (repeatable).")] = None,
    suite: Annotated[list[str] | None, typer.Option("--suite", help="Bank or suite (repeatable).")] = None,
    eval_run: Annotated[list[str] | None, typer.Option("--eval-run", help="Evaluation run id (repeatable).")] = None,
    pipeline: Annotated[list[str] | None, typer.Option("--pipeline", help="Scoring-pipeline version.")] = None,
    axis: Annotated[list[str] | None, typer.Option("--axis", help="A, B, mixed or none (repeatable).",
                                                   callback=one_of(AXES))] = None,
    status: Annotated[list[str] | None, typer.Option("--status", help="SUCCESS, FAILED or TIMED_OUT.",
                                                     callback=one_of(STATUSES))] = None,
    success: Annotated[bool | None, typer.Option("--success/--failed", help="Only solved / unsolved.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Created at or after (ms or ISO-8601).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Created before (ms or ISO-8601).")] = None,
    min_judge: Annotated[float | None, typer.Option("--min-judge", help="Judge score ≥ this.",
                                                    callback=finite())] = None,
    max_judge: Annotated[float | None, typer.Option("--max-judge", help="Judge score ≤ this.",
                                                    callback=finite())] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most N records.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print {out, records} as JSON.")] = False,
) -> None:
    """Stream the matching records to a file (canonical JSON lines, or Parquet), in append order. An existing
    --out file is kept unless --force."""
    from shoparena.store import open_store
    from shoparena.store.export import export_records

    output_file(out, force=force)
    q = _query(agent, agent_version, problem, cluster, suite, eval_run, pipeline, axis, status, success, since,
               until, min_judge, max_judge, limit)
    with open_store(store, create=False) as st:
        n = export_records(st, out, q)
    if as_json:
        print_json({"out": str(out), "records": n})
    else:
        console.print(f"[green]exported[/] {n:,} records → {out}")


@app.command("stats")
def stats(
    store: StoreOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Record counts by status, axis, bucket and scoring-pipeline version."""
    from shoparena.store import open_store

    with open_store(store, create=False) as st:
        s = st.stats()
    if as_json:
        print_json(s.model_dump())
        return
    console.print(f"{s.url}: {s.records:,} records (schema v{s.schema_version})")
    for title, counts in (("status", s.by_status), ("axis", s.by_axis), ("bucket", s.by_bucket),
                          ("pipeline", s.by_pipeline)):
        table = Table(title=f"by {title}", title_justify="left")
        table.add_column(title)
        table.add_column("records", justify="right")
        for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            table.add_row(str(key), f"{n:,}")
        console.print(table)


@app.command("verify")
def verify(
    store: StoreOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Recompute every record's id and hashes from its stored body; exit 3 on any mismatch."""
    from shoparena.store import open_store

    with open_store(store, create=False) as st:
        report = st.verify()
    if as_json:
        print_json({"checked": report.checked, "ok": report.ok, "mismatches": report.mismatches})
    elif report.ok:
        console.print(f"[green]ok[/] {report.checked:,} records verified")
    else:
        for record_id, problem in report.mismatches[:50]:
            err_console.print(f"[red]{record_id}[/] {problem}")
        err_console.print(f"[red]{len(report.mismatches)} mismatches[/] in {report.checked:,} records")
    if not report.ok:
        from shoparena.errors import DataError

        print_error(f"{len(report.mismatches)} of {report.checked:,} records do not match their content",
                    hint="a record was changed after it was stored; see the mismatches above")
        raise typer.Exit(DataError.exit_code)
