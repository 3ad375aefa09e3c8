"""What the report says: :func:`build` turns the loaded inputs into a
:class:`~shoparena.evaluate.report.document.Document`, section by section (docs/evaluate.md, "The report").

Each section reads only the evaluation body (and the manifests) and checks every value it formats: a malformed
``evaluation.json`` is a :class:`DataError` naming the key, never a half-written report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shoparena.errors import DataError
from shoparena.evaluate.report import plots
from shoparena.evaluate.report.document import Document, Figure, Heading, Para, Table
from shoparena.evaluate.report.load import ReportInputs, interval, num, obj

__all__ = ["PLOTS", "build"]

PLOTS = ("report_buckets.svg", "report_passk.svg", "report_loss.svg", "report_funnel.svg")
"""The chart files ``report.md`` may reference (stale ones from an earlier report are removed)."""
_HASH_CHARS = 12


# ── formatting ───────────────────────────────────────────────────────────────────────────────────────────────────


def _f(x: Any, what: str, nd: int = 3) -> str:
    return f"{num(x, what):.{nd}f}"


def _with_ci(x: Any, ci: Any, what: str) -> str:
    lo, hi = interval(ci, what)
    return f"{num(x, what):.3f} [{lo:.3f}, {hi:.3f}]"


def _p(x: Any, what: str) -> str:
    return f"{num(x, what):.3g}"


def _maybe(x: Any, fmt: str) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return "–"
    return format(x, fmt)


def _count(x: Any) -> str:
    return str(x) if isinstance(x, int) and not isinstance(x, bool) else "–"


def _ks(m: Mapping[str, Any], what: str) -> list[int]:
    pk = obj(m.get("pass@k"), f"{what}.pass@k")
    try:
        return sorted(int(k) for k in pk)
    except ValueError:
        raise DataError(f"{what}.pass@k: keys must be integers k") from None


def _figure(name: str, alt: str, draw: Callable[[bool], str | None]) -> Figure | None:
    svg = draw(True)
    return None if svg is None else Figure(name=name, alt=alt, svg=svg + "\n", inline=draw(False) or "")


# ── the evaluation ──────────────────────────────────────────────────────────────────────────────────────────────


def _clock(cfg: dict[str, Any]) -> str:
    """What ended an episode that ran too long: its generated tokens (``episode_tokens``, with the wall clock only
    bounding a hung one) or the wall clock (docs/evaluate.md, "Which clock")."""
    wall, tokens = cfg.get("timeout_s"), cfg.get("episode_tokens")
    wall_text = f"{wall:g} s" if isinstance(wall, int | float) else "?"
    if isinstance(tokens, int):
        return f"clock {tokens} generated tokens an episode (wall bound {wall_text})"
    return f"clock {wall_text} an episode (wall)"


def _table1(doc: Document, body: dict[str, Any]) -> list[str]:
    cfg, models = body["config"], body["models"]
    probs = body["problems"]
    buckets = list(obj(probs.get("by_bucket", {}), "problems.by_bucket"))
    k_max = max(max(_ks(m, f"models.{label}") or [1]) for label, m in models.items())
    doc.add(Heading(2, "Table 1: average success rate (ASR)"))
    doc.add(Para(
        f"Agent {cfg.get('agent', '?')} · {probs.get('n')} problems × {cfg.get('n_samples', '?')} samples · "
        f"temperature {cfg.get('temperature', '?')} · {_clock(cfg)} · scoring {cfg.get('score_mode', '?')} · "
        f"problem set {cfg.get('problem_set', '?')} · 95 % percentile bootstrap intervals over problems "
        f"({cfg.get('n_resamples', '?')} resamples, seed {cfg.get('seed', '?')})."))
    by_n = probs.get("by_bucket", {})
    headers = ["Model", "ASR [95 % CI]", *(f"{b} (n={by_n[b]})" for b in buckets), "pass@1"]
    if k_max > 1:
        headers.append(f"pass@{k_max}")
    headers.append("GT rate")
    rows = []
    for label, m in models.items():
        w = f"models.{label}"
        m = obj(m, w)
        ci = obj(m.get("ci"), f"{w}.ci")
        bb = obj(m.get("by_bucket", {}), f"{w}.by_bucket")
        pk = m["pass@k"]
        row = [label, _with_ci(m.get("asr"), ci.get("asr"), f"{w}.asr")]
        for b in buckets:
            row.append(_with_ci(bb[b].get("asr"), bb[b].get("ci"), f"{w}.by_bucket.{b}") if b in bb else "–")
        for k in ([1, k_max] if k_max > 1 else [1]):
            row.append(_with_ci(pk[str(k)], ci.get(f"pass@{k}"), f"{w}.pass@{k}") if str(k) in pk else "–")
        row.append(_with_ci(m.get("gt_rate"), ci.get("gt_rate"), f"{w}.gt_rate"))
        rows.append(row)
    doc.add(Table(headers, rows))
    return buckets


def _models(doc: Document, body: dict[str, Any]) -> None:
    rows = []
    for label, m in body["models"].items():
        seen = m.get("samples_seen") or []
        seen_s = "–" if len(seen) != 2 else (str(seen[0]) if seen[0] == seen[1] else f"{seen[0]}–{seen[1]}")
        statuses = obj(m.get("statuses", {}), f"models.{label}.statuses")
        rows.append([label, str(m.get("uri", "?")), str(m.get("run_dir", "?")), str(m.get("n_problems", "?")),
                     seen_s, _maybe(m.get("seconds"), ".1f"),
                     ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "–"])
    doc.add(Heading(3, "Models"),
            Table(["Model", "URI", "Run", "Problems", "Samples seen", "Seconds", "Statuses"], rows,
                  text=(0, 1, 2, 6)))


def _diagnostics(doc: Document, body: dict[str, Any]) -> None:
    """What happened in the episodes (``models.L.diagnostics``); left out for an evaluation written before it."""
    found = [(label, m.get("diagnostics")) for label, m in body["models"].items()]
    if not any(d is not None for _, d in found):
        return
    doc.add(Heading(3, "What happened in the episodes"),
            Para("Finished: the agent call ended (the task may still have failed); failed by the error type the run "
                 "recorded. Inference calls: requests to the model through the gateway; turns: the completions it "
                 "answered; tool calls: those the completions emitted; steps: what the rollout kept (none for a "
                 "timed-out episode). Think-then-stop: a turn without a tool call whose text or reasoning states "
                 "the recommendation decision; the turns grow with how many turns an episode gets before its clock ends (a "
                 "faster or quieter machine gives more), the episodes with one do not. Ground truth retrieved: among the ids the episode's own searches "
                 "returned; recommended: among the ids it recommended. Cut at the cap: turns the backend ended "
                 "because they reached the token cap, not at an end token (a cut think-then-stop turn may have lost "
                 "its tool call to the cap); – for a log written before backends reported it. Repeated tool calls: "
                 "calls with the same name and arguments as one the same episode already made (a loop). Timed out "
                 "after recommending: episodes that called recommend_product and still ran out of time. Per "
                 "episode: means over every episode."))
    outcome_head = ["Model", "Episodes", "Finished", "Timed out", "Timed out after recommending", "Failed",
                    "Failed by reason (first message)"]
    turns_head = ["Model", "Inference calls / ep", "Inference failed", "Turns / ep", "Tool calls / ep",
                  "Steps recorded / ep", "Turns without a tool call", "Think-then-stop turns",
                  "Episodes with think-then-stop", "Repeated tool calls (episodes)",
                  "GT retrieved / recommended (episodes)", "Turns cut at the cap", "Think-then-stop turns cut"]
    outcome, turns, notes = [], [], []
    for label, d in found:
        if d is None:  # a model evaluated before diagnostics existed: a dash in every column
            outcome.append([label, *["–"] * (len(outcome_head) - 1)])
            turns.append([label, *["–"] * (len(turns_head) - 1)])
            continue
        w = f"models.{label}.diagnostics"
        d = obj(d, w)
        reasons = obj(d.get("failed_by_reason", {}), f"{w}.failed_by_reason")
        examples = obj(d.get("failure_examples", {}), f"{w}.failure_examples")
        outcome.append([label, _count(d.get("episodes")), _count(d.get("finished")), _count(d.get("timed_out")),
                        _count(d.get("timed_out_after_recommending")), _count(d.get("failed")),
                        "; ".join(f"{k} {v}" + (f" ({examples[k]})" if k in examples else "")
                                  for k, v in reasons.items()) or "–"])
        per = obj(d.get("per_episode", {}), f"{w}.per_episode")
        totals = obj(d.get("totals", {}), f"{w}.totals")
        turns.append([label, _maybe(per.get("inference_calls"), ".2f"), _count(totals.get("inference_failed")),
                      _maybe(per.get("turns"), ".2f"), _maybe(per.get("tool_calls"), ".2f"),
                      _maybe(per.get("steps_recorded"), ".2f"), _count(d.get("turns_without_tool_call")),
                      _count(d.get("think_then_stop")), _count(d.get("episodes_think_then_stop")),
                      f"{_count(d.get('repeated_tool_calls'))} ({_count(d.get('episodes_repeating'))})",
                      f"{_count(d.get('gt_retrieved'))} / {_count(d.get('gt_recommended'))}",
                      _count(d.get("turns_cut")), _count(d.get("think_then_stop_cut"))])
        pn = d.get("parse_notes")
        if isinstance(pn, dict) and pn.get("notes"):
            kinds = obj(pn.get("by_kind", {}), f"{w}.parse_notes.by_kind")
            notes.append([label, _count(pn.get("turns")), _count(pn.get("notes")),
                          ", ".join(f"{k} {v}" for k, v in kinds.items()) or "–"])
    doc.add(Table(outcome_head, outcome, text=(0, len(outcome_head) - 1)), Table(turns_head, turns))
    if notes:
        doc.add(Para("Parse notes: what the backend's text parser dropped from a completion (a malformed or "
                     "unclosed <tool_call> block), by kind."),
                Table(["Model", "Turns with notes", "Notes", "By kind"], notes, text=(0, 3)))
    else:
        doc.add(Para("Parse notes: none (no completion lost a malformed or unclosed tool call to the parser).",
                     note=True))
    for label, d in found:
        if isinstance(d, dict) and d.get("all_failed_on_backend"):
            doc.add(Para(f"Every episode of {label} failed on its model backend: its figures are those of no agent.",
                         note=True))


def _axes(doc: Document, body: dict[str, Any]) -> None:
    axes: list[str] = []
    for m in body["models"].values():
        axes.extend(a for a in obj(m.get("by_axis", {}), "by_axis") if a not in axes)
    if not axes:
        return
    rows = []
    for label, m in body["models"].items():
        row = [label]
        for a in axes:
            ax = m["by_axis"].get(a)
            row.append(f"{_with_ci(ax.get('rate'), ax.get('ci'), f'models.{label}.by_axis.{a}')} "
                       f"({ax.get('items', '?')})" if isinstance(ax, dict) else "–")
        rows.append(row)
    doc.add(Heading(3, "Per axis (Σ hits / Σ reward items, items in brackets)"), Table(["Model", *axes], rows))


def _choice(doc: Document, body: dict[str, Any]) -> None:
    rows = []
    for label, m in body["models"].items():
        c = m.get("choice")
        if c is None:
            continue
        w = f"models.{label}.choice"
        c = obj(c, w)
        rates = obj(c.get("rates"), w + ".rates")
        rows.append([label, str(c.get("episodes"))] + [f"{c.get(k, '?')} ({_maybe(rates.get(k), '.3f')})"
                                                       for k in ("recommended", "retrieved", "chosen", "passed_over")])
    if not rows:
        return
    doc.add(Heading(3, "Retrieval and choice (episodes, share in brackets)"),
            Para("Retrieved: a ground-truth product was among the ids the episode's own searches returned; chosen: "
                 "one was recommended; passed over: retrieved, and only other products recommended."),
            Table(["Model", "Episodes", "Recommended", "Retrieved", "Chosen", "Passed over"], rows))


def _sign(x: Any, what: str) -> str:
    """``b / a (p)`` of a comparison's sign test; "–" for an evaluation.json written before it was recorded."""
    if x is None:
        return "–"
    s = obj(x, f"{what}.sign")
    return f"{num(s.get('b_better'), f'{what}.sign'):.0f} / {num(s.get('a_better'), f'{what}.sign'):.0f} " \
           f"({_p(s.get('p_value'), f'{what}.sign.p_value')})"


