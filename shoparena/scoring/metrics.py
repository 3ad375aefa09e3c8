"""Sample-based metrics: unbiased pass@k, pass^k, and seeded percentile bootstrap intervals.

For a problem with ``n`` samples of which ``c`` succeed:

- pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the probability that at
  least one of ``k`` samples drawn without replacement succeeds, ``1 − C(n−c, k) / C(n, k)``;
- pass^k (Yao et al. 2024, τ-bench): the probability that all ``k`` drawn samples succeed,
  ``C(c, k) / C(n, k)``.

Both are computed per problem, then averaged over problems. They need ``n ≥ k``. Computed with exact
integer binomials (``math.comb``), so small cases are exact.
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


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
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
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    samples = arr[idx]
    stats = samples.mean(axis=1) if statistic is None else np.asarray(statistic(samples))
    alpha = 1 - confidence
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)
