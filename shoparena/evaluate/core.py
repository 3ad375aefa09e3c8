"""Held-out evaluation of several models on the same problems: runs through the evaluation core, then statistics.

:func:`evaluate_models` runs each model (``LABEL=URI`` or a bare URI) with one agent through
:func:`shoparena.validator.run.run_agents` — the sandbox, the logging gateway, the per-(problem, sample) seeds and
the strict scorer of every other run — into ``<out>/models/<label>/`` and then :func:`summarise` reads what those
runs stored (``scores.jsonl``) and writes ``<out>/evaluation.json``. Because the summary is a pure function of the
stored runs, a report can be re-made, and two evaluations diffed, without running anything again.

Per model: ASR (average success rate: 3-bucket, strict denominator, every problem of the set counts), per bucket,
per axis (title / price / service / SKU & attrs: Σ hits / Σ totals over the reward items), ground-truth rate,
unbiased pass@k and pass^k for every k ≤ n, each with a percentile bootstrap 95 % interval over problems (seeded),
and what happened in the episodes (finished / timed out / failed by reason, calls and turns, think-then-stop turns,
ground truth retrieved and recommended, parse notes: :mod:`shoparena.evaluate.diagnostics`). Between the baseline
(``EvalConfig.baseline``, default the first model) and the others on the same problems: the paired bootstrap of the
ASR difference, the exact McNemar and sign tests and the minimum detectable difference
(:mod:`shoparena.evaluate.stats`). With judges, every stored episode is judged after the runs and the rule × judge
confusion and κ join the summary (:mod:`shoparena.evaluate.judging`). The JSON schema is ``shoparena-evaluation/1``,
documented in ``docs/evaluate.md``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shoparena.corpus.problems import partition_problems
from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.evaluate.choice import choice_summary
from shoparena.evaluate.diagnostics import run_diagnostics
from shoparena.evaluate.judging import JudgeEntry, judge_run, judge_summary
from shoparena.evaluate.stats import (
    majority_success,
    mcnemar_exact,
    min_detectable_difference,
    paired_bootstrap,
    sign_test,
)
from shoparena.scoring.metrics import N_RESAMPLES, bootstrap_ci, ratio_bootstrap_ci, strict_pass
from shoparena.scoring.types import FIELDS
from shoparena.tasks.types import ASR_BUCKETS, Problem
from shoparena.validator import EpisodeTokens
from shoparena.validator.run import read_run_file

__all__ = [
    "FORMAT", "EvalConfig", "ModelEntry", "comparison_pairs", "evaluate_models", "paired_comparison", "parse_models",
    "partition_problems", "per_bucket", "problem_rates", "split_problems", "summarise",
]

FORMAT = "shoparena-evaluation/1"
JUDGE_GATE = 0.5
"""The corpus filter's judge gate (``FilterConfig.min_judge_score``), pinned equal by a test."""
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ModelEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    uri: str


