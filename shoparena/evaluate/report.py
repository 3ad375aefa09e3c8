"""The evaluation report: ``report.md`` and a self-contained ``report.html`` rendered from stored files only.

:func:`write_report` reads ``<out>/evaluation.json`` (written by :func:`shoparena.evaluate.core.summarise`) and,
when given, a training run's ``manifest.json`` and a corpus manifest, and writes:

- the Table-1-shaped table (one row per model, in evaluation order: ASR, ASR per bucket, pass@1, pass@k for the
  largest k and the ground-truth rate, each with its 95 % bootstrap interval), the models' URIs and run facts, the
  per-axis rates and the paired comparisons (bootstrap difference, exact McNemar, MDD);
- plots (matplotlib, Agg canvas, no pyplot state): ASR per bucket with interval bars, pass@k / pass^k curves,
  the training loss curves stage by stage and the corpus funnel;
- the training progression (steps, seconds, tokens/s, losses, checkpoint hash per stage) and the corpus funnel
  (seen → kept, rejections by reason) as tables.

``report.md`` references its plots as ``report_*.png`` files beside it; ``report.html`` embeds them as base64 PNG
data URIs, inlines its CSS and loads nothing from anywhere. Every string read from a file is escaped (the inputs
are untrusted), nothing depends on the clock, and PNGs are written without the software version: the same inputs
give byte-identical files. Every file is written atomically. Without matplotlib the report is written without
plots and says so.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoparena.errors import DataError, NotFoundError

__all__ = ["PLOTS", "write_report"]

PLOTS = ("report_buckets.png", "report_passk.png", "report_loss.png", "report_funnel.png")
"""The plot files ``report.md`` may reference (stale ones from an earlier report are removed)."""
_DPI = 100
_HASH_CHARS = 12


# ── blocks: one intermediate form rendered twice ───────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str


@dataclass(frozen=True)
class _Para:
    text: str
    note: bool = False


@dataclass(frozen=True)
class _Table:
    headers: list[str]
    rows: list[list[str]]
    text: tuple[int, ...] = (0,)
    """The columns that are text (left-aligned); the others are numbers (right-aligned)."""


@dataclass(frozen=True)
class _Image:
    name: str
    alt: str
    png: bytes


@dataclass
class _Doc:
    blocks: list[Any] = field(default_factory=list)

    def add(self, *blocks: Any) -> None:
        self.blocks.extend(blocks)


# ── reading and checking the inputs ─────────────────────────────────────────────────────────────────────────────


def _read_json(path: Path, what: str, hint: str | None = None) -> Any:
    if not path.is_file():
        raise NotFoundError(f"{path}: no {what}", hint=hint)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path}: {what} is not UTF-8 text") from None
    except ValueError as exc:
        raise DataError(f"{path}: {what} is not JSON ({exc})") from None


def _num(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise DataError(f"{what}: expected a number, got {type(x).__name__}")
    return float(x)


def _ci(x: Any, what: str) -> tuple[float, float]:
    if not isinstance(x, list | tuple) or len(x) != 2:
        raise DataError(f"{what}: expected an interval [low, high]")
    return _num(x[0], what), _num(x[1], what)


def _obj(x: Any, what: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise DataError(f"{what}: expected an object, got {type(x).__name__}")
    return x


def _load_evaluation(path: Path) -> dict[str, Any]:
    from shoparena.evaluate.core import FORMAT

    body = _obj(_read_json(path, "evaluation.json", hint="run `shoparena evaluate --out DIR` first"), str(path))
    if body.get("format") != FORMAT:
        raise DataError(f"{path}: not a shoparena evaluation (format {body.get('format')!r}, expected {FORMAT!r})")
    for key, kind in (("config", dict), ("problems", dict), ("models", dict), ("comparisons", list)):
        if not isinstance(body.get(key), kind):
            raise DataError(f"{path}: key {key!r} is missing or not a{'n object' if kind is dict else ' list'}")
    if not body["models"]:
        raise DataError(f"{path}: no model in the evaluation")
    return body


def _manifest_file(spec: str | os.PathLike[str]) -> Path:
    path = Path(spec)
    return path / "manifest.json" if path.is_dir() else path


def _load_train(path: Path) -> dict[str, Any]:
    from pydantic import ValidationError

    from shoparena.train.recipe import TrainManifest

    body = _read_json(path, "training manifest", hint="pass the manifest.json of `shoparena train` (or its directory)")
    try:
        return TrainManifest.model_validate(body).model_dump(mode="json")
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"{path}: not a training manifest ({loc}: {first['msg']})") from None


def _default_corpus(train_file: Path, corpus: str) -> Path | None:
    """``<corpus>/manifest.json`` as given, else relative to the training manifest's folder or one above it."""
    rel = Path(corpus)
    candidates = [rel] if rel.is_absolute() else [rel, *(d / rel for d in train_file.resolve().parents)]
    for c in candidates:
        if (c / "manifest.json").is_file():
            return c / "manifest.json"
    return None