def _comparisons(doc: Document, body: dict[str, Any]) -> None:
    doc.add(Heading(2, "Paired comparisons"))
    comps = body["comparisons"]
    if not comps:
        doc.add(Para("One model only: no paired comparison.", note=True))
        return
    baseline = body.get("baseline") or next(iter(body["models"]))
    rows = []
    for i, c in enumerate(comps):
        w = f"comparisons[{i}]"
        c = obj(c, w)
        mc = obj(c.get("mcnemar"), f"{w}.mcnemar")
        lo, hi = interval(c.get("ci"), w)
        rows.append([f"{c.get('b', '?')} − {c.get('a', '?')}", f"{num(c.get('diff'), w):+.3f} [{lo:+.3f}, {hi:+.3f}]",
                     _p(c.get("p_value"), f"{w}.p_value"),
                     f"{mc.get('b_only', '?')} / {mc.get('a_only', '?')}",
                     f"{mc.get('both', '?')} / {mc.get('neither', '?')}",
                     _p(mc.get("p_value"), f"{w}.mcnemar.p_value"), _sign(c.get("sign"), w),
                     _f(c.get("mdd"), f"{w}.mdd"),
                     str(c.get("n_problems", "?")), "yes" if c.get("separable") is True else "no"])
    doc.add(Para(f"Difference b − a of the per-problem success rates; the baseline is {baseline} (every model "
                 "against it, then each model against the one before it); percentile bootstrap "
                 "interval and two-sided p over problems; exact McNemar on majority-per-problem success "
                 "(discordant problems solved by b only / a only); sign test: problems where b's success rate is "
                 "higher / where a's is, exact two-sided p over the untied problems (every sample counts, and it "
                 "stays exact where a bootstrap interval of all-zero rates is the degenerate [0, 0]); MDD: the "
                 "difference detectable at α = 0.05 with 80 % power; separable: the interval excludes 0."),
            Table(["b − a", "Diff [95 % CI]", "Bootstrap p", "McNemar b only / a only", "Both / neither",
                   "McNemar p", "Sign test b / a (p)", "MDD", "Problems", "Separable"], rows))


