"""``shoparena evaluate``: several models, one agent, the same held-out problems; figures with intervals and paired
comparisons (:mod:`shoparena.evaluate`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from shoparena.artefact import fresh_out
from shoparena.cli._common import (
    console,
    episode_tokens_option,
    err_console,
    finite,
    one_of,
    print_json,
    seed_option,
)
from shoparena.cli._output import library_output


def _fmt(x: float, ci: list[float] | None) -> str:
    return f"{x:.3f}" if not ci else f"{x:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _opt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def evaluate(
    model: Annotated[list[str], typer.Option("--model", help="Models, comma-separated or --model repeated: URI or "
                                                             "LABEL=URI (the first is the baseline of the paired "
                                                             "comparisons unless --baseline names another).")],
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    out: Annotated[Path, typer.Option("--out", help="Output directory (evaluation.json, models/<label>/).")],
    agent: Annotated[str, typer.Option("--agent", help="react | oro7 | pipeline | PATH.py.")] = "react",
    problems: Annotated[Path | None, typer.Option("--problems", help="Problems file (or the bank a --split "
                                                                     "draws from).")] = None,
    split: Annotated[str | None, typer.Option("--split", help="CORPUS_DIR:eval, CORPUS_DIR:validation or "
                                                              "CORPUS_DIR:never_touch: the corpus's held-out problems; "
                                                              "join partitions with + (eval+never_touch).")] = None,
    n: Annotated[int, typer.Option("-n", "--n", min=1, help="Samples per problem (pass@k for k ≤ n).")] = 4,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.", callback=finite(0.0))] = 0.7,
    seed: Annotated[int, seed_option("Seed of the sampling seeds and of the bootstrap.")] = 0,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Problems run at once (default: CPU cores).")]
    = None,
    timeout: Annotated[float, typer.Option(help="Seconds per agent call.", callback=finite(0.0, above=True))]
    = 300.0,
    episode_tokens: Annotated[int | None, episode_tokens_option()] = None,
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
    baseline: Annotated[str | None, typer.Option("--baseline", help="The label of the model the paired "
                                                                     "comparisons are made against (default: the "
                                                                     "first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print evaluation.json.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show library warnings and logs live instead of "
                                                            "writing them to OUT/evaluate.log.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an evaluation in --out made with other "
                                                        "settings.")] = False,
) -> None:
    """Evaluate models on held-out problems: ASR per bucket / axis, pass@k, pass^k with bootstrap 95 % CIs, and
    paired comparisons (bootstrap of the difference, exact McNemar, minimum detectable difference).

    Exit codes: 2 bad options, unknown model scheme or --baseline label, 3 bad problems or corpus, 4 a file or
    model not found, 5 an openai: server unreachable or every episode of a model failed on its model backend.
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
    from shoparena.tasks import ProblemLoadReport, load_problems

    if problems is None and split is None:
        raise ConfigError("give --problems FILE or --split CORPUS_DIR:eval|validation|never_touch")
    if judge_gate > 1.0:
        raise ConfigError(f"--judge-gate {judge_gate:g}: judge scores lie in [0, 1]")
    judges = parse_judges(judge or [])
    skipped = ProblemLoadReport(path=str(problems))
    loaded = (split_problems(split, problems=problems) if split
              else load_problems(problems, skipped, refuse_conflicts=True))  # type: ignore[arg-type]
    if skipped.bad_count:  # said before anything runs, as `problems stats` does, and kept in evaluation.json
        err_console.print(f"[yellow]{escape(skipped.summary())}[/]", soft_wrap=True)
    source = split or str(problems)
    if per_bucket_k is not None:
        loaded = per_bucket(loaded, per_bucket_k, seed)
        source += f" ({per_bucket_k} per bucket, seed {seed})"
    if limit is not None:
        loaded = loaded[:limit]
        source += f" (first {limit})"
    # a repeated --model adds models: every one is evaluated, none silently replaced by the next
    config = EvalConfig(models=parse_models(",".join(model)), agent=agent, n_samples=n, temperature=temperature, seed=seed,
                        concurrency=concurrency, timeout_s=timeout, episode_tokens=episode_tokens,
                        protocol=protocol,  # type: ignore[arg-type]
                        problem_set=source, judges=judges, judge_gate=judge_gate, baseline=baseline)
    config.baseline_label()  # an unknown label: exit 2 before anything runs
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file", hint="pass a directory (evaluation.json, models/, the report)")
    _claim(out, config, loaded, catalog=catalog, problems=problems, split=split, reuse=reuse or (),
           train_manifest=train_manifest, resume=resume, force=force)
    cleanup = fresh_out(out)  # a failed run removes what it created, when nothing was written there
    out.mkdir(parents=True, exist_ok=True)
    log_file = out / "evaluate.log"
    total = len(config.models) * len(loaded) * n
    with cleanup, library_output(log_file, verbose=verbose), \
            _progress(total, quiet=as_json, log_file=None if verbose else log_file) as (advance, say):
        body = evaluate_models(catalog, loaded, config, out, resume=resume, reuse=reuse or (), progress=say,
                               advance=advance, skipped=None if split else skipped.to_dict())
        if report:
            from shoparena.evaluate.report import write_report

            write_report(out, train_manifest=train_manifest)
    if as_json:
        print_json(body)
    else:
        _print_tables(body, agent=agent, n=n, temperature=temperature)
        written = "evaluation.json" + (", report.md, report.html" if report else "")
        console.print(f"[dim]→ {out}/ ({written}; library messages in {log_file.name})[/]" if not verbose
                      else f"[dim]→ {out}/ ({written})[/]")
    _backend_failures(body)


