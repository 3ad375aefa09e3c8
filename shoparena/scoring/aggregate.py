"""Aggregation of problem scores into a run report (docs/shoppingbench.md §7.4, §7.5).

Samples are grouped by ``problem_id``. A problem with ``n`` matched samples of which ``c`` succeed has
success rate ``c/n`` (= pass@1); every other per-problem value is its mean over samples.

Denominators (§7.5):

- ``upstream``: the problems with at least one matched rollout (upstream joins by query and divides by
  the number it found);
- ``strict``: the full suite (ORO ``compute_aggregate``): unscored problems, timeouts and crashes count as
  failures with 0 everywhere. ``suite_size`` is the 3-bucket suite size (int) or sizes per bucket (mapping);
  by default the number of distinct problems in ``scores`` (include :meth:`Scorer.unmatched` entries for
  problems without a rollout). Rates are clamped to ≤ 1 as ORO does.

The 3-bucket figures (``asr``, ``gt_rate``…) cover product, shop and voucher; Knowledge is reported apart.
pass@k uses problems with ``n ≥ k`` (upstream) or every suite problem with missing samples counted as
failures (strict). Bootstrap intervals resample problems (seeded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shoparena.errors import ConfigError
from shoparena.scoring.metrics import N_RESAMPLES, bootstrap_ci, default_ks, strict_pass
from shoparena.scoring.types import FIELDS, BucketReport, ProblemScore, ScoreReport
from shoparena.tasks.types import ASR_BUCKETS
from shoparena.types import Mode


@dataclass
class _Problem:
    """One problem's samples, reduced to per-problem means."""

    bucket: str
    n: int = 0
    c: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    fields: dict[str, float] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    unmatched_totals: dict[str, int] = field(default_factory=dict)

    def add(self, s: ProblemScore) -> None:
        if not s.matched:
            if not self.unmatched_totals:
                self.unmatched_totals = dict(s.axis_totals)
            return
        self.n += 1
        self.c += bool(s.success)
        for key, value in (("success", float(s.success)), ("gt", float(s.gt >= 1)), ("rule", s.rule),
                           ("format", s.format), ("length", s.length), ("product", s.product),
                           ("shop", s.shop), ("budget", s.budget), ("kw", s.kw)):
            if value is not None:
                self.sums[key] = self.sums.get(key, 0.0) + value
        for f, v in s.fields.items():
            self.fields[f] = self.fields.get(f, 0.0) + v
        for f, v in s.axis_hits.items():
            self.hits[f] = self.hits.get(f, 0) + v
        for f, v in s.axis_totals.items():
            self.totals[f] = self.totals.get(f, 0) + v

    def mean(self, key: str) -> float:
        return self.sums.get(key, 0.0) / self.n if self.n else 0.0


def _group(scores: Sequence[ProblemScore], mode: Mode) -> dict[str, _Problem]:
    groups: dict[str, _Problem] = {}
    for s in scores:
        if s.matched and s.mode != mode:
            raise ConfigError(f"score of {s.problem_id!r} was computed in mode {s.mode!r}, not {mode!r}",
                              hint="aggregate scores with the mode they were scored in")
        groups.setdefault(s.problem_id, _Problem(bucket=s.bucket)).add(s)
    return groups


def _denominator(probs: list[_Problem], mode: Mode, size: int | None) -> int:
    scored = sum(1 for p in probs if p.n)
    if mode == "upstream":
        return scored
    return max(size if size is not None else len(probs), 0)


def _report(probs: list[_Problem], mode: Mode, size: int | None, bucket: str | None = None) -> BucketReport:
    """Aggregates over ``probs``: one ``bucket``, or the 3-bucket union when ``bucket`` is None."""
    denom = _denominator(probs, mode, size)
    scored = [p for p in probs if p.n]

    def rate(total: float) -> float:
        return min(total / denom, 1.0) if denom else 0.0

    def over(key: str) -> float:
        return rate(sum(p.mean(key) for p in scored))

    field_names = ["title"] if bucket == "knowledge" else list(FIELDS)
    fields = {f: rate(sum(p.fields.get(f, 0.0) / p.n for p in scored)) for f in field_names}
    hit_sum = {f: 0 for f in field_names}
    tot_sum = {f: 0 for f in field_names}
    for p in probs:
        src_hits, src_tot = (p.hits, p.totals) if p.n else ({}, p.unmatched_totals if mode == "strict" else {})
        for f in field_names:
            hit_sum[f] += src_hits.get(f, 0)
            tot_sum[f] += src_tot.get(f, 0)
    return BucketReport(
        total_problems=denom, scored_problems=len(scored),
        successful_problems=sum(p.c / p.n for p in scored),
        asr=over("success"), gt_rate=over("gt"), rule_mean=over("rule"), format_mean=over("format"),
        length_mean=over("length"), product_rate=over("product"), field_scores=fields,
        axis_rates={f: (hit_sum[f] / tot_sum[f] if tot_sum[f] else None) for f in field_names},
        shop_rate=over("shop") if bucket == "shop" else None,
        budget_rate=over("budget") if bucket == "voucher" else None,
        kw_rate=over("kw") if bucket == "knowledge" else None,
    )


