"""Yuma consensus for one epoch, as pure numpy (docs/arena.md §10.3).

Notation: n uids; ``S`` the normalised stake of active, permitted validators (zero elsewhere); ``W`` the n×n
row-normalised weights (row i = what validator i set); ``B`` the previous bonds.

1. κ-clipping. For each miner j the clip level ``C_j`` is the largest w such that the validators with
   ``W_ij ≥ w`` hold at least κ of the stake; ``W̄_ij = min(W_ij, C_j)``. A minority that overweights j is cut to
   what the κ-majority gave; a weight only a minority gives goes to 0.
2. Ranks ``R_j = Σ_i S_i·W̄_ij``; incentive ``M = R / ΣR``. Trust ``T_j = R_j / P_j`` with ``P_j = Σ_i S_i·W_ij``
   (the share of j's pre-clip support that survived); validator trust ``Tv_i = Σ_j W̄_ij``.
3. Bonds. ``W̃ = (1−β)·W + β·W̄``; ``ΔB_ij = S_i·W̃_ij / Σ_k S_k·W̃_kj`` (0 for a column nobody supports);
   ``B ← α·ΔB + (1−α)·B``.
4. Dividends ``V_i = Σ_j B_ij·M_j``, normalised to sum 1.
5. Emission: ``owner_cut`` to the owner; the rest half to miners by M and half to validators by V. When no miner
   earned anything (ΣM = 0) both halves go to validators by stake S (subtensor's rule when no weights are set);
   with no validator stake at all they are not emitted.

Every function is deterministic (stable sorts, no randomness) and allocates O(n²); n = 256 takes about a
millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EmissionSplit", "YumaOutput", "clip_levels", "normalise_rows", "split_emission", "yuma_epoch"]

_EPS = 1e-12


def _normalise(v: np.ndarray) -> np.ndarray:
    total = float(v.sum())
    return v / total if total > 0 else np.zeros_like(v, dtype=np.float64)


def normalise_rows(w: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (rows summing to 0 stay 0)."""
    w = np.asarray(w, dtype=np.float64)
    sums = w.sum(axis=1, keepdims=True)
    return np.divide(w, sums, out=np.zeros_like(w), where=sums > 0)


def clip_levels(weights: np.ndarray, stake: np.ndarray, kappa: float) -> np.ndarray:
    """Per column j, the largest w such that validators with ``W_ij ≥ w`` hold ≥ κ of the (normalised) stake.

    0 for a column when no level reaches κ (e.g. there is no stake at all)."""
    w = np.asarray(weights, dtype=np.float64)
    s = np.asarray(stake, dtype=np.float64)
    staked = s > 0  # rows without stake never move the cumulative sum: leave them out (64 of 256 rows)
    w, s = w[staked], s[staked]
    n_rows, n_cols = w.shape
    if n_rows == 0 or n_cols == 0:
        return np.zeros(n_cols)
    order = np.argsort(-w, axis=0, kind="stable")  # each column, largest weight first
    sorted_w = np.take_along_axis(w, order, axis=0)
    cum = np.cumsum(s[order], axis=0)
    reached = cum >= kappa - _EPS
    first = np.argmax(reached, axis=0)  # first row (in descending weight order) reaching κ
    levels = sorted_w[first, np.arange(n_cols)]
    return np.where(reached.any(axis=0), levels, 0.0)


@dataclass(frozen=True)
class YumaOutput:
    """The vectors of one epoch (n-length arrays, ``bonds`` n×n)."""

    consensus: np.ndarray
    incentive: np.ndarray
    dividends: np.ndarray
    trust: np.ndarray
    validator_trust: np.ndarray
    bonds: np.ndarray


def yuma_epoch(
    stake: np.ndarray,
    weights: np.ndarray,
    bonds: np.ndarray,
    *,
    kappa: float,
    alpha: float,
    beta: float = 0.0,
) -> YumaOutput:
    """Steps 1–4 above. ``stake`` is S (normalised here again for safety); ``weights`` rows are normalised here;
    rows of uids without stake contribute nothing."""
    s = _normalise(np.asarray(stake, dtype=np.float64))
    w = normalise_rows(weights)
    b_prev = np.asarray(bonds, dtype=np.float64)

    consensus = clip_levels(w, s, kappa)
    clipped = np.minimum(w, consensus[None, :])

    pre_rank = s @ w
    rank = s @ clipped
    incentive = _normalise(rank)
    trust = np.divide(rank, pre_rank, out=np.zeros_like(rank), where=pre_rank > _EPS)
    validator_trust = clipped.sum(axis=1) * (s > 0)

    bond_w = (1.0 - beta) * w + beta * clipped
    support = s[:, None] * bond_w
    col = support.sum(axis=0, keepdims=True)
    delta = np.divide(support, col, out=np.zeros_like(support), where=col > _EPS)
    new_bonds = alpha * delta + (1.0 - alpha) * b_prev

    dividends = _normalise(new_bonds @ incentive)
    return YumaOutput(
        consensus=consensus,
        incentive=incentive,
        dividends=dividends,
        trust=trust,
        validator_trust=validator_trust,
        bonds=new_bonds,
    )


@dataclass(frozen=True)
class EmissionSplit:
    """Where one epoch's emission went: per uid, plus the owner's cut and anything not emitted."""

    per_uid: np.ndarray
    owner: float
    miners: float
    validators: float
    unemitted: float


def split_emission(
    incentive: np.ndarray, dividends: np.ndarray, stake: np.ndarray, *, total: float, owner_cut: float
) -> EmissionSplit:
    """Step 5: ``owner_cut`` to the owner, the rest half by incentive and half by dividends (see the module
    docstring for the no-incentive fallback)."""
    m = _normalise(np.asarray(incentive, dtype=np.float64))
    v = _normalise(np.asarray(dividends, dtype=np.float64))
    s = _normalise(np.asarray(stake, dtype=np.float64))
    owner = total * owner_cut
    half = (total - owner) / 2.0
    if m.sum() > 0:
        miners, validators = half * m, half * v
        return EmissionSplit(miners + validators, owner, float(miners.sum()), float(validators.sum()), 0.0)
    if s.sum() > 0:
        return EmissionSplit(2 * half * s, owner, 0.0, 2 * half, 0.0)
    return EmissionSplit(np.zeros_like(m), owner, 0.0, 0.0, 2 * half)
