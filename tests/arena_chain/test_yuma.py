"""Yuma consensus on small hand-computed cases (docs/arena.md §10.3)."""

from __future__ import annotations

import numpy as np
import pytest

from shoparena.arena.chain.yuma import clip_levels, normalise_rows, split_emission, yuma_epoch


def _case() -> tuple[np.ndarray, np.ndarray]:
    """uid 0 owner; validators 1, 2, 3 with stake 50/30/20; miners 4, 5, 6. Validator 3 is an outlier that puts
    everything on miner 6, which nobody else weights."""
    stake = np.array([0, 50, 30, 20, 0, 0, 0], dtype=float)
    w = np.zeros((7, 7))
    w[1, 4:] = [0.6, 0.4, 0.0]
    w[2, 4:] = [0.5, 0.5, 0.0]
    w[3, 4:] = [0.0, 0.0, 1.0]
    return stake, w


def test_clip_level_is_the_kappa_stake_quantile_of_each_column() -> None:
    s = np.array([0.3, 0.3, 0.4])
    w = np.array([[1.0, 0.2, 0.0], [1.0, 0.4, 0.0], [0.0, 0.1, 0.0]])
    # col 0: weights ≥ 1.0 held by 0.6 ≥ κ → 1.0; col 1: 0.4 (0.3) < κ, ≥ 0.2 (0.6) → 0.2; col 2: nobody → 0.
    assert clip_levels(w, s, 0.5).tolist() == [1.0, 0.2, 0.0]
    # κ = 0.7: col 0 needs the 0.4-stake validator too → its weight 0.0; col 1 → 0.1.
    assert clip_levels(w, s, 0.7).tolist() == [0.0, 0.1, 0.0]


def test_clip_level_at_exactly_kappa_and_without_stake() -> None:
    s = np.array([0.5, 0.5])
    w = np.array([[0.2], [0.4]])
    assert clip_levels(w, s, 0.5).tolist() == [0.4]  # the 0.4-giver alone holds exactly κ
    assert clip_levels(w, np.zeros(2), 0.5).tolist() == [0.0]


def test_hand_computed_epoch() -> None:
    stake, w = _case()
    out = yuma_epoch(stake, w, np.zeros((7, 7)), kappa=0.5, alpha=0.1, beta=0.0)
    # S = [.5, .3, .2]. Clip levels: miner 4 → .6 (validator 1 alone holds .5 ≥ κ), miner 5 → .4, miner 6 → 0.
    assert out.consensus[4:].tolist() == pytest.approx([0.6, 0.4, 0.0])
    # R4 = .5·.6 + .3·.5 = .45, R5 = .5·.4 + .3·.4 = .32, R6 = 0 (the outlier is clipped away).
    assert out.incentive[4:].tolist() == pytest.approx([0.45 / 0.77, 0.32 / 0.77, 0.0])
    assert out.incentive[:4].tolist() == [0.0] * 4
    # Trust R/P: miner 4 keeps all its support (.45/.45), miner 5 .32/.35, miner 6 none (0/.2).
    assert out.trust[4:].tolist() == pytest.approx([1.0, 0.32 / 0.35, 0.0])
    assert out.validator_trust[1:4].tolist() == pytest.approx([1.0, 0.9, 0.0])
    # ΔB columns: miner 4 [.3, .15, 0]/.45, miner 5 [.2, .15, 0]/.35, miner 6 [0, 0, 1]; B = α·ΔB.
    np.testing.assert_allclose(
        out.bonds[1:4, 4:], [[0.1 * 2 / 3, 0.1 * 4 / 7, 0.0], [0.1 / 3, 0.1 * 3 / 7, 0.0], [0.0, 0.0, 0.1]]
    )
    # V ∝ B·M: validator 1 ∝ 2/3·.45 + 4/7·.32, validator 2 ∝ 1/3·.45 + 3/7·.32, the outlier 0.
    v1, v2 = 2 / 3 * 0.45 + 4 / 7 * 0.32, 1 / 3 * 0.45 + 3 / 7 * 0.32
    assert out.dividends.tolist() == pytest.approx([0, v1 / 0.77, v2 / 0.77, 0, 0, 0, 0])


