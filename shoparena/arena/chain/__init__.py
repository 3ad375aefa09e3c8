"""The chain behind the arena (docs/arena.md §10, §14.1): one :class:`Chain` interface, a :class:`LocalChain` with
Yuma consensus for simulations, and a :class:`SubtensorChain` adapter over the optional ``bittensor`` SDK."""

from shoparena.arena.chain.local import LocalChain
from shoparena.arena.chain.subtensor import SubtensorChain
from shoparena.arena.chain.types import (
    Chain,
    ChainError,
    EpochResult,
    Hyperparameters,
    Metagraph,
    WeightResult,
)

__all__ = [
    "Chain",
    "ChainError",
    "EpochResult",
    "Hyperparameters",
    "LocalChain",
    "Metagraph",
    "SubtensorChain",
    "WeightResult",
]
