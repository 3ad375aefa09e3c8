"""The statistics of a held-out evaluation: paired comparisons, detectable effects and judge agreement.

Everything is a pure function of per-problem values, seeded where it resamples:

- :func:`paired_bootstrap` — the ASR difference between two models on the same problems, with a percentile
  bootstrap interval that resamples *problems* (each problem's samples stay together, so within-problem
  correlation is respected) and a two-sided bootstrap p-value;
- :func:`mcnemar_exact` — the exact (binomial) McNemar test on per-problem success (a problem counts as solved by a
  model when at least half its samples succeed; with one sample, that sample);
- :func:`sign_test` — the exact sign test on the per-problem success *rates*: problems where b's rate is higher
  against problems where a's is, ties left out; it uses every sample (a problem one model solves 1 of 4 times and
  the other never counts), where McNemar's majority rule throws those away, and it stays exact when one model
  never succeeds (a percentile bootstrap interval of all-zero rates is the degenerate [0, 0]);
- :func:`min_detectable_difference` — the smallest paired ASR difference a two-sided test at ``alpha`` detects with
  ``power`` at this sample size: ``(z₁₋α/₂ + z_power) · sd(d) / √n`` over the per-problem differences ``d`` (when
  every ``d`` is equal the worst case for success rates, ``sd = √0.5``, is used instead of 0);
- :func:`cohen_kappa`, :func:`fleiss_kappa` — chance-corrected agreement of two raters / a panel;
- :func:`confusion` — rule success against a judge's gate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from shoparena.scoring.metrics import CONFIDENCE, N_RESAMPLES, bootstrap_stats, percentile_interval

__all__ = [
    "Confusion", "McNemar", "PairedDiff", "SignTest", "cohen_kappa", "confusion", "fleiss_kappa", "majority_success",
    "mcnemar_exact", "min_detectable_difference", "paired_bootstrap", "sign_test",
]


@dataclass(frozen=True)
class PairedDiff:
    """``diff`` = mean(b) − mean(a) over problems, its bootstrap ``ci`` and two-sided ``p_value``."""

    diff: float
    ci: tuple[float, float]
    p_value: float
    n_problems: int
    n_resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs: ``b_only`` solved by b not a, ``a_only`` by a not b; exact two-sided ``p_value``."""

    a_only: int
    b_only: int
    both: int
    neither: int
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SignTest:
    """Problems where b's success rate is higher (``b_better``), where a's is (``a_better``), equal (``ties``);
    exact two-sided ``p_value`` over the untied problems."""

    b_better: int
    a_better: int
    ties: int
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Confusion:
    """Rule outcome (rows) × judge gate (columns)."""

    rule_pass_judge_pass: int
    rule_pass_judge_fail: int
    rule_fail_judge_pass: int
    rule_fail_judge_fail: int

    @property
    def agreement(self) -> float:
        n = self.rule_pass_judge_pass + self.rule_pass_judge_fail + self.rule_fail_judge_pass + self.rule_fail_judge_fail
        return (self.rule_pass_judge_pass + self.rule_fail_judge_fail) / n if n else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agreement": self.agreement}


def _pair(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired values need the same problems in the same order ({x.shape} vs {y.shape})")
    if x.size == 0:
        raise ValueError("a paired comparison needs at least one problem")
    return x, y


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, n_resamples: int = N_RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> PairedDiff:
    """Percentile bootstrap of mean(b) − mean(a) over problems (``a[i]``, ``b[i]``: per-problem success rates of
    the same problem), resampled through the one bootstrap (:func:`shoparena.scoring.metrics.bootstrap_stats`).
    The p-value is ``min(1, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)))`` over the resampled differences."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    x, y = _pair(a, b)
    d = y - x
    stats = bootstrap_stats(d, n_resamples=n_resamples, seed=seed)
    lo, hi = percentile_interval(stats, confidence)
    p = min(1.0, 2 * min(float(np.mean(stats <= 0)), float(np.mean(stats >= 0))))
    return PairedDiff(diff=float(d.mean()), ci=(float(lo), float(hi)), p_value=p, n_problems=int(d.size),
                      n_resamples=n_resamples, seed=seed)


def majority_success(rates: Sequence[float]) -> list[bool]:
    """Per-problem success for McNemar: solved when at least half the samples succeed."""
    return [r >= 0.5 for r in rates]


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact McNemar test: under H0 the discordant pairs split Binomial(n_discordant, ½); two-sided p =
    ``min(1, 2·P(X ≤ min(a_only, b_only)))``, 1 when there is no discordant pair."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need the same problems ({len(a)} vs {len(b)})")
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    p = _binomial_two_sided(min(a_only, b_only), a_only + b_only)
    return McNemar(a_only=a_only, b_only=b_only, both=both, neither=len(a) - a_only - b_only - both, p_value=p)


def _binomial_two_sided(k: int, n: int) -> float:
    """``min(1, 2·P(X ≤ k))`` for X ~ Binomial(n, ½) (k the smaller count); 1 when ``n`` is 0."""
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def sign_test(a: Sequence[float], b: Sequence[float]) -> SignTest:
    """Exact sign test on paired per-problem success rates (``a[i]``, ``b[i]``: the same problem): under H0 the
    untied problems split Binomial(n_untied, ½)."""
    x, y = _pair(a, b)
    b_better, a_better = int(np.sum(y > x)), int(np.sum(x > y))
    return SignTest(b_better=b_better, a_better=a_better, ties=int(x.size) - b_better - a_better,
                    p_value=_binomial_two_sided(min(a_better, b_better), a_better + b_better))


def min_detectable_difference(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05,
                              power: float = 0.8) -> float:
    """The paired ASR difference detectable at this sample size (see the module docstring)."""
    x, y = _pair(a, b)
    d = y - x
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    if sd == 0.0:
        sd = math.sqrt(0.5)
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / math.sqrt(d.size)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's κ of two raters over the same items: (p_o − p_e) / (1 − p_e); 1.0 when both always give one and
    the same label (p_e = 1)."""
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa needs two equally long, non-empty label lists")
    n = len(a)
    p_o = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if p_e == 1.0:
        return 1.0
    return (p_o - p_e) / (1 - p_e)


def fleiss_kappa(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' κ of a panel: ``ratings[i]`` are the labels the raters gave item ``i`` (the same number of raters
    per item, at least two). 1.0 when every rating is one and the same label."""
    if not ratings:
        raise ValueError("fleiss_kappa needs at least one item")
    m = len(ratings[0])
    if m < 2 or any(len(r) != m for r in ratings):
        raise ValueError("fleiss_kappa needs the same number (≥ 2) of ratings per item")
    labels = sorted({x for r in ratings for x in r}, key=repr)
    counts = np.array([[Counter(r)[k] for k in labels] for r in ratings], dtype=np.float64)
    n = counts.shape[0]
    p_j = counts.sum(axis=0) / (n * m)
    p_i = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j * p_j).sum())
    if p_e == 1.0:
        return 1.0
    return (p_bar - p_e) / (1 - p_e)


def confusion(rule: Sequence[bool], judge: Sequence[bool]) -> Confusion:
    """Counts of rule success × judge gate over the same trajectories."""
    if len(rule) != len(judge):
        raise ValueError("confusion needs one judge verdict per rule outcome")
    c = Counter(zip((bool(x) for x in rule), (bool(y) for y in judge), strict=True))
    return Confusion(rule_pass_judge_pass=c[(True, True)], rule_pass_judge_fail=c[(True, False)],
                     rule_fail_judge_pass=c[(False, True)], rule_fail_judge_fail=c[(False, False)])