def test_emission_split_41_41_18() -> None:
    stake, w = _case()
    out = yuma_epoch(stake, w, np.zeros((7, 7)), kappa=0.5, alpha=0.1)
    split = split_emission(out.incentive, out.dividends, stake, total=10.0, owner_cut=0.18)
    assert split.owner == pytest.approx(1.8)
    assert split.miners == pytest.approx(4.1) and split.validators == pytest.approx(4.1)
    assert split.per_uid[4:6].tolist() == pytest.approx([4.1 * 0.45 / 0.77, 4.1 * 0.32 / 0.77])
    assert split.per_uid[3] == 0.0 and split.per_uid[6] == 0.0  # outlier validator and its miner earn nothing
    assert split.per_uid.sum() + split.owner == pytest.approx(10.0)


def test_bonds_ema_with_penalty_rewards_early_support() -> None:
    """Validators 0 (stake .6) and 1 (.4); miners 2, 3; β = 1 (bonds from clipped weights), α = .5."""
    stake = np.array([0.6, 0.4, 0.0, 0.0])
    w1 = np.array([[0, 0, 1.0, 0], [0, 0, 0.5, 0.5], [0] * 4, [0] * 4])
    e1 = yuma_epoch(stake, w1, np.zeros((4, 4)), kappa=0.5, alpha=0.5, beta=1.0)
    # Clip: miner 2 → 1.0, miner 3 → 0 (only .4 of stake). M = [1, 0]. ΔB col 2 = [.6, .2]/.8; col 3 = 0.
    assert e1.incentive[2:].tolist() == pytest.approx([1.0, 0.0])
    np.testing.assert_allclose(e1.bonds[:2, 2:], [[0.375, 0.0], [0.125, 0.0]])
    assert e1.dividends[:2].tolist() == pytest.approx([0.75, 0.25])
    # Epoch 2: both now split .5/.5 → M = [.5, .5]; ΔB = [.6, .4] in both columns;
    # B = .5·ΔB + .5·B → col 2 [.4875, .2625], col 3 [.3, .2]; V ∝ [.39375, .23125].
    w2 = np.array([[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0] * 4, [0] * 4])
    e2 = yuma_epoch(stake, w2, e1.bonds, kappa=0.5, alpha=0.5, beta=1.0)
    np.testing.assert_allclose(e2.bonds[:2, 2:], [[0.4875, 0.3], [0.2625, 0.2]])
    assert e2.dividends[:2].tolist() == pytest.approx([0.63, 0.37])  # validator 0 earns above its stake share


def test_without_penalty_bonds_follow_raw_weights() -> None:
    stake = np.array([0.6, 0.4, 0.0, 0.0])
    w1 = np.array([[0, 0, 1.0, 0], [0, 0, 0.5, 0.5], [0] * 4, [0] * 4])
    e = yuma_epoch(stake, w1, np.zeros((4, 4)), kappa=0.5, alpha=0.5, beta=0.0)
    np.testing.assert_allclose(e.bonds[:2, 2:], [[0.375, 0.0], [0.125, 0.5]])
    assert e.dividends[:2].tolist() == pytest.approx([0.75, 0.25])  # the bond on the clipped miner pays nothing


def test_no_weights_pays_validators_by_stake_and_no_stake_pays_nobody() -> None:
    stake = np.array([3.0, 1.0, 0.0])
    out = yuma_epoch(stake, np.zeros((3, 3)), np.zeros((3, 3)), kappa=0.5, alpha=0.1)
    split = split_emission(out.incentive, out.dividends, stake, total=100.0, owner_cut=0.18)
    assert split.per_uid.tolist() == pytest.approx([61.5, 20.5, 0.0]) and split.unemitted == 0.0
    none = split_emission(np.zeros(3), np.zeros(3), np.zeros(3), total=100.0, owner_cut=0.18)
    assert none.per_uid.tolist() == [0.0, 0.0, 0.0] and none.unemitted == pytest.approx(82.0)


def test_normalise_rows_leaves_empty_rows_empty() -> None:
    assert normalise_rows(np.array([[1.0, 3.0], [0.0, 0.0]])).tolist() == [[0.25, 0.75], [0.0, 0.0]]