def _pass_values(probs: list[_Problem], mode: Mode, size: int | None, k: int, hat: bool) -> list[float]:
    values = []
    for p in probs:
        if p.n >= k or mode == "strict":
            values.append(strict_pass(p.n, p.c, k, hat=hat))
    if mode == "strict" and size is not None and size > len(probs):
        values.extend([0.0] * (size - len(probs)))
    return values


def aggregate(
    scores: Sequence[ProblemScore],
    *,
    mode: Mode,
    suite_size: int | Mapping[str, int] | None = None,
    ks: Sequence[int] | None = None,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> ScoreReport:
    """The run report (module docstring). ``ks`` defaults to 1, 2, 4, … up to the most samples seen."""
    groups = _group(scores, mode)
    sizes: Mapping[str, int] = suite_size if isinstance(suite_size, Mapping) else {}
    main = [p for p in groups.values() if p.bucket in ASR_BUCKETS]
    main_size: int | None
    if isinstance(suite_size, Mapping):
        main_size = sum(v for b, v in suite_size.items() if b in ASR_BUCKETS)
    else:
        main_size = suite_size
    overall = _report(main, mode, main_size)
    by_bucket = {
        b: _report([p for p in main if p.bucket == b], mode, sizes.get(b), b)
        for b in ASR_BUCKETS if b in sizes or any(p.bucket == b for p in main)
    }
    know = [p for p in groups.values() if p.bucket == "knowledge"]
    knowledge = _report(know, mode, sizes.get("knowledge"), "knowledge") if know or "knowledge" in sizes else None

    ns = [p.n for p in main if p.n]
    max_n = max(ns, default=0)
    ks = sorted(set(ks)) if ks else default_ks(max_n)
    pass_k: dict[str, float] = {}
    pass_hat: dict[str, float] = {}
    ci: dict[str, tuple[float, float]] = {}
    pad = main_size if mode == "strict" else None
    for k in ks:
        at = _pass_values(main, mode, pad, k, hat=False)
        if not at or (mode == "upstream" and not any(p.n >= k for p in main)):
            continue
        pass_k[f"pass@{k}"] = sum(at) / len(at)
        hat_values = _pass_values(main, mode, pad, k, hat=True)
        pass_hat[f"pass^{k}"] = sum(hat_values) / len(hat_values)
        if n_resamples > 0:
            ci[f"pass@{k}"] = bootstrap_ci(at, n_resamples=n_resamples, confidence=confidence, seed=seed)
    success_values = [p.c / p.n for p in main if p.n]
    if mode == "strict":
        success_values += [0.0] * max(overall.total_problems - len(success_values), 0)
    if success_values and n_resamples > 0:
        ci["asr"] = bootstrap_ci(success_values, n_resamples=n_resamples, confidence=confidence, seed=seed)

    return ScoreReport(
        mode=mode, similarity=sorted({s.similarity for s in scores}),
        total_problems=overall.total_problems, scored_problems=overall.scored_problems,
        successful_problems=overall.successful_problems, asr=overall.asr,
        asr_by_bucket={b: r.asr for b, r in by_bucket.items()},
        gt_rate=overall.gt_rate, rule_mean=overall.rule_mean, format_mean=overall.format_mean,
        length_mean=overall.length_mean, product_rate=overall.product_rate,
        field_scores=overall.field_scores, axis_rates=overall.axis_rates,
        shop_rate=by_bucket["shop"].shop_rate if "shop" in by_bucket else None,
        budget_rate=by_bucket["voucher"].budget_rate if "voucher" in by_bucket else None,
        by_bucket=by_bucket, knowledge=knowledge,
        samples_per_problem=(min(ns, default=0), max_n),
        pass_at_k=pass_k, pass_hat_k=pass_hat, ci=ci,
        ground_truth_rate=overall.gt_rate, success_rate=overall.asr, format_score=overall.format_mean,
        field_matching=overall.rule_mean,
    )