def _judges(doc: Document, body: dict[str, Any]) -> None:
    if "judges" not in body:
        return
    judges = obj(body["judges"], "judges")
    gate = num(judges.get("gate"), "judges.gate")
    specs = obj(judges.get("specs", {}), "judges.specs")
    doc.add(Heading(2, "Judges"),
            Para(f"Every SUCCESS episode judged after the runs; a verdict passes the judge gate at score ≥ {gate:g}. "
                 "Confusion: rule success (rows) × judge gate (columns) over the episodes with a usable verdict; "
                 "κ: Cohen's κ of rule success and the judge gate. Failed verdicts are counted, never scored."))
    rows = []
    for label, m in body["models"].items():
        per = obj(m.get("judges", {}), f"models.{label}.judges")
        for j in specs:
            f = obj(per.get(j), f"models.{label}.judges.{j}")
            c = obj(f.get("confusion"), f"models.{label}.judges.{j}.confusion")
            rows.append([label, j, str(f.get("usable", "?")), str(f.get("failed", "?")),
                         _maybe(f.get("pass_rate"), ".3f"), _maybe(f.get("mean_score"), ".3f"),
                         f"{c.get('rule_pass_judge_pass', '?')} / {c.get('rule_pass_judge_fail', '?')} / "
                         f"{c.get('rule_fail_judge_pass', '?')} / {c.get('rule_fail_judge_fail', '?')}",
                         _maybe(c.get("agreement"), ".3f"), _maybe(f.get("kappa_vs_rule"), ".3f")])
    doc.add(Table(["Model", "Judge", "Verdicts", "Failed", "Gate pass", "Mean score",
                   "Rule ✓ judge ✓ / rule ✓ judge ✗ / rule ✗ judge ✓ / rule ✗ judge ✗", "Agreement",
                   "κ vs rule"], rows, text=(0, 1)))
    panel = judges.get("panel")
    if isinstance(panel, dict):
        pairs = obj(panel.get("cohen_kappa", {}), "judges.panel.cohen_kappa")
        doc.add(Para(f"Panel of {len(specs)} judges over {panel.get('items', '?')} episodes every judge "
                     f"scored: Fleiss' κ {_maybe(panel.get('fleiss_kappa'), '.3f')} on the gate, "
                     f"{_maybe(panel.get('fleiss_kappa_score'), '.3f')} on the five scores; Cohen's κ by pair: "
                     + (", ".join(f"{k.replace('|', ' × ')} {_maybe(v, '.3f')}" for k, v in pairs.items()) or "–")
                     + "."))


