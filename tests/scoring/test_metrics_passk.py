"""pass@k, pass^k and bootstrap intervals (scoring/metrics.py): exact small-sample values."""

from __future__ import annotations

import pytest

from shoparena.scoring.metrics import (
    bootstrap_ci,
    default_ks,
    mean_pass_at_k,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
    strict_pass,
)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 2, 1, 1 - 3 / 5),      # 1 − C(3,1)/C(5,1)
    (5, 2, 2, 1 - 3 / 10),     # 1 − C(3,2)/C(5,2)
    (5, 2, 3, 1 - 1 / 10),     # 1 − C(3,3)/C(5,3)
    (5, 2, 4, 1.0),            # C(3,4) = 0
    (4, 0, 2, 0.0),
    (4, 4, 2, 1.0),
    (10, 1, 5, 1 - 126 / 252),  # 1 − C(9,5)/C(10,5) = 0.5
])
def test_pass_at_k_chen_exact(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 2, 1, 2 / 5),
    (5, 2, 2, 1 / 10),   # C(2,2)/C(5,2)
    (5, 3, 2, 3 / 10),   # C(3,2)/C(5,2)
    (5, 2, 3, 0.0),
    (4, 4, 4, 1.0),
])
def test_pass_hat_k_tau_bench_exact(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def test_pass_one_equals_success_fraction() -> None:
    for n in range(1, 6):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n) == pass_hat_k(n, c, 1)


def test_means_are_per_problem_then_averaged() -> None:
    assert mean_pass_at_k([(5, 2), (4, 4)], 2) == pytest.approx((0.7 + 1.0) / 2)
    assert mean_pass_hat_k([(5, 2), (4, 4)], 2) == pytest.approx((0.1 + 1.0) / 2)
    assert mean_pass_at_k([], 1) == 0.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 4), (3, 1, 0)])
def test_invalid_counts_raise(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_default_ks_powers_of_two() -> None:
    assert default_ks(0) == []
    assert default_ks(1) == [1]
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(10) == [1, 2, 4, 8]


def test_bootstrap_constant_values_degenerate_interval() -> None:
    assert bootstrap_ci([0.25] * 7) == (0.25, 0.25)


def test_bootstrap_seeded_deterministic_and_brackets_mean() -> None:
    values = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1]
    lo, hi = bootstrap_ci(values, seed=3)
    assert (lo, hi) == bootstrap_ci(values, seed=3)
    assert 0.0 <= lo <= 0.6 <= hi <= 1.0
    narrow = bootstrap_ci(values, seed=3, confidence=0.5)
    assert lo <= narrow[0] <= narrow[1] <= hi


def test_bootstrap_rejects_empty_and_bad_confidence() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], confidence=1.0)


@pytest.mark.parametrize(("n", "c", "k", "hat", "expected"), [
    (4, 1, 2, False, 1 - 3 / 6),   # enough samples: the unbiased estimate itself
    (1, 1, 2, False, 1.0),         # 1 of 2 samples scored, a success: padded to 2, 1 − C(1,2)/C(2,2) = 1
    (1, 1, 2, True, 0.0),          # pass^2: the missing sample counts as a failure
    (2, 0, 4, False, 0.0),         # padded to 4 with no success
    (2, 1, 3, True, 0.0),          # padded to 3 with 1 success: C(1,3)/C(3,3) = 0
    (3, 2, 4, True, 0.0),          # C(2,4) = 0
    (0, 0, 3, False, 0.0),         # no scored sample
])
def test_strict_pass_counts_missing_samples_as_failures(n: int, c: int, k: int, hat: bool, expected: float) -> None:
    assert strict_pass(n, c, k, hat=hat) == pytest.approx(expected, abs=1e-15)


def test_one_bootstrap_behind_every_interval() -> None:
    """The paired difference, the ratio of sums and the mean resample the same problems for the same seed."""
    import numpy as np

    from shoparena.evaluate.stats import paired_bootstrap
    from shoparena.scoring.metrics import (
        N_RESAMPLES,
        bootstrap_resamples,
        bootstrap_stats,
        ratio_bootstrap_ci,
    )

    a, b = [0.0, 0.5, 1.0, 0.0, 0.25], [1.0, 0.5, 1.0, 0.75, 0.0]
    diff = paired_bootstrap(a, b, seed=4)
    d = np.subtract(b, a)
    assert diff.n_resamples == N_RESAMPLES
    assert diff.ci == bootstrap_ci(d, seed=4)
    assert diff.ci == bootstrap_ci(d, seed=4, n_resamples=N_RESAMPLES)
    # a ratio with equal totals is the mean of the per-problem rates, resample by resample
    assert ratio_bootstrap_ci([1, 0, 2, 1], [2, 2, 2, 2], seed=1) == pytest.approx(
        bootstrap_ci([0.5, 0.0, 1.0, 0.5], seed=1))
    idx = bootstrap_resamples(3, n_resamples=5, seed=2)
    assert idx.shape == (5, 3) and (bootstrap_stats([0, 1, 2], n_resamples=5, seed=2) == idx.mean(axis=1)).all()


def test_ratio_bootstrap_leaves_out_empty_resamples() -> None:
    from shoparena.scoring.metrics import ratio_bootstrap_ci

    lo, hi = ratio_bootstrap_ci([3, 0], [4, 0], seed=0)  # resamples of only the empty problem have no ratio
    assert (lo, hi) == (0.75, 0.75)
    with pytest.raises(ValueError):
        ratio_bootstrap_ci([1], [1, 2])


def test_binary_bootstrap_is_the_bootstrap_of_the_outcomes() -> None:
    from shoparena.scoring.metrics import binary_bootstrap_ci

    assert binary_bootstrap_ci(0, 0) is None and binary_bootstrap_ci(4, 4) == (1.0, 1.0)
    lo, hi = binary_bootstrap_ci(30, 100, seed=1)
    blo, bhi = bootstrap_ci([1.0] * 30 + [0.0] * 70, seed=1)
    assert abs(lo - blo) <= 0.02 and abs(hi - bhi) <= 0.02  # the same distribution, drawn another way
    with pytest.raises(ValueError):
        binary_bootstrap_ci(5, 4)
