"""``shoparena submit``: run the submission gate over one agent file (``--check``).

Real submission (signed upload to the arena API, cooldown, versions) comes with the arena service; for now the
command only checks. Output with ``--json``: ``{accepted, violations:[{rule, severity, message, line}], cooldown,
similarity, similar_to}``. The exit status is 0 whenever the gate ran (the verdict is in the output); pass
``--exit-code`` to exit 1 when the file is rejected (pre-commit / CI use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_error, print_json
from shoparena.errors import ConfigError, NotFoundError


def submit(
    path: Annotated[Path, typer.Argument(help="The agent file: one .py defining agent_main.")],
    check: Annotated[bool, typer.Option("--check/--no-check", help="Only run the submission gate.")] = True,
    banks: Annotated[list[Path] | None, typer.Option(
        "--banks", help="Problem banks for the integrity checks: directories of problem files (*.jsonl, ORO suite "
        "*.json) or files; repeatable. Without it only structural integrity checks run.")] = None,
    released: Annotated[list[Path] | None, typer.Option(
        "--released", help="Released agent files (or directories of .py files) for the similarity check; "
        "repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the gate report as JSON.")] = False,
    exit_code: Annotated[bool, typer.Option("--exit-code", help="Exit 1 when the file is rejected.")] = False,
) -> None:
    """Check an agent file with the submission gate (format, security, integrity, similarity)."""
    from shoparena.arena.gate import PhraseIndex, check_submission
    from shoparena.arena.gate.bankfiles import load_banks

    if not check:
        raise ConfigError("submitting to an arena is not wired up yet", hint="use `shoparena submit --check`")
    if not path.is_file():
        raise NotFoundError(f"no agent file at {path}", hint="pass the path of a single .py file")
    index = None
    if banks:
        problems, skipped = load_banks(banks)
        index = PhraseIndex.from_problems(problems)
        if skipped and not as_json:
            err_console.print(f"[dim]skipped {len(skipped)} non-problem files in the banks[/]")
    report = check_submission(path.read_bytes(), phrases=index, released=_released(released or []))
    if as_json:
        print_json(report.public())
    else:
        _render(path, report)
    if exit_code and not report.accepted:
        print_error(f"{path} is rejected by the submission gate ({len(report.violations)} violation(s))")
        raise typer.Exit(1)


def _released(paths: list[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in paths:
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            if not f.is_file():
                raise NotFoundError(f"no released agent at {f}")
            out[str(f)] = f.read_text(encoding="utf-8", errors="replace")
    return out


def _render(path: Path, report: object) -> None:
    from shoparena.arena.gate import GateReport

    assert isinstance(report, GateReport)
    verdict = "[green]accepted[/]" if report.accepted else f"[red]rejected[/] (cooldown: {report.cooldown})"
    console.print(f"{path}: {verdict}")
    if report.similarity is not None:
        console.print(f"  most similar released agent: {report.similar_to} ({report.similarity:.0%})")
    if not report.violations:
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("line", "rule", "severity", "message"):
        table.add_column(col, justify="right" if col == "line" else "left", overflow="fold")
    for v in report.violations:
        table.add_row(str(v.line), v.rule, v.severity, v.message)
    console.print(table)
