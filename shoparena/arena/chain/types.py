"""Chain records and the one chain interface (docs/arena.md §10, §14.1).

``Hyperparameters`` and ``WeightResult`` are frozen pydantic models. ``Metagraph`` and ``EpochResult`` carry
vectors and n×n matrices, so they are frozen dataclasses whose numpy arrays are read-only (``to_dict`` gives
JSON-ready lists). Units: stake and emission are in the subnet's token (alpha), weights and bonds are floats in
[0, 1] (rows of ``weights`` sum to 1 or 0), blocks are integers (12 s each by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shoparena.errors import ShopArenaError

__all__ = ["Chain", "ChainError", "EpochResult", "Hyperparameters", "Metagraph", "WeightResult", "frozen_array"]

U16_MAX = 65535


class ChainError(ShopArenaError):
    """A chain operation that cannot be done (subnet full of immune uids, unknown hotkey, no chain SDK)."""

    exit_code = 6


class Hyperparameters(BaseModel):
    """Subnet hyperparameters; defaults are Bittensor's (§10.2) except where noted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    netuid: int = Field(15, ge=0)
    tempo: int = Field(360, ge=1)
    """Blocks between epochs (360 × 12 s = 72 min)."""
    block_time_s: float = Field(12.0, gt=0)
    kappa: float = Field(32767 / 65535, ge=0, le=1)
    """Consensus majority: the clip level keeps ≥ κ of validator stake (u16 32767 ≈ 0.5)."""
    immunity_period: int = Field(5000, ge=0)
    """Blocks after registration during which a uid cannot be pruned."""
    activity_cutoff: int = Field(5000, ge=0)
    """A validator whose last weight update is older than this (blocks) has no stake in consensus."""
    weights_rate_limit: int = Field(100, ge=0)
    """Minimum blocks between two ``set_weights`` of one hotkey."""
    max_allowed_uids: int = Field(256, ge=2)
    max_allowed_validators: int = Field(64, ge=1)
    """Permits go to the top-stake hotkeys (stake > ``min_permit_stake``), ties to the lower uid."""
    min_permit_stake: float = Field(0.0, ge=0)
    """Stake a hotkey must exceed to hold a permit (ours; keeps zero-stake miners from taking empty slots)."""
    min_allowed_weights: int = Field(1, ge=0)
    max_weight_limit: int = Field(U16_MAX, ge=0, le=U16_MAX)
    """Largest share one uid may get, in u16 of the normalised vector (65535 = no limit)."""
    bonds_penalty: float = Field(0.0, ge=0, le=1)
    """β: how much of a bond is built from clipped (consensus) instead of raw weights."""
    bonds_alpha: float = Field(0.1, gt=0, le=1)
    """α of the bond EMA, B ← α·ΔB + (1−α)·B (not public for SN15; 0.1 = subtensor's bonds_moving_average 900000)."""
    emission_per_block: float = Field(1.0, ge=0)
    """Subnet emission per block; an epoch emits ``emission_per_block × tempo``."""
    owner_cut: float = Field(0.18, ge=0, le=1)
    """Subnet owner's share; the rest splits half to miners (incentive), half to validators (dividends)."""

    @property
    def epoch_emission(self) -> float:
        return self.emission_per_block * self.tempo


class WeightResult(BaseModel):
    """The answer to a ``set_weights`` call: accepted, or refused with a reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    reason: str = ""
    block: int | None = None


def frozen_array(values: Any, dtype: Any) -> np.ndarray:
    """A read-only copy of ``values`` as a numpy array."""
    arr = np.array(values, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


class _Arrays:
    """JSON export shared by the array-carrying records."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else list(v) if isinstance(v, tuple) else v
        return out