# ── charts of the evaluation ────────────────────────────────────────────────────────────────────────────────────


def bucket_chart(body: dict[str, Any], buckets: list[str], *, standalone: bool = False) -> str | None:
    """ASR overall and per bucket, one bar per model with its interval."""
    cats = ["all", *buckets]
    series = []
    for label, m in body["models"].items():
        values: list[float | None] = []
        cis: list[tuple[float, float] | None] = []
        for b in cats:
            src = m if b == "all" else m["by_bucket"].get(b)
            if not src:
                values.append(None)
                cis.append(None)
                continue
            values.append(num(src["asr"], label))
            cis.append(interval(m["ci"]["asr"] if b == "all" else src["ci"], label))
        series.append(plots.Bars(name=label, values=values, intervals=cis))
    return plots.bar_chart(cats, series, title="ASR per bucket (95 % CI)", y_label="average success rate",
                           standalone=standalone)


def passk_chart(body: dict[str, Any], *, standalone: bool = False) -> str | None:
    """pass@k (with its interval band) and pass^k (dashed) against k, one colour per model."""
    series: list[plots.Series] = []
    k_all: set[int] = set()
    for i, (label, m) in enumerate(body["models"].items()):
        ks = _ks(m, label)
        k_all.update(ks)
        color = plots.PALETTE[i % len(plots.PALETTE)]
        cis = [interval(m["ci"].get(f"pass@{k}"), label) for k in ks]
        series.append(plots.Series(name=f"{label} pass@k", points=[(k, num(m["pass@k"][str(k)], label)) for k in ks],
                                   band=[(k, lo, hi) for k, (lo, hi) in zip(ks, cis, strict=True)], color=color))
        hat = obj(m.get("pass^k", {}), f"models.{label}.pass^k")
        if all(str(k) in hat for k in ks):
            series.append(plots.Series(name=f"{label} pass^k", points=[(k, num(hat[str(k)], label)) for k in ks],
                                       dashed=True, color=color))
    return plots.line_chart(series, title="pass@k (shaded: 95 % CI) and pass^k (dashed)", x_label="k",
                            y_label="rate", x_ticks=[(k, str(k)) for k in sorted(k_all)], standalone=standalone)