def _load_corpus(path: Path) -> list[dict[str, Any]]:
    body = _obj(_read_json(path, "corpus manifest", hint="pass the manifest.json of `shoparena corpus build`"),
                str(path))
    counts = body.get("counts")
    if not isinstance(counts, list):
        raise DataError(f"{path}: not a corpus manifest (no counts list)")
    out = []
    for i, row in enumerate(counts):
        row = _obj(row, f"{path}: counts[{i}]")
        rejected = _obj(row.get("rejected") or {}, f"{path}: counts[{i}].rejected")
        out.append({"stage": str(row.get("stage", "?")), "seen": int(_num(row.get("seen"), f"{path}: counts[{i}].seen")),
                    "kept": int(_num(row.get("kept"), f"{path}: counts[{i}].kept")),
                    "rejected": {str(k): int(_num(v, f"{path}: counts[{i}].rejected.{k}"))
                                 for k, v in rejected.items()}})
    return out


# ── formatting ───────────────────────────────────────────────────────────────────────────────────────────────────


def _f(x: Any, what: str, nd: int = 3) -> str:
    return f"{_num(x, what):.{nd}f}"


def _with_ci(x: Any, ci: Any, what: str) -> str:
    lo, hi = _ci(ci, what)
    return f"{_num(x, what):.3f} [{lo:.3f}, {hi:.3f}]"


def _p(x: Any, what: str) -> str:
    return f"{_num(x, what):.3g}"


def _maybe(x: Any, fmt: str) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return "–"
    return format(x, fmt)


def _ks(m: Mapping[str, Any], what: str) -> list[int]:
    pk = _obj(m.get("pass@k"), f"{what}.pass@k")
    try:
        return sorted(int(k) for k in pk)
    except ValueError:
        raise DataError(f"{what}.pass@k: keys must be integers k") from None


# ── the sections ────────────────────────────────────────────────────────────────────────────────────────────────


