"""Sample-based metrics: unbiased pass@k, pass^k, and the package's one seeded percentile bootstrap.

For a problem with ``n`` samples of which ``c`` succeed:

- pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the probability that at
  least one of ``k`` samples drawn without replacement succeeds, ``1 − C(n−c, k) / C(n, k)``;
- pass^k (Yao et al. 2024, τ-bench): the probability that all ``k`` drawn samples succeed,
  ``C(c, k) / C(n, k)``.

Both are computed per problem, then averaged over problems. They need ``n ≥ k``. Computed with exact
integer binomials (``math.comb``), so small cases are exact.

Every interval of the package is a percentile bootstrap over problems drawn here (:func:`bootstrap_resamples`,
:data:`N_RESAMPLES` by default): of a mean (:func:`bootstrap_ci`), of a ratio of sums (:func:`ratio_bootstrap_ci`,
the per-axis rates), of a success rate from its counts (:func:`binary_bootstrap_ci`, the web leaderboard); the
paired difference of two models (:func:`shoparena.evaluate.stats.paired_bootstrap`) resamples through
:func:`bootstrap_stats`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from math import comb

import numpy as np


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 ≤ c ≤ n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 ≤ k ≤ n, got n={n}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n−c, k)/C(n, k): at least one of k samples (without replacement) succeeds."""
    _check(n, c, k)
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k)/C(n, k): all k samples (without replacement) succeed."""
    _check(n, c, k)
    return float(Fraction(comb(c, k), comb(n, k)))


def strict_pass(n: int, c: int, k: int, *, hat: bool = False) -> float:
    """pass@k (``hat``: pass^k) of one problem under the strict denominator: a problem with fewer than ``k``
    scored samples has its missing samples counted as failures (``n`` < ``k`` → computed over ``k`` samples with
    the same ``c`` successes); a problem without any scored sample is 0."""
    fn = pass_hat_k if hat else pass_at_k
    if n >= k:
        return fn(n, c, k)
    return fn(k, c, k) if n else 0.0


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems given ``(n, c)`` per problem."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    return sum(values) / len(values) if values else 0.0


def mean_pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass^k over problems given ``(n, c)`` per problem."""
    values = [pass_hat_k(n, c, k) for n, c in counts]
    return sum(values) / len(values) if values else 0.0


def default_ks(max_n: int) -> list[int]:
    """1 and the powers of two up to ``max_n`` (1, 2, 4, 8, …)."""
    ks, k = [], 1
    while k <= max_n:
        ks.append(k)
        k *= 2
    return ks


N_RESAMPLES = 10000
"""The one default number of bootstrap resamples (every interval of the package, unless a caller asks for
another): at 10 000 the percentile interval's Monte-Carlo error is well below the figures' third decimal."""

CONFIDENCE = 0.95


def percentile_interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    """The (α/2, 1−α/2) quantiles (linear interpolation; NaN resamples left out) of resampled statistics."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    alpha = 1 - confidence
    lo, hi = np.nanquantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_resamples(n: int, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """The ``(n_resamples, n)`` indices of a percentile bootstrap over ``n`` problems: problems drawn with
    replacement from ``numpy.random.default_rng(seed)``. Every interval below resamples through this one draw, so
    the same seed and sizes resample the same problems whatever the statistic."""
    if n < 1:
        raise ValueError("a bootstrap needs at least one value")
    if n_resamples < 1:
        raise ValueError("n_resamples must be ≥ 1")
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def bootstrap_stats(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> np.ndarray:
    """The resampled statistic (default: the mean) of per-problem ``values``, one per resample
    (:func:`bootstrap_resamples`); ``statistic`` maps an ``(n_resamples, n)`` array to ``(n_resamples,)``."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    samples = arr[bootstrap_resamples(arr.size, n_resamples=n_resamples, seed=seed)]
    return samples.mean(axis=1) if statistic is None else np.asarray(statistic(samples))


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` (default: the mean) over per-problem ``values``.

    Resamples problems with replacement ``n_resamples`` times from ``numpy.random.default_rng(seed)``; the
    interval is the (α/2, 1−α/2) quantiles (linear interpolation) of the resampled statistic, α = 1 −
    confidence. Deterministic for a given seed. ``statistic`` maps an ``(n_resamples, n)`` array to
    ``(n_resamples,)``.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    return percentile_interval(bootstrap_stats(values, statistic=statistic, n_resamples=n_resamples, seed=seed), confidence)


def ratio_bootstrap_ci(
    hits: Sequence[float],
    totals: Sequence[float],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the ratio of sums Σ hits / Σ totals over problems (``hits[i]``,
    ``totals[i]``: problem ``i``'s), problems resampled together; resamples whose totals sum to 0 are left out."""
    h, t = np.asarray(hits, dtype=np.float64), np.asarray(totals, dtype=np.float64)
    if h.shape != t.shape or h.ndim != 1 or h.size == 0:
        raise ValueError("ratio_bootstrap_ci needs as many hits as totals, at least one")
    idx = bootstrap_resamples(h.size, n_resamples=n_resamples, seed=seed)
    th = t[idx].sum(axis=1)
    ratio = np.where(th > 0, h[idx].sum(axis=1) / np.where(th > 0, th, 1), np.nan)
    return percentile_interval(ratio, confidence)


def binary_bootstrap_ci(
    k: int,
    n: int,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a success rate ``k / n`` of ``n`` 0/1 outcomes; ``None`` when ``n`` is 0.

    Resampling ``n`` 0/1 outcomes with ``k`` successes with replacement gives ``Binomial(n, k/n) / n`` exactly,
    so the resampled means are drawn that way: the same distribution as :func:`bootstrap_ci` over the outcomes, in
    O(resamples) instead of O(resamples × n) (for a leaderboard recomputed per request)."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    means = np.random.default_rng(seed).binomial(n, k / n, size=n_resamples) / n
    return percentile_interval(means, confidence)