def _claim(out: Path, config: Any, loaded: list[Any], *, catalog: Path, problems: Path | None, split: str | None,
           reuse: list[Path] | tuple[()], train_manifest: Path | None, resume: bool, force: bool) -> None:
    """Refuse an --out that is another command's artefact, one of the evaluation's inputs, or an evaluation made
    with other settings or on other problems (its summary would no longer list the models beside it)."""
    from shoparena.artefact import Found, claim_out

    ignore = {"concurrency"}  # how fast, not what: a resumed run may use another

    def differs(found: Found) -> list[str]:
        if found.body is None:
            return []
        was, now = found.body.get("config") or {}, config.model_dump(mode="json")
        changed = [k for k in sorted(set(was) | set(now)) if k not in ignore and was.get(k) != now.get(k)]
        if (found.body.get("problems") or {}).get("ids") != [p.problem_id for p in loaded]:
            changed.append("the problems")
        return changed

    split_dir = Path(split.rpartition(":")[0]) if split and ":" in split else None
    inputs = [("--catalog", catalog), ("--problems", problems), ("--split", split_dir),
              ("--train", train_manifest), *(("--reuse", r) for r in reuse)]
    claim_out(out, "evaluation", inputs=inputs, differs=differs, force=force, ignore=("evaluate.log",))