def _table1(doc: _Doc, body: dict[str, Any]) -> tuple[list[str], int]:
    cfg, models = body["config"], body["models"]
    probs = body["problems"]
    buckets = list(_obj(probs.get("by_bucket", {}), "problems.by_bucket"))
    n_problems = probs.get("n")
    k_max = max(max(_ks(m, f"models.{label}") or [1]) for label, m in models.items())
    doc.add(_Heading(2, "Table 1: attack success rate"))
    doc.add(_Para(
        f"Agent {cfg.get('agent', '?')} · {n_problems} problems × {cfg.get('n_samples', '?')} samples · "
        f"temperature {cfg.get('temperature', '?')} · scoring {cfg.get('score_mode', '?')} · "
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
        m = _obj(m, w)
        ci = _obj(m.get("ci"), f"{w}.ci")
        bb = _obj(m.get("by_bucket", {}), f"{w}.by_bucket")
        pk = m["pass@k"]
        row = [label, _with_ci(m.get("asr"), ci.get("asr"), f"{w}.asr")]
        for b in buckets:
            row.append(_with_ci(bb[b].get("asr"), bb[b].get("ci"), f"{w}.by_bucket.{b}") if b in bb else "–")
        for k in ([1, k_max] if k_max > 1 else [1]):
            row.append(_with_ci(pk[str(k)], ci.get(f"pass@{k}"), f"{w}.pass@{k}") if str(k) in pk else "–")
        row.append(_with_ci(m.get("gt_rate"), ci.get("gt_rate"), f"{w}.gt_rate"))
        rows.append(row)
    doc.add(_Table(headers, rows))
    return buckets, k_max


def _models(doc: _Doc, body: dict[str, Any]) -> None:
    rows = []
    for label, m in body["models"].items():
        seen = m.get("samples_seen") or []
        seen_s = "–" if len(seen) != 2 else (str(seen[0]) if seen[0] == seen[1] else f"{seen[0]}–{seen[1]}")
        statuses = _obj(m.get("statuses", {}), f"models.{label}.statuses")
        rows.append([label, str(m.get("uri", "?")), str(m.get("run_dir", "?")), str(m.get("n_problems", "?")),
                     seen_s, _maybe(m.get("seconds"), ".1f"),
                     ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "–"])
    doc.add(_Heading(3, "Models"),
            _Table(["Model", "URI", "Run", "Problems", "Samples seen", "Seconds", "Statuses"], rows,
                   text=(0, 1, 2, 6)))


def _axes(doc: _Doc, body: dict[str, Any]) -> None:
    axes: list[str] = []
    for m in body["models"].values():
        axes.extend(a for a in _obj(m.get("by_axis", {}), "by_axis") if a not in axes)
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
    doc.add(_Heading(3, "Per axis (Σ hits / Σ reward items, items in brackets)"), _Table(["Model", *axes], rows))


def _choice(doc: _Doc, body: dict[str, Any]) -> None:
    rows = []
    for label, m in body["models"].items():
        c = m.get("choice")
        if c is None:
            continue
        w = f"models.{label}.choice"
        c = _obj(c, w)
        rates = _obj(c.get("rates"), w + ".rates")
        rows.append([label, str(c.get("episodes"))] + [f"{c.get(k, '?')} ({_maybe(rates.get(k), '.3f')})"
                                                       for k in ("recommended", "retrieved", "chosen", "passed_over")])
    if not rows:
        return
    doc.add(_Heading(3, "Retrieval and choice (episodes, share in brackets)"),
            _Para("Retrieved: a ground-truth product was among the ids the episode's own searches returned; chosen: "
                  "one was recommended; passed over: retrieved, and only other products recommended."),
            _Table(["Model", "Episodes", "Recommended", "Retrieved", "Chosen", "Passed over"], rows))


def _comparisons(doc: _Doc, body: dict[str, Any]) -> None:
    doc.add(_Heading(2, "Paired comparisons"))
    comps = body["comparisons"]
    if not comps:
        doc.add(_Para("One model only: no paired comparison.", note=True))
        return
    rows = []
    for i, c in enumerate(comps):
        w = f"comparisons[{i}]"
        c = _obj(c, w)
        mc = _obj(c.get("mcnemar"), f"{w}.mcnemar")
        rows.append([f"{c.get('b', '?')} − {c.get('a', '?')}",
                     f"{_num(c.get('diff'), w):+.3f} [{_ci(c.get('ci'), w)[0]:+.3f}, {_ci(c.get('ci'), w)[1]:+.3f}]",
                     _p(c.get("p_value"), f"{w}.p_value"),
                     f"{mc.get('b_only', '?')} / {mc.get('a_only', '?')}",
                     f"{mc.get('both', '?')} / {mc.get('neither', '?')}",
                     _p(mc.get("p_value"), f"{w}.mcnemar.p_value"), _sign(c.get("sign"), w),
                     _f(c.get("mdd"), f"{w}.mdd"),
                     str(c.get("n_problems", "?")), "yes" if c.get("separable") is True else "no"])
    doc.add(_Para("Difference b − a of the per-problem success rates (a is the baseline); percentile bootstrap "
                  "interval and two-sided p over problems; exact McNemar on majority-per-problem success "
                  "(discordant problems solved by b only / a only); sign test: problems where b's success rate is "
                  "higher / where a's is, exact two-sided p over the untied problems (every sample counts, and it "
                  "stays exact where a bootstrap interval of all-zero rates is the degenerate [0, 0]); MDD: the "
                  "difference detectable at α = 0.05 with 80 % power; separable: the interval excludes 0."),
            _Table(["b − a", "Diff [95 % CI]", "Bootstrap p", "McNemar b only / a only", "Both / neither",
                    "McNemar p", "Sign test b / a (p)", "MDD", "Problems", "Separable"], rows))


def _sign(x: Any, what: str) -> str:
    """``b / a (p)`` of a comparison's sign test; "–" for an evaluation.json written before it was recorded."""
    if x is None:
        return "–"
    s = _obj(x, f"{what}.sign")
    return f"{_num(s.get('b_better'), f'{what}.sign'):.0f} / {_num(s.get('a_better'), f'{what}.sign'):.0f} " \
           f"({_p(s.get('p_value'), f'{what}.sign.p_value')})"


def _judges(doc: _Doc, body: dict[str, Any]) -> None:
    if "judges" not in body:
        return
    judges = _obj(body["judges"], "judges")
    gate = _num(judges.get("gate"), "judges.gate")
    specs = _obj(judges.get("specs", {}), "judges.specs")
    doc.add(_Heading(2, "Judges"),
            _Para(f"Every SUCCESS episode judged after the runs; a verdict passes the judge gate at score ≥ {gate:g}. "
                  "Confusion: rule success (rows) × judge gate (columns) over the episodes with a usable verdict; "
                  "κ: Cohen's κ of rule success and the judge gate. Failed verdicts are counted, never scored."))
    rows = []
    for label, m in body["models"].items():
        per = _obj(m.get("judges", {}), f"models.{label}.judges")
        for j in specs:
            f = _obj(per.get(j), f"models.{label}.judges.{j}")
            c = _obj(f.get("confusion"), f"models.{label}.judges.{j}.confusion")
            rows.append([label, j, str(f.get("usable", "?")), str(f.get("failed", "?")),
                         _maybe(f.get("pass_rate"), ".3f"), _maybe(f.get("mean_score"), ".3f"),
                         f"{c.get('rule_pass_judge_pass', '?')} / {c.get('rule_pass_judge_fail', '?')} / "
                         f"{c.get('rule_fail_judge_pass', '?')} / {c.get('rule_fail_judge_fail', '?')}",
                         _maybe(c.get("agreement"), ".3f"), _maybe(f.get("kappa_vs_rule"), ".3f")])
    doc.add(_Table(["Model", "Judge", "Verdicts", "Failed", "Gate pass", "Mean score",
                    "Rule ✓ judge ✓ / rule ✓ judge ✗ / rule ✗ judge ✓ / rule ✗ judge ✗", "Agreement",
                    "κ vs rule"], rows, text=(0, 1)))
    panel = judges.get("panel")
    if isinstance(panel, dict):
        pairs = _obj(panel.get("cohen_kappa", {}), "judges.panel.cohen_kappa")
        doc.add(_Para(f"Panel of {len(specs)} judges over {panel.get('items', '?')} episodes every judge "
                      f"scored: Fleiss' κ {_maybe(panel.get('fleiss_kappa'), '.3f')} on the gate, "
                      f"{_maybe(panel.get('fleiss_kappa_score'), '.3f')} on the five scores; Cohen's κ by pair: "
                      + (", ".join(f"{k.replace('|', ' × ')} {_maybe(v, '.3f')}" for k, v in pairs.items()) or "–")
                      + "."))


def _train_section(doc: _Doc, train: dict[str, Any], source: Path) -> list[dict[str, Any]]:
    doc.add(_Heading(2, "Training progression"))
    doc.add(_Para(f"Recipe {train['recipe']} (sha256 {train['recipe_sha256'][:_HASH_CHARS]}) from base "
                  f"{train['base']} (sha256 {train['base_sha256'][:_HASH_CHARS]}) on corpus {train['corpus']}; "
                  f"stages {', '.join(train['stages_requested']) or '–'}"
                  f"{'' if train['complete'] else ' (incomplete)'}; wall {train['wall_s']:.1f} s; "
                  f"manifest {source}."))
    stages = train["stages"]
    if not stages:
        doc.add(_Para("No stage has finished yet.", note=True))
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
    doc.add(_Table(["Stage", "Steps", "Seconds", "Tokens/s", "Loss first → last", "Train loss", "Eval loss",
                    "Other metrics", "Checkpoint"], rows, text=(0, 7, 8)))
    return stages


def _corpus_section(doc: _Doc, counts: list[dict[str, Any]], source: Path) -> None:
    doc.add(_Heading(2, "Corpus funnel"), _Para(f"From {source}."))
    rows = [[c["stage"], str(c["seen"]), str(c["kept"]), str(sum(c["rejected"].values())),
             ", ".join(f"{k} {v}" for k, v in sorted(c["rejected"].items())) or "–"] for c in counts]
    doc.add(_Table(["Stage", "Seen", "Kept", "Rejected", "Rejected by reason"], rows, text=(0, 4)))


# ── plots ───────────────────────────────────────────────────────────────────────────────────────────────────────


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=_DPI, layout="constrained")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _err(values: Sequence[float], cis: Sequence[tuple[float, float]]) -> list[list[float]]:
    return [[max(0.0, v - lo) for v, (lo, _) in zip(values, cis, strict=True)],
            [max(0.0, hi - v) for v, (_, hi) in zip(values, cis, strict=True)]]


def _plot_buckets(body: dict[str, Any], buckets: list[str]) -> bytes:
    cats = ["all", *buckets]
    models = body["models"]
    fig = _figure(max(5.0, 1.2 * len(cats) * max(1, len(models)) * 0.5 + 2.5), 3.4)
    ax = fig.subplots()
    width = 0.8 / len(models)
    for i, (label, m) in enumerate(models.items()):
        vals, cis, xs = [], [], []
        for j, b in enumerate(cats):
            src = m if b == "all" else m["by_bucket"].get(b)
            if not src:
                continue
            vals.append(_num(src["asr"], label))
            cis.append(_ci(m["ci"]["asr"] if b == "all" else src["ci"], label))
            xs.append(j - 0.4 + width * (i + 0.5))
        ax.bar(xs, vals, width, yerr=_err(vals, cis), capsize=3, label=label)
        for x, v, (_, hi) in zip(xs, vals, cis, strict=True):
            ax.text(x, max(v, hi) + 0.015, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(cats)), cats)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("ASR (95 % CI)")
    ax.set_title("ASR per bucket")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def _plot_passk(body: dict[str, Any]) -> bytes:
    fig = _figure(6.0, 3.4)
    ax = fig.subplots()
    k_all: set[int] = set()
    for label, m in body["models"].items():
        ks = _ks(m, label)
        k_all.update(ks)
        at = [_num(m["pass@k"][str(k)], label) for k in ks]
        cis = [_ci(m["ci"].get(f"pass@{k}"), label) for k in ks]
        line = ax.plot(ks, at, marker="o", label=f"{label} pass@k")[0]
        ax.fill_between(ks, [c[0] for c in cis], [c[1] for c in cis], color=line.get_color(), alpha=0.15,
                        linewidth=0)
        hat = [_num(m["pass^k"][str(k)], label) for k in ks if str(k) in m.get("pass^k", {})]
        if len(hat) == len(ks):
            ax.plot(ks, hat, marker=".", linestyle="--", color=line.get_color(), label=f"{label} pass^k")
    ax.set_xticks(sorted(k_all))
    ax.set_xlabel("k")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate (shaded: 95 % CI of pass@k)")
    ax.set_title("pass@k and pass^k")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def _plot_losses(stages: list[dict[str, Any]]) -> bytes | None:
    curves = []
    for s in stages:
        losses = (s.get("metrics") or {}).get("losses")
        if isinstance(losses, list):
            ys = [float(v) for v in losses if isinstance(v, int | float) and not isinstance(v, bool)]
            if ys:
                curves.append((s["stage"], ys))
    if not curves:
        return None
    fig = _figure(6.5, 3.2)
    ax = fig.subplots()
    start = 0
    for i, (name, ys) in enumerate(curves):
        xs = list(range(start + 1, start + len(ys) + 1))
        ax.plot(xs, ys, marker="." if len(ys) < 50 else None, label=name)
        if i:
            ax.axvline(start + 0.5, color="0.7", linewidth=0.8)
        start += len(ys)
    ax.set_xlabel("logged step (stages one after another)")
    ax.set_ylabel("training loss")
    ax.set_title("Loss by stage")
    ax.legend(fontsize="small")
    return _png(fig)


