"""The evaluation statistics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from shoparena.evaluate.stats import (
    cohen_kappa,
    confusion,
    fleiss_kappa,
    majority_success,
    mcnemar_exact,
    min_detectable_difference,
    paired_bootstrap,
    sign_test,
)


def test_mcnemar_exact_binomial_tail() -> None:
    # 1 problem only a solves, 6 only b solves, 3 both, 2 neither: p = 2·(C(7,0)+C(7,1))/2^7 = 16/128
    a = [True] + [False] * 6 + [True] * 3 + [False] * 2
    b = [False] + [True] * 6 + [True] * 3 + [False] * 2
    m = mcnemar_exact(a, b)
    assert (m.a_only, m.b_only, m.both, m.neither) == (1, 6, 3, 2)
    assert m.p_value == pytest.approx(0.125)
    assert mcnemar_exact(b, a).p_value == pytest.approx(0.125)  # symmetric


def test_mcnemar_without_discordant_pairs_is_one() -> None:
    assert mcnemar_exact([True, False], [True, False]).p_value == 1.0
    # 0 vs 5 discordant: 2·(1/32) = 0.0625
    assert mcnemar_exact([False] * 5, [True] * 5).p_value == pytest.approx(0.0625)


def test_sign_test_counts_every_sample_where_mcnemar_majority_does_not() -> None:
    # 8 problems b solves 1–2 times in 4 and a never; 61 both fail: McNemar's majority rule sees 0/0 discordant
    # pairs on the 1-in-4 problems, the sign test sees 8 to 0: p = 2·(1/2^8) = 0.0078125
    a = [0.0] * 69
    b = [0.25] * 6 + [0.5] * 2 + [0.0] * 61
    s = sign_test(a, b)
    assert (s.b_better, s.a_better, s.ties) == (8, 0, 61)
    assert s.p_value == pytest.approx(2 / 2 ** 8)
    m = mcnemar_exact(majority_success(a), majority_success(b))
    assert (m.b_only, m.a_only) == (2, 0) and m.p_value == pytest.approx(0.5)
    assert sign_test(b, a).p_value == s.p_value and sign_test(b, a).a_better == 8  # symmetric
    # hand-computed two-sided tail: 1 vs 6 untied → 2·(C(7,0)+C(7,1))/2^7
    assert sign_test([0.5] + [0.0] * 6 + [1.0], [0.0] + [0.75] * 6 + [1.0]).p_value == pytest.approx(0.125)


def test_sign_test_without_untied_problems_is_one() -> None:
    s = sign_test([0.0, 0.5, 1.0], [0.0, 0.5, 1.0])
    assert (s.b_better, s.a_better, s.ties, s.p_value) == (0, 0, 3, 1.0)
    with pytest.raises(ValueError):
        sign_test([0.0], [0.0, 1.0])


def test_majority_success_counts_half_as_solved() -> None:
    assert majority_success([0.0, 0.25, 0.5, 1.0]) == [False, False, True, True]


def test_cohen_kappa_hand_computed() -> None:
    # p_o = 3/4, p_e = (2·1 + 2·3)/16 = 1/2 → κ = 0.5
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa(["x", "y"], ["x", "y"]) == pytest.approx(1.0)
    assert cohen_kappa([1, 1], [1, 1]) == 1.0
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)


def test_fleiss_kappa_worked_example() -> None:
    # The worked example of Fleiss (1971) as tabulated on Wikipedia: 10 items, 14 raters, 5 categories; κ ≈ 0.210.
    table = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
    ratings = [[cat for cat, n in enumerate(row) for _ in range(n)] for row in table]
    assert fleiss_kappa(ratings) == pytest.approx(0.20993, abs=5e-5)
    assert fleiss_kappa([["a", "a"], ["b", "b"]]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fleiss_kappa([["a"], ["b"]])


def test_paired_bootstrap_degenerate_and_two_point() -> None:
    same = paired_bootstrap([0, 0, 0], [1, 1, 1], seed=3)
    assert same.diff == 1.0 and same.ci == (1.0, 1.0) and same.p_value == 0.0
    # d = [1, 0]: resampled means are 0, ½, 1 with probabilities ¼, ½, ¼ → CI (0, 1), p ≈ 2·¼
    two = paired_bootstrap([0, 0], [1, 0], n_resamples=20000, seed=0)
    assert two.diff == 0.5 and two.ci == (0.0, 1.0)
    assert two.p_value == pytest.approx(0.5, abs=0.02)
    assert paired_bootstrap([0, 0], [1, 0], n_resamples=20000, seed=0) == two  # seeded


def test_paired_values_must_line_up() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap([0, 1], [1])
    with pytest.raises(ValueError):
        mcnemar_exact([True], [True, False])


def test_min_detectable_difference_hand_computed() -> None:
    # d = [1, 0, 1, 0]: sd = √(1/3); (1.95996 + 0.84162) · 0.57735 / 2 = 0.80875
    assert min_detectable_difference([0, 0, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.80875, abs=1e-4)
    # all differences equal → the worst-case sd √0.5
    z = 1.959964 + 0.841621
    assert min_detectable_difference([0] * 50, [0] * 50) == pytest.approx(z * math.sqrt(0.5) / math.sqrt(50), 1e-4)


def test_confusion_counts_and_agreement() -> None:
    c = confusion([True, True, False, False, False], [True, False, True, False, False])
    assert (c.rule_pass_judge_pass, c.rule_pass_judge_fail, c.rule_fail_judge_pass, c.rule_fail_judge_fail) == \
        (1, 1, 1, 2)
    assert c.agreement == pytest.approx(0.6)