@contextlib.contextmanager
def _progress(total: int, *, quiet: bool, log_file: Path | None
              ) -> Iterator[tuple[Callable[[int], None], Callable[[str], None]]]:
    """A progress bar over every episode of every model on stderr; each phase message becomes its description
    and a line of ``log_file``. Without a terminal (a pipe, a CI log) the bar is off and the phase messages are
    printed instead; ``--json`` prints nothing but the JSON."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    live = not quiet and err_console.is_terminal
    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True, disable=not live)
    with prog, contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_file, "a", encoding="utf-8")) if log_file is not None else None
        task = prog.add_task("evaluating", total=total)

        def advance(k: int = 1) -> None:
            prog.advance(task, k)

        def say(message: str) -> None:
            if log is not None:
                log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} INFO shoparena.evaluate: {message}\n")
                log.flush()
            if live:
                prog.update(task, description=escape(message[:80]))
            elif not quiet:
                console.print(f"[dim]{escape(message)}[/]")

        yield advance, say


def _backend_failures(body: dict[str, Any]) -> None:
    """Exit 5 when every episode of a model failed on its model backend: its figures are those of no agent."""
    from shoparena.errors import BackendError

    dead = [(label, m["diagnostics"]) for label, m in body["models"].items()
            if (m.get("diagnostics") or {}).get("all_failed_on_backend")]
    if not dead:
        return
    label, d = dead[0]
    others = f" (and {', '.join(x for x, _ in dead[1:])})" if len(dead) > 1 else ""
    example = (d.get("failure_examples") or {}).get("BackendError") or "no message recorded"
    raise BackendError(f"every episode of model {label!r}{others} failed on its model backend "
                       f"({d['episodes']} of {d['episodes']}): {example}",
                       hint="check that the model server answers (evaluation.json was written; its figures for this "
                            "model are those of no agent)")


def _print_tables(body: dict[str, Any], *, agent: str, n: int, temperature: float) -> None:
    ks = list(next(iter(body["models"].values()))["pass@k"])
    top = [ks[-1]] if ks and ks[-1] != "1" else []  # pass@1 is the ASR
    table = Table(title=f"{agent}: {body['problems']['n']} problems × {n} (T={temperature}); ASR: average success "
                        "rate (strict) [95 % bootstrap CI]; per bucket: ASR (its CI in evaluation.json)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("model", no_wrap=True)
    for col in ("ASR", *(f"pass@{k}" for k in top), *body["problems"]["by_bucket"], "GT rate"):
        table.add_column(col, justify="right", no_wrap=True)
    for label, m in body["models"].items():
        table.add_row(escape(label), _fmt(m["asr"], m["ci"]["asr"]),
                      *(_fmt(m["pass@k"][k], m["ci"][f"pass@{k}"]) for k in top),
                      *(f"{m['by_bucket'][b]['asr']:.3f}" if b in m["by_bucket"] else "–"
                        for b in body["problems"]["by_bucket"]), f"{m['gt_rate']:.3f}")
    console.print(table)
    _print_diagnostics(body)
    baseline = body.get("baseline") or next(iter(body["models"]))
    if body["comparisons"]:
        console.print(f"paired comparisons (baseline {escape(baseline)}):")
    for c in body["comparisons"]:
        console.print(escape(f"  {c['b']} − {c['a']}: {c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] "
                             f"(bootstrap p {c['p_value']:.3g}; McNemar {c['mcnemar']['b_only']}/"
                             f"{c['mcnemar']['a_only']} p {c['mcnemar']['p_value']:.3g}; {_sign(c)}MDD {c['mdd']:.3f})"),
                      soft_wrap=True)
    if "judges" in body:
        for label, m in body["models"].items():
            for j, f in m["judges"].items():
                if j == "panel":
                    continue
                c = f["confusion"]
                console.print(escape(f"{label} × judge {j}: {f['usable']} verdicts ({f['failed']} failed), gate pass "
                                     f"{_opt(f['pass_rate'])}, rule×judge ✓✓ {c['rule_pass_judge_pass']} ✓✗ "
                                     f"{c['rule_pass_judge_fail']} ✗✓ {c['rule_fail_judge_pass']} ✗✗ "
                                     f"{c['rule_fail_judge_fail']}, κ vs rule {_opt(f['kappa_vs_rule'])}"))
        panel = body["judges"].get("panel")
        if panel:
            console.print(f"judge panel: Fleiss' κ {_opt(panel['fleiss_kappa'])} over {panel['items']} episodes")


def _n(x: Any) -> str:
    return "–" if x is None else str(x)


def _print_diagnostics(body: dict[str, Any]) -> None:
    """What happened in the episodes, one row per model (``models.L.diagnostics``, docs/evaluate.md): two tables,
    how the episodes ended and how the model behaved in them, each narrow enough for an 80–120 column terminal."""
    rows = [(label, m.get("diagnostics")) for label, m in body["models"].items()]
    if not any(d for _, d in rows):
        return
    ended = ("eps", "finished", "timeout", "t/o after rec", "failed", "calls/ep", "turns/ep", "tools/ep")
    behaved = ("no call", "t-t-stop", "repeats", "GT ret", "GT rec", "notes", "cut", "t-t-s cut")
    tables = [
        _diagnostics_table("what happened in the episodes (docs/evaluate.md, Diagnostics): how they ended", ended,
                           "eps: episodes; t/o after rec: timed out after recommending; /ep: mean per episode"),
        _diagnostics_table("what happened in the episodes: how the model behaved", behaved,
                           "no call: turns without a tool call; t-t-stop: think-then-stop turns (a decision stated, "
                           "no call made) / episodes with one; repeats: tool calls repeating one the episode already "
                           "made / episodes with one; GT ret / rec: episodes whose own searches retrieved / that "
                           "recommended a ground-truth product; notes: parse notes; cut: turns cut at the token cap; "
                           "t-t-s cut: think-then-stop turns among them (– : a log from before backends reported it)"),
    ]
    reasons: list[str] = []
    for label, d in rows:
        if not d:
            for table, columns in zip(tables, (ended, behaved), strict=True):
                table.add_row(escape(label), *["–"] * len(columns))
            continue
        per = d["per_episode"]
        if d["failed_by_reason"]:
            reasons.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in d["failed_by_reason"].items()))
        notes = d.get("parse_notes")
        tables[0].add_row(escape(label), str(d["episodes"]), str(d["finished"]), str(d["timed_out"]),
                          _n(d.get("timed_out_after_recommending")), str(d["failed"]),
                          _per(per["inference_calls"]), _per(per["turns"]), _per(per["tool_calls"]))
        tables[1].add_row(escape(label), _n(d["turns_without_tool_call"]), _tts(d),
                          _pair(d.get("repeated_tool_calls"), d.get("episodes_repeating")), _n(d["gt_retrieved"]),
                          _n(d["gt_recommended"]), "–" if notes is None else str(notes["notes"]),
                          _n(d.get("turns_cut")), _n(d.get("think_then_stop_cut")))
    for table in tables:
        console.print(table)
    if reasons:
        console.print(escape("failed, by reason: " + "; ".join(reasons)), soft_wrap=True)


def _diagnostics_table(title: str, columns: tuple[str, ...], caption: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1),
                  caption_justify="left", caption=caption)
    table.add_column("model", no_wrap=True)
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    return table


def _tts(d: dict[str, Any]) -> str:
    """Think-then-stop turns / episodes with one (``–`` without a call log; the turns alone for a diagnostics
    body written before episodes were counted)."""
    return _pair(d.get("think_then_stop"), d.get("episodes_think_then_stop"))


def _pair(count: int | None, episodes: int | None) -> str:
    """A count and the episodes it occurs in as ``count/episodes``; the count alone when the episodes are not
    known (a diagnostics body written before they were counted), ``–`` when neither is."""
    return _n(count) if episodes is None or count is None else f"{count}/{episodes}"


def _per(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _sign(c: dict[str, Any]) -> str:
    """The comparison's sign test, when its evaluation.json carries one."""
    s = c.get("sign")
    if not isinstance(s, dict):
        return ""
    return f"sign test {s['b_better']}/{s['a_better']} p {s['p_value']:.3g}; "