def _plot_funnel(counts: list[dict[str, Any]]) -> bytes:
    reasons = sorted({r for c in counts for r in c["rejected"]})
    fig = _figure(7.0, 0.8 + 0.32 * len(counts))
    ax = fig.subplots()
    ys = list(range(len(counts)))
    kept = [c["kept"] for c in counts]
    ax.barh(ys, kept, color="0.35", label="kept")
    left = list(kept)
    palette = ("tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan",
               "tab:blue", "tab:green")
    for i, r in enumerate(reasons):
        vals = [c["rejected"].get(r, 0) for c in counts]
        ax.barh(ys, vals, left=left, color=palette[i % len(palette)], label=f"rejected: {r}")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_yticks(ys, [c["stage"] for c in counts])
    ax.invert_yaxis()
    ax.set_xlabel("rows")
    ax.set_xlim(0, max([*left, 1]) * 1.03)
    ax.set_title("Corpus funnel: rows kept and rejected (by reason) per stage")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


# ── rendering ───────────────────────────────────────────────────────────────────────────────────────────────────


def _md_text(s: str) -> str:
    """One line of Markdown text: no raw HTML (``< > &`` escaped), no cell break (``|``), no link (``](``)."""
    s = html.escape(" ".join(str(s).split()), quote=False).replace("\\", "\\\\")
    return s.replace("|", "\\|").replace("](", "]\\(")


