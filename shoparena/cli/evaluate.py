"""``shoparena evaluate``: several models, one agent, the same held-out problems; figures with intervals and paired
comparisons (:mod:`shoparena.evaluate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shoparena.cli._common import console, finite, one_of, print_json


def _fmt(x: float, ci: list[float] | None) -> str:
    return f"{x:.3f}" if not ci else f"{x:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _opt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def evaluate(
    model: Annotated[str, typer.Option("--model", help="Models, comma-separated: URI or LABEL=URI (the first is "
                                                       "the baseline of the paired comparisons).")],
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    out: Annotated[Path, typer.Option("--out", help="Output directory (evaluation.json, models/<label>/).")],
    agent: Annotated[str, typer.Option("--agent", help="react | oro7 | pipeline | PATH.py.")] = "react",
    problems: Annotated[Path | None, typer.Option("--problems", help="Problems file (or the bank a --split "
                                                                     "draws from).")] = None,
    split: Annotated[str | None, typer.Option("--split", help="CORPUS_DIR:eval or CORPUS_DIR:never_touch: the "
                                                              "corpus's held-out problems.")] = None,
    n: Annotated[int, typer.Option("-n", "--n", min=1, help="Samples per problem (pass@k for k ≤ n).")] = 4,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.", callback=finite(0.0))] = 0.7,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sampling seeds and of the bootstrap.")] = 0,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Problems run at once (default: CPU cores).")]
    = None,
    timeout: Annotated[float, typer.Option(help="Seconds per agent call.", callback=finite(0.0, above=True))]
    = 300.0,
    protocol: Annotated[str | None, typer.Option(help="native | tags, for the ReAct built-ins.",
                                                 callback=one_of(("native", "tags")))] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N problems.")] = None,
    per_bucket_k: Annotated[int | None, typer.Option("--per-bucket", min=1, help="A stratified subset: K problems "
                                                                              "of each bucket (seeded by --seed).")]
    = None,
    resume: Annotated[bool, typer.Option("--resume", help="Keep finished model runs made with the same "
                                                          "settings.")] = False,
    reuse: Annotated[list[Path] | None, typer.Option("--reuse", help="An earlier evaluation's --out (repeat for "
                                                                     "several): each model keeps its episodes "
                                                                     "there (same label and settings) on these "
                                                                     "problems and runs only the others.")] = None,
    report: Annotated[bool, typer.Option("--report", help="Also write report.md and report.html.")] = False,
    train_manifest: Annotated[Path | None, typer.Option("--train", help="A training run's manifest.json (or "
                                                                        "its directory) for the report.")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", help="Judge every stored episode: rubric, "
                                                                     "llm:<model-uri>[,…] or LABEL=SPEC; repeat "
                                                                     "for a panel (Fleiss' κ).")] = None,
    judge_gate: Annotated[float, typer.Option("--judge-gate", help="Judge score that passes the gate.",
                                              callback=finite(0.0))] = 0.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print evaluation.json.")] = False,
) -> None:
    """Evaluate models on held-out problems: ASR per bucket / axis, pass@k, pass^k with bootstrap 95 % CIs, and
    paired comparisons (bootstrap of the difference, exact McNemar, minimum detectable difference).

    Exit codes: 2 bad options or unknown model scheme, 3 bad problems or corpus, 4 a file or model not found,
    5 an openai: server unreachable.
    """
    from shoparena.errors import ConfigError
    from shoparena.evaluate import (
        EvalConfig,
        evaluate_models,
        parse_judges,
        parse_models,
        per_bucket,
        split_problems,
    )
    from shoparena.tasks import load_problems

    if problems is None and split is None:
        raise ConfigError("give --problems FILE or --split CORPUS_DIR:eval|never_touch")
    if judge_gate > 1.0:
        raise ConfigError(f"--judge-gate {judge_gate:g}: judge scores lie in [0, 1]")
    judges = parse_judges(judge or [])
    loaded = split_problems(split, problems=problems) if split else load_problems(problems)  # type: ignore[arg-type]
    source = split or str(problems)
    if per_bucket_k is not None:
        loaded = per_bucket(loaded, per_bucket_k, seed)
        source += f" ({per_bucket_k} per bucket, seed {seed})"
    if limit is not None:
        loaded = loaded[:limit]
        source += f" (first {limit})"
    config = EvalConfig(models=parse_models(model), agent=agent, n_samples=n, temperature=temperature, seed=seed,
                        concurrency=concurrency, timeout_s=timeout, protocol=protocol,  # type: ignore[arg-type]
                        problem_set=source, judges=judges, judge_gate=judge_gate)
    body = evaluate_models(catalog, loaded, config, out, resume=resume, reuse=reuse or (),
                           progress=None if as_json else (lambda m: console.print(f"[dim]{m}[/]")))
    if report:
        from shoparena.evaluate.report import write_report

        write_report(out, train_manifest=train_manifest)
    if as_json:
        print_json(body)
        return
    ks = list(next(iter(body["models"].values()))["pass@k"])
    table = Table(title=f"{agent}: {body['problems']['n']} problems × {n} (T={temperature}), strict, 95 % CIs",
                  title_justify="left")
    for col in ("model", "ASR", *body["problems"]["by_bucket"], *(f"pass@{k}" for k in ks)):
        table.add_column(col, justify="right")
    for label, m in body["models"].items():
        table.add_row(label, _fmt(m["asr"], m["ci"]["asr"]),
                      *(_fmt(m["by_bucket"][b]["asr"], m["by_bucket"][b]["ci"]) if b in m["by_bucket"] else "–"
                        for b in body["problems"]["by_bucket"]),
                      *(_fmt(m["pass@k"][k], m["ci"][f"pass@{k}"]) for k in ks))
    console.print(table)
    for c in body["comparisons"]:
        console.print(f"{c['b']} − {c['a']}: {c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] "
                      f"(bootstrap p {c['p_value']:.3g}; McNemar {c['mcnemar']['b_only']}/{c['mcnemar']['a_only']} "
                      f"p {c['mcnemar']['p_value']:.3g}; {_sign(c)}MDD {c['mdd']:.3f})")
    if "judges" in body:
        for label, m in body["models"].items():
            for j, f in m["judges"].items():
                if j == "panel":
                    continue
                c = f["confusion"]
                console.print(f"{label} × judge {j}: {f['usable']} verdicts ({f['failed']} failed), gate pass "
                              f"{_opt(f['pass_rate'])}, rule×judge ✓✓ {c['rule_pass_judge_pass']} ✓✗ "
                              f"{c['rule_pass_judge_fail']} ✗✓ {c['rule_fail_judge_pass']} ✗✗ "
                              f"{c['rule_fail_judge_fail']}, κ vs rule {_opt(f['kappa_vs_rule'])}")
        panel = body["judges"].get("panel")
        if panel:
            console.print(f"judge panel: Fleiss' κ {_opt(panel['fleiss_kappa'])} over {panel['items']} episodes")
    console.print(f"[dim]→ {out}/evaluation.json[/]")


def _sign(c: dict[str, Any]) -> str:
    """The comparison's sign test, when its evaluation.json carries one."""
    s = c.get("sign")
    if not isinstance(s, dict):
        return ""
    return f"sign test {s['b_better']}/{s['a_better']} p {s['p_value']:.3g}; "
