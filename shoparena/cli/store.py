"""``shoparena store``: export, count, verify and re-score trajectory records (SQLite or PostgreSQL, chosen by URL)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table

from shoparena.cli._common import (
    console,
    err_console,
    finite,
    ms_option,
    one_of,
    output_file,
    persistent_store,
    print_error,
    print_json,
)
from shoparena.types import MODES, Mode

if TYPE_CHECKING:
    from shoparena.store.types import RecordQuery
    from shoparena.validator import RescoreReport

# The values of shoparena.store.types.Status / Axis (not imported: it loads SQLAlchemy on every CLI start);
# tests/cli/test_bad_input.py checks they agree.
STATUSES: tuple[str, ...] = ("SUCCESS", "FAILED", "TIMED_OUT")
AXES: tuple[str, ...] = ("A", "B", "mixed", "none")

app = typer.Typer(help="Export, count, verify and re-score trajectory records.", no_args_is_help=True)

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
    with open_store(store, readonly=True) as st:
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

    with open_store(store, readonly=True) as st:
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

    with open_store(store, readonly=True) as st:
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


@app.command("rescore")
def rescore(
    store: StoreOpt,
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (its index scores the ids).")],
    problems: Annotated[Path | None, typer.Option("--problems", help="Problem file the records were scored on "
                                                                     "(records name their problem by id).")] = None,
    banks: Annotated[Path | None, typer.Option("--banks", help="Saved bank set holding the records' problems "
                                                               "(instead of, or with, --problems).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="Scoring mode: strict or upstream.",
                                      callback=one_of(MODES))] = "strict",
    since: Annotated[str | None, typer.Option("--since", help="Only records created at or after this (ms, ISO-8601 "
                                                             "date or RFC 3339 time).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Re-score at most N records (a later run "
                                                                    "goes on from there).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; write nothing.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the diff report here as JSON.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff report as JSON.")] = False,
) -> None:
    """Re-score stored trajectories under the current scorer and append them as new records under a new pipeline
    version (the originals are never changed; already re-scored ones are skipped), then report what changed:
    outcomes per bucket, per-field hit rates before → after, and examples."""
    from shoparena.validator import rescore_records

    persistent_store(store)
    if out is not None:
        _check_report_out(out, store, problems)
    report = rescore_records(store, catalog, problems=problems, banks=banks, mode=cast(Mode, mode),
                             since=ms_option(since, "--since"), limit=limit, dry_run=dry_run)
    if out is not None:
        report.write(out)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        _print_rescore(report)


def _check_report_out(out: Path, store: str, problems: Path | None) -> None:
    """Refuse, before anything is appended, an ``--out`` the report could not be written to (a directory, a path
    under a file, a folder that cannot be written) or that is the store or the problem file it reads."""
    import os

    from shoparena.db.engine import sqlite_path
    from shoparena.errors import ConfigError

    output_file(out)
    target = out.resolve()
    db = sqlite_path(store)
    inputs = [p.resolve() for p in (db, problems) if p is not None]
    inputs += [Path(f"{inputs[0]}{suffix}") for suffix in ("-wal", "-shm", "-journal")] if db is not None else []
    if target in inputs:
        raise ConfigError(f"--out {out} is an input of this command", hint="write the report to another file")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: {parent} is not a writable directory",
                          hint="pass a path in a directory you can write")


def _print_rescore(report: RescoreReport) -> None:
    verb = "would append" if report.dry_run else "appended"
    n = report.rescored if report.dry_run else report.appended
    skipped = ", ".join(f"{k} {v:,}" for k, v in report.skipped.items()) or "none"
    console.print(f"{report.considered:,} records read: {report.rescored:,} re-scored ({report.mode}), {verb} "
                  f"{n:,}, {report.already_rescored:,} already re-scored, skipped: {skipped}")
    console.print(f"outcomes changed: {report.changed:,} (gained {report.gained:,}, lost {report.lost:,}); "
                  f"rule score moved: {report.rule_changed:,}")
    if report.catalog_mismatch:
        console.print(f"[yellow]{report.catalog_mismatch:,} records were first scored against another catalog[/]")
    for key in report.pipelines:
        console.print(f"new pipeline version: {key}")
    pct = lambda v: "–" if v is None else f"{v:.1%}"  # noqa: E731
    if report.by_bucket:
        table = Table(title="by bucket", title_justify="left")
        for col in ("bucket", "re-scored", "changed", "gained", "lost", "ASR before", "ASR after"):
            table.add_column(col, justify="left" if col == "bucket" else "right")
        for name, b in report.by_bucket.items():
            table.add_row(name, f"{b.rescored:,}", f"{b.changed:,}", f"{b.gained:,}", f"{b.lost:,}",
                          pct(b.asr_before), pct(b.asr_after))
        console.print(table)
        table = Table(title="hit rates by axis", title_justify="left")
        for col in ("axis", "before", "after"):
            table.add_column(col, justify="left" if col == "axis" else "right")
        for name, a in report.by_axis.items():
            table.add_row(name, pct(a.rate_before), pct(a.rate_after))
        console.print(table)
    if report.examples:
        table = Table(title="examples", title_justify="left")
        for col in ("record", "problem", "success", "rule"):
            table.add_column(col)
        for e in report.examples:
            rule_before = "–" if e.rule_before is None else f"{e.rule_before:.3f}"
            table.add_row(e.record_id[:16], e.problem_id, f"{e.success_before} → {e.success_after}",
                          f"{rule_before} → {e.rule_after:.3f}")
        console.print(table)
