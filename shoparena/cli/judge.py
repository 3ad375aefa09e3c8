"""``shoparena judge``: the reasoning judge's reliability over stored trajectories (``judge audit``,
:mod:`shoparena.evaluate.audit`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import console, finite, persistent_store, print_json, seed_option

app = typer.Typer(help="Audit the reasoning judge: a panel re-judges stored trajectories.", no_args_is_help=True)


def _f(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _render(out: dict[str, Any]) -> None:
    s = out["sample"]
    console.print(f"[bold]judge audit[/] {out['store']}: {s['judged']} of {s['eligible']} SUCCESS records "
                  f"(seed {out['seed']}, gate ≥ {out['gate']}); rule success {s['rule_success']}, "
                  f"stored verdicts {s['stored_verdicts']} (trace reproduced {s['trace_reproduced']})")
    t = Table("judge", "failed", "pass rate", "mean", "R+J+", "R+J−", "R−J+", "R−J−", "κ vs rule",
              "= stored", "κ vs stored")
    for label, f in out["by_judge"].items():
        c, st = f["confusion"], f["stored_verdict"]
        t.add_row(label, str(f["failed"]), _f(f["pass_rate"]), _f(f["mean_score"]),
                  str(c["rule_pass_judge_pass"]), str(c["rule_pass_judge_fail"]), str(c["rule_fail_judge_pass"]),
                  str(c["rule_fail_judge_fail"]), _f(f["kappa_vs_rule"]), _f(st["same_score"]), _f(st["kappa_gate"]))
    console.print(t)
    console.print("judges: " + "; ".join(f"{k} = {v}" for k, v in out["judges"].items()))
    p = out["panel"]
    if p is not None:
        pairs = ", ".join(f"{k} {_f(v)}" for k, v in p["cohen_kappa"].items())
        console.print(f"panel over {p['items']} records: Fleiss κ gate {_f(p['fleiss_kappa'])}, scores "
                      f"{_f(p['fleiss_kappa_score'])}; Cohen κ {pairs}")
    if out["races"] is None:
        console.print(f"races: none ({out['races_reason']})")
        return
    t = Table("judge", "races", "decided", "winner changed", "rate")
    for label, r in out["race_summary"].items():
        t.add_row(label, str(r["races"]), str(r["decided"]), str(r["winner_changed"]), _f(r["change_rate"]))
    console.print(t)


@app.command("audit")
def audit(
    store: Annotated[str, typer.Option("--store", help="Store URL (sqlite:///path.db or postgresql://…); races are "
                                       "replayed when the arena wrote to the same database.",
                                       callback=persistent_store)],
    judge: Annotated[list[str] | None, typer.Option("--judge", help="A panel member, SPEC or LABEL=SPEC (rubric, "
                                                    "llm:<model-uri>[,…]); repeat it. Default: rubric + "
                                                    "llm:policy:judge-strict|lenient|noisy.")] = None,
    sample: Annotated[int, typer.Option("--sample", min=1, help="Records to re-judge (SUCCESS, with steps).")] = 50,
    seed: Annotated[int, seed_option("Seed of the sample.")] = 0,
    gate: Annotated[float, typer.Option("--gate", help="Judge gate: a score ≥ it passes (the corpus filter's).",
                                        callback=finite(0.0, above=True))] = 0.5,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one LLM judge verdict may take: its model "
                                           "calls, retries and backoffs together.",
                                           callback=finite(0.0, above=True))] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the audit as JSON (shoparena-judge-audit/1).")]
    = False,
) -> None:
    """Re-judge a seeded sample of stored trajectories with a judge panel: agreement (Fleiss' / Cohen's κ),
    rule × judge confusion, and how often each judge would change a race winner."""
    from shoparena.evaluate.audit import audit_judges

    out = audit_judges(store, judge or None, sample, seed, gate=gate, timeout_s=timeout)
    if as_json:
        print_json(out)
    else:
        _render(out)
