"""``shoparena score``: score a rollout file against a problem set and a catalog (docs/shoppingbench.md §7)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json, seed_option

if TYPE_CHECKING:
    from shoparena.catalog import ProductLookup
    from shoparena.scoring.run import ScoreRun
    from shoparena.tasks import Problem


def _open_lookup(catalog: Path) -> ProductLookup:
    """The catalog's search index as a product lookup (imported lazily)."""
    from shoparena.catalog import SearchIndex, index_path

    return SearchIndex.open(index_path(catalog))


def _load_problems(path: Path) -> list[Problem]:
    from shoparena.tasks import load_problems

    return load_problems(path, refuse_conflicts=True)  # a reused id would score rollouts against either


def score(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    problems: Annotated[Path, typer.Option("--problems", help="Problems: upstream JSONL, ORO suite JSON, ours.")],
    rollouts: Annotated[Path, typer.Option("--rollouts", help="Rollout JSONL: step lists or ORO envelopes.")],
    mode: Annotated[str, typer.Option("--mode", help="upstream (paper) or strict (ORO production).")] = "upstream",
    similarity: Annotated[str, typer.Option(
        "--similarity", help="Title similarity: lexical | embedding[:PATH] | precomputed[:PATH].")] = "lexical",
    suite_size: Annotated[int | None, typer.Option(
        "--suite-size", min=1, help="Strict denominator (default: the number of problems).")] = None,
    no_think: Annotated[bool, typer.Option("--no-think", help="Format-check tool_call only (ReAct).")] = False,
    parity: Annotated[bool, typer.Option(
        "--parity", help="Reproduce upstream/ORO code quirks (501-line read limit, message-rendered format…).")] = False,
    k: Annotated[list[int] | None, typer.Option("--k", min=1, help="pass@k values (repeatable, 1 ≤ k ≤ samples).")] = None,
    seed: Annotated[int, seed_option("Bootstrap seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print per-problem scores and the aggregate as JSON.")] = False,
) -> None:
    """Score trajectories: ASR overall and per bucket, gt rate, per-axis rates, format, pass@k."""
    from shoparena.errors import ConfigError
    from shoparena.scoring.run import ScoreConfig, score_run
    from shoparena.scoring.types import MODES, ParityFlags

    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}", hint="use --mode upstream or --mode strict")
    config = ScoreConfig(
        mode=mode,  # type: ignore[arg-type]
        similarity=similarity, parity=ParityFlags.exact() if parity else ParityFlags(),
        think=not no_think, suite_size=suite_size, ks=k or None, seed=seed,
    )
    result = score_run(_open_lookup(catalog), _load_problems(problems), rollouts, config)
    if as_json:
        print_json(_json(result))
        return
    _render(result)


def _json(result: ScoreRun) -> dict[str, Any]:
    return {
        "problems": [s.model_dump(mode="json") for s in result.problems],
        "aggregate": result.aggregate.model_dump(mode="json"),
        "rollouts": result.rollouts,
        "config": result.config.model_dump(mode="json"),
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _render(result: ScoreRun) -> None:
    agg = result.aggregate
    table = Table(title=f"scores ({agg.mode}, similarity {', '.join(agg.similarity)})")
    for col in ("set", "problems", "scored", "ASR %", "gt %", "rule %", "format %", "shop/budget %"):
        table.add_column(col, justify="left" if col == "set" else "right")
    rows = [("all (3 buckets)", agg, None)]
    rows += [(b, r, r.shop_rate if b == "shop" else r.budget_rate) for b, r in agg.by_bucket.items()]
    if agg.knowledge is not None:
        rows.append(("knowledge", agg.knowledge, agg.knowledge.kw_rate))
    for name, r, extra in rows:
        table.add_row(name, str(r.total_problems), str(r.scored_problems), _pct(r.asr), _pct(r.gt_rate),
                      _pct(r.rule_mean), _pct(r.format_mean), _pct(extra))
    console.print(table)
    axes = Table(title="per-axis")
    for col in ("axis", "field score %", "hit rate %"):
        axes.add_column(col, justify="left" if col == "axis" else "right")
    for f, v in agg.field_scores.items():
        axes.add_row(f, _pct(v), _pct(agg.axis_rates.get(f)))
    console.print(axes)
    if agg.pass_at_k:
        extras = [f"{key} {_pct(v)}%" + (f" [{_pct(agg.ci[key][0])}, {_pct(agg.ci[key][1])}]"
                                         if key in agg.ci else "") for key, v in agg.pass_at_k.items()]
        console.print("  ".join(extras))
    load = result.rollouts
    if load.get("malformed") or load.get("unmatched_lines") or load.get("truncated_at"):
        bad = [m["line"] for m in load["malformed"]]
        codes = ", ".join(f"{c} ×{n}" for c, n in (load.get("rejects_by_code") or {}).items())
        msg = (f"[yellow]rollouts:[/] {len(bad)} malformed line(s) {bad[:10]}{f' ({codes})' if codes else ''}, "
               f"{len(load['unmatched_lines'])} unmatched")
        if load.get("truncated_at"):
            msg += f", stopped reading at line {load['truncated_at']}"
        err_console.print(msg)