@dataclass(frozen=True, eq=False)
class Metagraph(_Arrays):
    """A snapshot of the subnet at ``block`` (the SDK's n, uids, hotkeys, coldkeys, S, W, B, I, D, E, C, T, Tv,
    validator_permit, last_update, block; ``registered_at_block`` is ours)."""

    block: int
    hotkeys: tuple[str, ...]
    coldkeys: tuple[str, ...]
    stake: np.ndarray
    validator_permit: np.ndarray
    last_update: np.ndarray
    registered_at_block: np.ndarray
    incentive: np.ndarray
    dividends: np.ndarray
    emission: np.ndarray
    """Emission of the last epoch, per uid."""
    consensus: np.ndarray
    trust: np.ndarray
    validator_trust: np.ndarray
    weights: np.ndarray
    """n×n, row i = validator i's normalised weights."""
    bonds: np.ndarray
    """n×n, row i = validator i's bonds (EMA)."""

    @property
    def n(self) -> int:
        return len(self.hotkeys)

    @property
    def uids(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    @cached_property
    def _uid_by_hotkey(self) -> dict[str, int]:
        return {hk: uid for uid, hk in enumerate(self.hotkeys)}

    def uid_of(self, hotkey_ss58: str) -> int | None:
        """The uid of a registered hotkey, or None."""
        return self._uid_by_hotkey.get(hotkey_ss58)

    def is_validator(self, hotkey_ss58: str, min_stake: float = 0.0) -> bool:
        """Registered, holding a validator permit, and staking at least ``min_stake``."""
        uid = self.uid_of(hotkey_ss58)
        return uid is not None and bool(self.validator_permit[uid]) and float(self.stake[uid]) >= min_stake

    @classmethod
    def build(cls, *, block: int, hotkeys: Sequence[str], coldkeys: Sequence[str], **arrays: Any) -> Metagraph:
        """A metagraph from plain sequences; missing vectors are zeros, missing matrices n×n zeros."""
        n = len(hotkeys)
        vals: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in ("block", "hotkeys", "coldkeys"):
                continue
            shape: tuple[int, ...] = (n, n) if f.name in ("weights", "bonds") else (n,)
            dtype = bool if f.name == "validator_permit" else (
                np.int64 if f.name in ("last_update", "registered_at_block") else np.float64
            )
            raw = arrays.pop(f.name, None)
            arr = np.zeros(shape, dtype=dtype) if raw is None or np.size(raw) == 0 else np.asarray(raw, dtype)
            if arr.shape != shape:
                raise ValueError(f"metagraph field {f.name} has shape {arr.shape}, expected {shape}")
            vals[f.name] = frozen_array(arr, dtype)
        if arrays:
            raise ValueError(f"unknown metagraph fields: {sorted(arrays)}")
        if len(coldkeys) != n:
            raise ValueError("hotkeys and coldkeys differ in length")
        return cls(block=int(block), hotkeys=tuple(hotkeys), coldkeys=tuple(coldkeys), **vals)


@dataclass(frozen=True, eq=False)
class EpochResult(_Arrays):
    """One Yuma epoch (§10.3): the vectors it produced and where the epoch's emission went."""

    epoch: int
    block: int
    hotkeys: tuple[str, ...]
    stake: np.ndarray
    """S: active, permitted validator stake, normalised to sum 1 (all zero when there is none)."""
    consensus: np.ndarray
    """Per-miner clip level (the κ-stake quantile of its column)."""
    incentive: np.ndarray
    dividends: np.ndarray
    trust: np.ndarray
    validator_trust: np.ndarray
    bonds: np.ndarray
    emission: np.ndarray
    """Per-uid emission of this epoch (miner + validator shares)."""
    owner_emission: float
    miner_emission: float
    validator_emission: float
    unemitted: float
    """Emission nobody earned (no validator stake at all)."""


@runtime_checkable
class Chain(Protocol):
    """The chain as the arena sees it (§14.1): ``LocalChain`` for simulations, ``SubtensorChain`` for a real one."""

    @property
    def block(self) -> int: ...

    def block_hash(self, block: int) -> str:
        """``0x``-hex hash of a block at or before the head (the races' commit-reveal beacon)."""
        ...

    def register(self, hotkey_ss58: str, coldkey_ss58: str) -> int:
        """Register a hotkey, answering its uid (pruning the weakest non-immune uid when full)."""
        ...

    def add_stake(self, hotkey_ss58: str, amount: float) -> None: ...

    def metagraph(self) -> Metagraph: ...

    def set_weights(self, hotkey_ss58: str, uids: Sequence[int], weights_u16: Sequence[int]) -> WeightResult: ...

    def advance_blocks(self, n: int) -> list[EpochResult]:
        """Move the chain ``n`` blocks forward, running an epoch every ``tempo`` blocks."""
        ...

    def run_epoch(self) -> EpochResult: ...