class EvalConfig(BaseModel):
    """Everything that decides an evaluation; saved in ``evaluation.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: list[ModelEntry] = Field(min_length=1)
    agent: str = "react"
    n_samples: int = Field(4, ge=1)
    temperature: float = Field(0.7, ge=0.0)
    seed: int = 0
    concurrency: int | None = Field(None, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    episode_tokens: EpisodeTokens | None = None
    """Completion tokens per episode, the clock that does not depend on concurrency (``RunConfig.episode_tokens``);
    ``None``: the wall clock ``timeout_s`` only."""
    score_mode: Literal["strict", "upstream"] = "strict"
    protocol: Literal["native", "tags"] | None = None
    problem_set: str = "problems"
    """Where the problems came from (a file, or ``CORPUS:eval`` / ``CORPUS:validation`` / ``CORPUS:never_touch``)."""
    n_resamples: int = Field(N_RESAMPLES, ge=100)
    judges: list[JudgeEntry] = Field(default_factory=list)
    """Judges that judge every stored episode after the runs (:mod:`shoparena.evaluate.judging`)."""
    judge_gate: float = Field(JUDGE_GATE, ge=0.0, le=1.0)
    """A verdict passes the judge gate at this score (the corpus filter's ``min_judge_score`` default)."""
    baseline: str | None = None
    """The label of the model the paired comparisons are made against (``None``: the first model)."""

    def baseline_label(self) -> str:
        """The baseline's label; :class:`ConfigError` (exit 2, the labels in the hint) for one that is not a model."""
        labels = [m.label for m in self.models]
        if self.baseline is None:
            return labels[0]
        if self.baseline not in labels:
            raise ConfigError(f"baseline {self.baseline!r} is not one of the evaluated models",
                              hint="--baseline " + " | ".join(labels))
        return self.baseline


def comparison_pairs(labels: Sequence[str], baseline: str) -> list[tuple[str, str]]:
    """The ``(a, b)`` pairs compared: the baseline against every other model in order, then each model against
    the one before it where that pair (either way round) is not compared already."""
    pairs = [(baseline, b) for b in labels if b != baseline]
    seen = {frozenset(p) for p in pairs}
    for a, b in pairwise(labels):
        if frozenset((a, b)) not in seen:
            seen.add(frozenset((a, b)))
            pairs.append((a, b))
    return pairs


def _slug(uri: str) -> str:
    scheme, _, rest = uri.partition(":")
    tail = Path(rest.partition("?")[0].rstrip("/")).name or rest
    if tail in ("model", "merged") and Path(rest).parent.name:  # runs/x/sft/model → sft
        tail = Path(rest.partition("?")[0].rstrip("/")).parent.name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{scheme}-{tail}").strip("-")[:64]
    return slug or "model"


def parse_models(spec: str | Sequence[str]) -> list[ModelEntry]:
    """``LABEL=URI,URI,…`` → entries; a bare URI is labelled by its scheme and last path part. Labels are unique."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items:
        raise ConfigError("no model given", hint="--model policy:expert,base=hf:models/smollm2-135m")
    out: list[ModelEntry] = []
    for item in items:
        label, sep, uri = item.partition("=")
        if not sep or ":" in label:
            label, uri = _slug(item), item
        if not _LABEL.match(label):
            raise ConfigError(f"bad model label {label!r}", hint="labels: letters, digits, . _ -, at most 64")
        if ":" not in uri:
            raise ConfigError(f"model {uri!r} is not a model URI", hint="scheme:rest, e.g. hf:DIR or policy:expert")
        out.append(ModelEntry(label=label, uri=uri))
    labels = [m.label for m in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"model label {dupes[0]!r} is used twice", hint="name models LABEL=URI")
    return out


def split_problems(spec: str, *, problems: str | os.PathLike[str] | None = None) -> list[Problem]:
    """``CORPUS_DIR:PARTITION`` → the bank problems whose leak cluster the corpus split put in ``PARTITION``
    (``eval``, ``validation`` or ``never_touch``; ``train`` is refused), sorted by id. ``eval+never_touch`` joins
    held-out partitions (disjoint by construction), for one paired test over both. The bank comes from ``problems``
    or the corpus manifest. ``validation`` (carved from train's clusters by ``corpus build --validation F``) is for
    choices made while training; a corpus built without it is refused with a hint to rebuild."""
    corpus, sep, joined = spec.rpartition(":")
    if not sep or not corpus:
        raise ConfigError(f"--split {spec!r}: expected CORPUS_DIR:eval, CORPUS_DIR:validation, "
                          "CORPUS_DIR:never_touch or held-out partitions joined by + (CORPUS_DIR:eval+never_touch)")
    partitions = joined.split("+")
    for partition in partitions:
        if partition not in ("eval", "validation", "never_touch"):
            raise ConfigError(f"--split {spec!r}: partition {partition!r} is not held out",
                              hint="eval, validation or never_touch, alone or joined by + (train problems are what "
                                   "the model was trained on)")
    if len(set(partitions)) != len(partitions):
        raise ConfigError(f"--split {spec!r}: a partition is named twice", hint="name each partition once")
    if "validation" in partitions and (Path(corpus) / "split.json").is_file():
        from shoparena.corpus.split import VALIDATION, SplitManifest

        if VALIDATION not in SplitManifest.load(Path(corpus) / "split.json").partitions:
            raise ConfigError(f"--split {spec!r}: the corpus was built without a validation partition",
                              hint="rebuild it with `shoparena corpus build --validation F` (e.g. 0.2)")
    found = [p for partition in partitions for p in partition_problems(corpus, partition, problems=problems)]
    return sorted(found, key=lambda p: p.problem_id)


def per_bucket(problems: Sequence[Problem], k: int, seed: int = 0) -> list[Problem]:
    """A stratified subset: ``k`` problems of each bucket (all of a smaller bucket), a seeded sample of each
    bucket's problems in id order; the result is sorted by id. The same problems, k and seed give the same set."""
    import random

    if k < 1:
        raise ConfigError("--per-bucket must be ≥ 1")
    out: list[Problem] = []
    buckets = sorted({p.bucket for p in problems})
    for b in buckets:
        pool = sorted((p for p in problems if p.bucket == b), key=lambda p: p.problem_id)
        out.extend(pool if len(pool) <= k else random.Random(f"{seed}:{b}").sample(pool, k))
    return sorted(out, key=lambda p: p.problem_id)


# ── summary of stored runs ────────────────────────────────────────────────────────────────────────────────────


def _read_scores(run_dir: Path) -> list[dict[str, Any]]:
    return read_run_file(run_dir / "scores.jsonl")


def _ci(values: Sequence[float], seed: int, n: int) -> list[float]:
    return [round(x, 6) for x in bootstrap_ci(values, n_resamples=n, seed=seed)]


def _model_summary(rows: list[dict[str, Any]], problems: Sequence[Problem], n_samples: int, seed: int,
                   n_resamples: int) -> tuple[dict[str, Any], dict[str, float]]:
    """One model's figures over ``problems`` (strict: a problem without a scored sample counts as failed)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["problem_id"], []).append(r)
    main = [p for p in problems if p.bucket in ASR_BUCKETS]
    if not main:
        raise DataError("no problem of the product / shop / voucher buckets to evaluate")
    rates: dict[str, float] = {}
    gts: list[float] = []
    counts: list[tuple[int, int]] = []
    for p in main:
        samples = by.get(p.problem_id, [])
        n, c = len(samples), sum(1 for s in samples if s.get("success"))
        rates[p.problem_id] = _rate(samples)
        gts.append(sum(1 for s in samples if (s.get("gt") or 0) >= 1) / n if n else 0.0)
        counts.append((n, c))
    values = [rates[p.problem_id] for p in main]
    out: dict[str, Any] = {
        "n_problems": len(main), "n_samples": n_samples,
        "samples_seen": [min(n for n, _ in counts), max(n for n, _ in counts)],
        "asr": round(float(np.mean(values)), 6), "gt_rate": round(float(np.mean(gts)), 6),
    }
    ci: dict[str, list[float]] = {"asr": _ci(values, seed, n_resamples), "gt_rate": _ci(gts, seed, n_resamples)}
    by_bucket = {}
    for b in ASR_BUCKETS:
        vals = [rates[p.problem_id] for p in main if p.bucket == b]
        if vals:
            by_bucket[b] = {"n_problems": len(vals), "asr": round(float(np.mean(vals)), 6),
                            "ci": _ci(vals, seed, n_resamples)}
    out["by_bucket"] = by_bucket
    by_axis = {}
    for axis in FIELDS:
        hits, totals = [], []
        for p in main:
            samples = by.get(p.problem_id, [])
            hits.append(sum((s.get("axis_hits") or {}).get(axis, 0) for s in samples))
            totals.append(sum((s.get("axis_totals") or {}).get(axis, 0) for s in samples))
        if sum(totals) == 0:
            continue
        lo, hi = ratio_bootstrap_ci(hits, totals, n_resamples=n_resamples, seed=seed)
        by_axis[axis] = {"rate": round(sum(hits) / sum(totals), 6), "ci": [round(lo, 6), round(hi, 6)],
                         "items": int(sum(totals))}
    out["by_axis"] = by_axis
    pk, ph = {}, {}
    for k in range(1, n_samples + 1):
        at = [strict_pass(n, c, k) for n, c in counts]
        hat = [strict_pass(n, c, k, hat=True) for n, c in counts]
        pk[str(k)] = round(float(np.mean(at)), 6)
        ph[str(k)] = round(float(np.mean(hat)), 6)
        ci[f"pass@{k}"] = _ci(at, seed, n_resamples)
        ci[f"pass^{k}"] = _ci(hat, seed, n_resamples)
    out["pass@k"], out["pass^k"], out["ci"] = pk, ph, ci
    out["statuses"] = {}
    for r in rows:
        st = r.get("status") or "UNKNOWN"
        out["statuses"][st] = out["statuses"].get(st, 0) + 1
    return out, rates


def paired_comparison(xa: Sequence[float], xb: Sequence[float], *, seed: int, n_resamples: int) -> dict[str, Any]:
    """``b − a`` over the same problems (per-problem success rates in one order): the difference with its
    paired-bootstrap interval and p value, exact McNemar on majority success, the exact sign test, the minimum
    detectable difference and whether the interval excludes 0."""
    boot = paired_bootstrap(xa, xb, n_resamples=n_resamples, seed=seed)
    mc = mcnemar_exact(majority_success(xa), majority_success(xb))
    return {"diff": round(boot.diff, 6), "ci": [round(x, 6) for x in boot.ci],
            "p_value": round(boot.p_value, 6), "mcnemar": mc.to_dict(), "sign": sign_test(xa, xb).to_dict(),
            "mdd": round(min_detectable_difference(xa, xb), 6), "n_problems": boot.n_problems,
            "separable": boot.ci[0] > 0 or boot.ci[1] < 0}


def problem_rates(run_dir: str | os.PathLike[str], problem_ids: Sequence[str]) -> list[float]:
    """Each problem's success rate over its scored samples in ``run_dir/scores.jsonl``, in ``problem_ids`` order
    (strict, as :func:`summarise` counts it: a problem without a scored sample is a failure)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in _read_scores(Path(run_dir)):
        by.setdefault(str(r.get("problem_id")), []).append(r)
    return [_rate(by.get(p, [])) for p in problem_ids]


def _rate(samples: Sequence[Mapping[str, Any]]) -> float:
    return sum(1 for s in samples if s.get("success")) / len(samples) if samples else 0.0


def _comparison(a: str, b: str, ra: Mapping[str, float], rb: Mapping[str, float], order: Sequence[str], seed: int,
                n_resamples: int) -> dict[str, Any]:
    return {"a": a, "b": b, **paired_comparison([ra[p] for p in order], [rb[p] for p in order], seed=seed,
                                                 n_resamples=n_resamples)}


def summarise(out: str | os.PathLike[str], config: EvalConfig, problems: Sequence[Problem], *,
              skipped: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``evaluation.json`` from the runs stored under ``<out>/models/<label>/`` (pure: nothing is re-run).
    ``skipped``: the problem file's unusable lines (:meth:`ProblemLoadReport.to_dict`), kept as
    ``problems.skipped`` so the figures say what they leave out."""
    root = Path(out)
    baseline = config.baseline_label()
    models: dict[str, Any] = {}
    rates: dict[str, dict[str, float]] = {}
    for m in config.models:
        run_dir = root / "models" / m.label
        scores = _read_scores(run_dir)
        summary, rates[m.label] = _model_summary(scores, problems, config.n_samples, config.seed,
                                                 config.n_resamples)
        models[m.label] = {"uri": m.uri, "run_dir": f"models/{m.label}", **summary, **_run_meta(run_dir),
                           "choice": choice_summary(scores, run_dir / "calls.jsonl", problems),
                           "diagnostics": run_diagnostics(run_dir, problems)}
    order = [p.problem_id for p in problems if p.bucket in ASR_BUCKETS]
    labels = [m.label for m in config.models]
    comparisons = [_comparison(a, b, rates[a], rates[b], order, config.seed, config.n_resamples)
                   for a, b in comparison_pairs(labels, baseline)]
    judges: dict[str, Any] | None = None
    if config.judges:
        per_model, judges = judge_summary({label: root / "models" / label for label in labels}, config.judges,
                                          config.judge_gate)
        for label in labels:
            models[label]["judges"] = per_model[label]
    body = {
        "format": FORMAT, "config": config.model_dump(mode="json"),
        "problems": {"n": len(order), "ids": order,
                     "by_bucket": {b: sum(1 for p in problems if p.bucket == b) for b in ASR_BUCKETS}},
        "models": models, "baseline": baseline, "comparisons": comparisons,
    }
    if skipped is not None:
        body["problems"]["skipped"] = dict(skipped)
    if judges is not None:
        body["judges"] = judges
    from shoparena._io import atomic_write

    with atomic_write(root / "evaluation.json", "w") as fh:
        fh.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return body


def evaluate_models(catalog: str | os.PathLike[str], problems: Sequence[Problem], config: EvalConfig,
                    out: str | os.PathLike[str], *, progress: Callable[[str], None] | None = None,
                    resume: bool = False, reuse: Sequence[str | os.PathLike[str]] = (),
                    advance: Callable[[int], None] | None = None,
                    skipped: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every model of ``config`` on ``problems`` and summarise (see the module docstring). ``resume``: a model
    whose run directory already holds a summary made with the same settings is not run again. ``reuse``: other
    evaluations' directories; each model keeps the episodes its runs of the same label and settings there have on
    these problems (re-scored, :func:`~shoparena.validator.run.finished_episodes`), so a bigger problem set runs
    only its new problems. ``progress`` hears what is happening (one line per phase), ``advance`` the number of
    episodes each step finished or kept (``len(models) × len(problems) × n_samples`` in all). ``skipped``: the
    problem file's unusable lines, recorded in ``evaluation.json`` (:func:`summarise`)."""
    from shoparena.llm.check import check_models
    from shoparena.validator.run import RunConfig, run_agents

    if not problems:
        raise DataError("no problem to evaluate")
    config.baseline_label()  # an unknown baseline is refused before anything runs
    check_models([m.uri for m in config.models])
    for lender in reuse:
        if not (Path(lender) / "models").is_dir():
            raise NotFoundError(f"--reuse {lender}: not an evaluation directory (no models/ in it)")
    root = Path(out)
    for m in config.models:
        run_dir = root / "models" / m.label
        rc = RunConfig(agent=config.agent, model=m.uri, n_samples=config.n_samples, seed=config.seed,
                       temperature=config.temperature, concurrency=config.concurrency, timeout_s=config.timeout_s,
                       episode_tokens=config.episode_tokens, score_mode=config.score_mode, protocol=config.protocol)
        if resume and _same_run(run_dir, rc, problems):
            if progress:
                progress(f"{m.label}: kept the finished run in {run_dir}")
            if advance:
                advance(len(problems) * config.n_samples)
            continue
        t0 = time.perf_counter()
        if progress:
            progress(f"{m.label}: {m.uri} on {len(problems)} problems × {config.n_samples}")
        lent = [Path(d) / "models" / m.label for d in reuse]
        s = run_agents(catalog, problems, rc, run_dir, advance, resume=resume, reuse=lent)  # interrupted: keeps its episodes
        (run_dir / "problems.json").write_text(json.dumps([p.problem_id for p in problems]) + "\n", encoding="utf-8")
        if progress:
            progress(f"{m.label}: ASR {s.asr:.3f} in {time.perf_counter() - t0:.0f} s")
    for m in config.models:
        for j in config.judges:  # verdicts of unchanged rollouts by the same judge are kept
            if progress:
                progress(f"{m.label}: judging with {j.label} ({j.spec})")
            judge_run(root / "models" / m.label, problems, j)
    return summarise(root, config, problems, skipped=skipped)


def _same_run(run_dir: Path, rc: Any, problems: Sequence[Problem]) -> bool:
    from shoparena.validator.run import same_config

    try:
        stored = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["config"]
        ids = json.loads((run_dir / "problems.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return False
    return (same_config(stored, rc) and ids == [p.problem_id for p in problems]
            and (run_dir / "scores.jsonl").is_file())


def _run_meta(run_dir: Path) -> dict[str, Any]:
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["summary"]
    except (OSError, ValueError, KeyError):
        return {"seconds": None, "calls": {}}
    return {"seconds": summary.get("seconds"), "calls": summary.get("calls", {})}