# ── training and corpus ─────────────────────────────────────────────────────────────────────────────────────────


def _train_section(doc: Document, train: dict[str, Any], source: Path) -> list[dict[str, Any]]:
    doc.add(Heading(2, "Training progression"))
    doc.add(Para(f"Recipe {train['recipe']} (sha256 {train['recipe_sha256'][:_HASH_CHARS]}) from base "
                 f"{train['base']} (sha256 {train['base_sha256'][:_HASH_CHARS]}) on corpus {train['corpus']}; "
                 f"stages {', '.join(train['stages_requested']) or '–'}"
                 f"{'' if train['complete'] else ' (incomplete)'}; wall {train['wall_s']:.1f} s; "
                 f"manifest {source}."))
    stages = train["stages"]
    if not stages:
        doc.add(Para("No stage has finished yet.", note=True))
        return []
    shown = {"loss_first", "loss_last", "train_loss", "eval_loss", "losses"}
    rows = []
    for s in stages:
        mt = s.get("metrics") or {}
        loss = (f"{_maybe(mt.get('loss_first'), '.4f')} → {_maybe(mt.get('loss_last'), '.4f')}"
                if "loss_first" in mt or "loss_last" in mt else "–")
        other = ", ".join(f"{k} {format(v, '.4g')}" for k, v in sorted(mt.items())
                          if k not in shown and isinstance(v, int | float) and not isinstance(v, bool))
        rows.append([s["stage"] + (" (skipped: resumed)" if s["stage"] in train["skipped"] else ""),
                     str(s["steps"]), _maybe(s["seconds"], ".1f"), _maybe(s.get("tokens_per_s"), ",.0f"),
                     loss, _maybe(mt.get("train_loss"), ".4f"), _maybe(mt.get("eval_loss"), ".4f"),
                     other or "–", s["checkpoint_sha256"][:_HASH_CHARS]])
    doc.add(Table(["Stage", "Steps", "Seconds", "Tokens/s", "Loss first → last", "Train loss", "Eval loss",
                   "Other metrics", "Checkpoint"], rows, text=(0, 7, 8)))
    return stages