def _to_md(doc: _Doc) -> str:
    out: list[str] = []
    for b in doc.blocks:
        if isinstance(b, _Heading):
            out += ["#" * b.level + " " + _md_text(b.text), ""]
        elif isinstance(b, _Para):
            out += [("> " if b.note else "") + _md_text(b.text), ""]
        elif isinstance(b, _Table):
            out.append("| " + " | ".join(_md_text(h) for h in b.headers) + " |")
            out.append("|" + "|".join(":---" if i in b.text else "---:" for i in range(len(b.headers))) + "|")
            out += ["| " + " | ".join(_md_text(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, _Image):
            out += [f"![{_md_text(b.alt)}]({b.name})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1f24; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.88rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.55rem; vertical-align: top; }
th { background: #f3f5f7; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
p.note { color: #57606a; font-style: italic; }
img { max-width: 100%; height: auto; display: block; margin: 0.6rem 0 1.2rem; }
""".strip()


def _to_html(doc: _Doc, title: str) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{e(title)}</title>",
           f"<style>\n{_CSS}\n</style>", "</head>", "<body>"]
    for b in doc.blocks:
        if isinstance(b, _Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, _Para):
            out.append(('<p class="note">' if b.note else "<p>") + f"{e(b.text)}</p>")
        elif isinstance(b, _Table):
            out.append("<table>")
            out.append("<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in b.headers) + "</tr></thead>")
            out.append("<tbody>")
            for row in b.rows:
                out.append("<tr>" + "".join(f"<td>{e(c)}</td>" if i in b.text else f'<td class="n">{e(c)}</td>'
                                            for i, c in enumerate(row)) + "</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, _Image):
            data = base64.b64encode(b.png).decode("ascii")
            out.append(f'<img alt="{e(b.alt)}" src="data:image/png;base64,{data}">')
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def _write(path: Path, data: bytes) -> None:
    from shoparena._io import atomic_write

    with atomic_write(path, "wb") as fh:
        fh.write(data)


# ── entry point ─────────────────────────────────────────────────────────────────────────────────────────────────


def _plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_report(out: str | os.PathLike[str], *, train_manifest: str | os.PathLike[str] | None = None,
                 corpus_manifest: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """Render ``<out>/report.md`` (+ ``report_*.png``) and ``<out>/report.html`` from ``<out>/evaluation.json``,
    the training manifest (a ``manifest.json`` or its directory) and the corpus manifest (default: the
    ``manifest.json`` of the training manifest's ``corpus`` when it exists). Returns ``(md, html)``. A missing
    input file → :class:`NotFoundError`; a malformed one → :class:`DataError`."""
    root = Path(out)
    body = _load_evaluation(root / "evaluation.json")
    train = train_file = None
    if train_manifest is not None:
        train_file = _manifest_file(train_manifest)
        train = _load_train(train_file)
    corpus_file: Path | None = None
    if corpus_manifest is not None:
        corpus_file = _manifest_file(corpus_manifest)
    elif train is not None and train_file is not None:
        corpus_file = _default_corpus(train_file, train["corpus"])
    counts = _load_corpus(corpus_file) if corpus_file is not None else None
    plots = _plots_available()

    doc = _Doc()
    doc.add(_Heading(1, "Evaluation report"))
    labels = list(body["models"])
    doc.add(_Para(f"{len(labels)} model{'s' if len(labels) != 1 else ''}: {', '.join(labels)}. "
                  "ASR uses the strict denominator: every problem of the set counts, a problem without a scored "
                  "sample counts as failed."))
    if not plots:
        doc.add(_Para("Plots are left out: matplotlib is not installed (pip install matplotlib).", note=True))
    written: dict[str, bytes] = {}

    def image(name: str, alt: str, png: bytes | None) -> None:
        if png is not None:
            written[name] = png
            doc.add(_Image(name, alt, png))

    with warnings.catch_warnings(), _rc():
        warnings.simplefilter("ignore")  # missing glyphs of odd labels, layout notes: never an error here
        evaluation = root / "evaluation.json"
        try:
            buckets, _ = _table1(doc, body)
            _models(doc, body)
            _axes(doc, body)
            _choice(doc, body)
            if plots:
                image("report_buckets.png", "ASR per bucket with 95 % intervals", _plot_buckets(body, buckets))
                image("report_passk.png", "pass@k and pass^k curves", _plot_passk(body))
            _comparisons(doc, body)
            _judges(doc, body)
        except DataError as exc:
            raise DataError(f"{evaluation}: {exc.message}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise DataError(f"{evaluation}: not a complete shoparena evaluation ({type(exc).__name__}: {exc})",
                            hint="re-make it with `shoparena evaluate --resume`") from None
        if train is not None and train_file is not None:
            stages = _train_section(doc, train, train_file)
            if plots:
                image("report_loss.png", "training loss by stage", _plot_losses(stages))
        if counts is not None and corpus_file is not None:
            _corpus_section(doc, counts, corpus_file)
            if plots and counts:
                image("report_funnel.png", "corpus funnel", _plot_funnel(counts))

    for name, png in written.items():
        _write(root / name, png)
    for name in PLOTS:
        if name not in written:
            (root / name).unlink(missing_ok=True)
    md_path, html_path = root / "report.md", root / "report.html"
    _write(md_path, _to_md(doc).encode("utf-8"))
    _write(html_path, _to_html(doc, "Evaluation report: " + ", ".join(labels)).encode("utf-8"))
    return md_path, html_path


def _rc() -> Any:
    """matplotlib settings for reproducible, literal plots (no math text from labels); a no-op without it."""
    import contextlib

    try:
        import matplotlib
    except ImportError:
        return contextlib.nullcontext()
    rc: dict[str, Any] = {"svg.hashsalt": "shoparena", "path.simplify": True, "font.family": "DejaVu Sans"}
    if "text.parse_math" in matplotlib.rcParams:
        rc["text.parse_math"] = False
    return matplotlib.rc_context(rc)