def loss_chart(stages: list[dict[str, Any]], *, standalone: bool = False) -> str | None:
    """Every stage's logged losses as one curve, stage after stage, a rule where each ends."""
    series, separators, start = [], [], 0
    for s in stages:
        losses = (s.get("metrics") or {}).get("losses")
        ys = [float(v) for v in losses if isinstance(v, int | float) and not isinstance(v, bool)
              and math.isfinite(v)] if isinstance(losses, list) else []
        if not ys:
            continue
        if series:
            separators.append(start + 0.5)
        series.append(plots.Series(name=str(s["stage"]), points=[(start + i + 1, y) for i, y in enumerate(ys)]))
        start += len(ys)
    return plots.line_chart(series, title="Loss by stage", x_label="logged step (stages one after another)",
                            y_label="training loss", y_range=None, separators=separators, standalone=standalone)


def _corpus_section(doc: Document, counts: list[dict[str, Any]], source: Path) -> None:
    doc.add(Heading(2, "Corpus funnel"), Para(f"From {source}."))
    rows = [[c["stage"], str(c["seen"]), str(c["kept"]), str(sum(c["rejected"].values())),
             ", ".join(f"{k} {v}" for k, v in sorted(c["rejected"].items())) or "–"] for c in counts]
    doc.add(Table(["Stage", "Seen", "Kept", "Rejected", "Rejected by reason"], rows, text=(0, 4)))


def funnel_chart(counts: list[dict[str, Any]], *, standalone: bool = False) -> str | None:
    """Rows kept and rejected (by reason) per filter stage, as stacked bars (the report's and the web's)."""
    reasons = sorted({r for c in counts for r in c["rejected"]})
    segments = [("kept", [float(c["kept"]) for c in counts])]
    segments += [(f"rejected: {r}", [float(c["rejected"].get(r, 0)) for c in counts]) for r in reasons]
    return plots.stacked_bars([c["stage"] for c in counts], segments, x_label="rows", standalone=standalone,
                              title="Corpus funnel: rows kept and rejected (by reason) per stage")


# ── the whole document ──────────────────────────────────────────────────────────────────────────────────────────


def build(inputs: ReportInputs) -> Document:
    """The report of ``inputs`` (docs/evaluate.md, "The report")."""
    body = inputs.evaluation
    labels = list(body["models"])
    doc = Document(title="Evaluation report")
    doc.add(Para(f"{len(labels)} model{'s' if len(labels) != 1 else ''}: {', '.join(labels)}. "
                 "ASR is the average success rate with the strict denominator: every problem of the set counts, a "
                 "problem without a scored sample counts as failed."))

    def figure(name: str, alt: str, draw: Callable[[bool], str | None]) -> None:
        fig = _figure(name, alt, draw)
        if fig is not None:
            doc.add(fig)

    try:
        buckets = _table1(doc, body)
        _models(doc, body)
        _diagnostics(doc, body)
        _axes(doc, body)
        _choice(doc, body)
        figure("report_buckets.svg", "ASR per bucket with 95 % intervals",
               lambda standalone: bucket_chart(body, buckets, standalone=standalone))
        figure("report_passk.svg", "pass@k and pass^k curves", lambda standalone: passk_chart(body, standalone=standalone))
        _comparisons(doc, body)
        _judges(doc, body)
    except DataError as exc:
        raise DataError(f"{inputs.evaluation_file}: {exc.message}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise DataError(f"{inputs.evaluation_file}: not a complete shoparena evaluation ({type(exc).__name__}: "
                        f"{exc})", hint="re-make it with `shoparena evaluate --resume`") from None
    if inputs.train is not None and inputs.train_file is not None:
        stages = _train_section(doc, inputs.train, inputs.train_file)
        figure("report_loss.svg", "training loss by stage", lambda standalone: loss_chart(stages, standalone=standalone))
    if inputs.corpus is not None and inputs.corpus_file is not None:
        counts = inputs.corpus
        _corpus_section(doc, counts, inputs.corpus_file)
        figure("report_funnel.svg", "corpus funnel", lambda standalone: funnel_chart(counts, standalone=standalone))
    return doc
