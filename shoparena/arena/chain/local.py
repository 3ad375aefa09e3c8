"""``LocalChain``: an in-process subnet with Bittensor's registration, staking, weight and epoch rules
(docs/arena.md §10.2–10.3), so a simulated SN15 runs without a node.

- Registration: uids 0…n−1 in order; when ``max_allowed_uids`` are taken, the new hotkey replaces the uid with
  the lowest last-epoch emission, ties to the older registration, then the lower uid; uids younger than
  ``immunity_period`` blocks are protected, and uid 0 (the subnet owner, the burn target) is never pruned. A new
  occupant starts clean: no stake, no weights or bonds from or to that uid.
- Validator permits: the ``max_allowed_validators`` hotkeys with the most stake above ``min_permit_stake`` (ties
  to the lower uid), recomputed on every stake or membership change (subtensor recomputes them each epoch).
- ``set_weights``: registered, permit held, ``weights_rate_limit`` blocks since the hotkey's previous weights
  (the first call is free), at least ``min(min_allowed_weights, n)`` uids, no duplicate or unknown uids, no
  share above ``max_weight_limit``/65535, not all zero; the row is stored normalised, self-weight dropped.
- Epochs: every ``tempo`` blocks (``block % tempo == 0``) in ``advance_blocks``, or on demand with
  ``run_epoch``; each emits ``emission_per_block × tempo`` through :mod:`.yuma`.

The chain has no randomness: the same calls give the same metagraphs. ``seed`` only names the chain: it fixes
the genesis hash and so every ``block_hash`` (the races' commit-reveal beacon), which is deterministic per seed —
fine for replayable simulations, predictable and so not a real beacon.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np

from shoparena.arena.chain.types import (
    U16_MAX,
    ChainError,
    EpochResult,
    Hyperparameters,
    Metagraph,
    WeightResult,
    frozen_array,
)
from shoparena.arena.chain.yuma import split_emission, yuma_epoch

__all__ = ["LocalChain"]


class LocalChain:
    """A single subnet held in memory (thread-safe)."""

    def __init__(self, hparams: Hyperparameters | None = None, seed: int = 0) -> None:
        self.hparams = hparams or Hyperparameters()
        self.seed = seed
        self.genesis_hash = hashlib.blake2b(f"shoparena-localchain:{seed}".encode(), digest_size=16).hexdigest()
        cap = self.hparams.max_allowed_uids
        self._lock = threading.RLock()
        self._block = 0
        self._epoch = 0
        self._hotkeys: list[str] = []
        self._coldkeys: list[str] = []
        self._uid: dict[str, int] = {}
        self._stake = np.zeros(cap)
        self._permit = np.zeros(cap, dtype=bool)
        self._registered_at = np.zeros(cap, dtype=np.int64)
        self._last_update = np.zeros(cap, dtype=np.int64)
        self._last_weights = np.full(cap, -1, dtype=np.int64)
        self._weights = np.zeros((cap, cap))
        self._bonds = np.zeros((cap, cap))
        self._vec = {k: np.zeros(cap) for k in
                     ("incentive", "dividends", "emission", "consensus", "trust", "validator_trust")}
        self.total_emission = np.zeros(cap)
        """Cumulative emission per uid slot since the slot's current registration."""
        self.owner_emission_total = 0.0
        self._snapshot: Metagraph | None = None
        self.last_epoch: EpochResult | None = None

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def block(self) -> int:
        return self._block

    @property
    def n(self) -> int:
        return len(self._hotkeys)

    def _changed(self) -> None:
        self._snapshot = None

    def _recompute_permits(self) -> None:
        n, k = self.n, self.hparams.max_allowed_validators
        self._permit[:] = False
        stake = self._stake[:n]
        eligible = np.flatnonzero(stake > self.hparams.min_permit_stake)
        ranked = sorted(eligible.tolist(), key=lambda uid: (-stake[uid], uid))
        self._permit[ranked[:k]] = True

    # -- registration and stake ----------------------------------------------------------------------------
    def _prune_candidate(self) -> int:
        n, immunity = self.n, self.hparams.immunity_period
        candidates = [
            uid for uid in range(1, n) if self._block - int(self._registered_at[uid]) >= immunity
        ]
        if not candidates:
            raise ChainError(
                f"subnet full ({n} uids) and every uid is immune",
                hint=f"wait until registrations are {immunity} blocks old or raise max_allowed_uids",
            )
        emission = self._vec["emission"]
        return min(candidates, key=lambda uid: (emission[uid], int(self._registered_at[uid]), uid))

    def register(self, hotkey_ss58: str, coldkey_ss58: str) -> int:
        """The hotkey's uid: its existing one, a new one, or a pruned one when the subnet is full."""
        with self._lock:
            uid = self._uid.get(hotkey_ss58)
            if uid is not None:
                if self._coldkeys[uid] != coldkey_ss58:
                    raise ChainError(f"hotkey {hotkey_ss58} is registered under another coldkey")
                return uid
            if self.n < self.hparams.max_allowed_uids:
                uid = self.n
                self._hotkeys.append(hotkey_ss58)
                self._coldkeys.append(coldkey_ss58)
            else:
                uid = self._prune_candidate()
                del self._uid[self._hotkeys[uid]]
                self._hotkeys[uid] = hotkey_ss58
                self._coldkeys[uid] = coldkey_ss58
            self._uid[hotkey_ss58] = uid
            self._reset_slot(uid)
            self._recompute_permits()
            self._changed()
            return uid

    def _reset_slot(self, uid: int) -> None:
        self._stake[uid] = 0.0
        self._registered_at[uid] = self._block
        self._last_update[uid] = self._block
        self._last_weights[uid] = -1
        for m in (self._weights, self._bonds):
            m[uid, :] = 0.0
            m[:, uid] = 0.0
        for v in self._vec.values():
            v[uid] = 0.0
        self.total_emission[uid] = 0.0

    def add_stake(self, hotkey_ss58: str, amount: float) -> None:
        """Stake ``amount`` (> 0) on a registered hotkey."""
        if not amount > 0:
            raise ChainError(f"stake amount must be positive, got {amount}")
        with self._lock:
            self._stake[self._require_uid(hotkey_ss58)] += float(amount)
            self._recompute_permits()
            self._changed()

    def _require_uid(self, hotkey_ss58: str) -> int:
        uid = self._uid.get(hotkey_ss58)
        if uid is None:
            raise ChainError(f"hotkey {hotkey_ss58} is not registered")
        return uid

    def uid_of(self, hotkey_ss58: str) -> int | None:
        return self._uid.get(hotkey_ss58)

    # -- weights ------------------------------------------------------------------------------------------
    def set_weights(self, hotkey_ss58: str, uids: Sequence[int], weights_u16: Sequence[int]) -> WeightResult:
        """Store a validator's weight row if the chain's rules allow it (see the module docstring)."""
        hp = self.hparams
        with self._lock:
            uid = self._uid.get(hotkey_ss58)
            refuse = self._weights_refusal(uid, list(uids), list(weights_u16))
            if refuse:
                return WeightResult(ok=False, reason=refuse, block=self._block)
            assert uid is not None
            row = np.zeros(hp.max_allowed_uids)
            for u, w in zip(uids, weights_u16, strict=True):
                if int(u) != uid:
                    row[int(u)] = float(w)
            total = row.sum()
            self._weights[uid] = row / total if total > 0 else row
            self._last_update[uid] = self._block
            self._last_weights[uid] = self._block
            self._changed()
            return WeightResult(ok=True, block=self._block)

    def _weights_refusal(self, uid: int | None, uids: list[int], weights: list[int]) -> str:
        hp, n = self.hparams, self.n
        if uid is None:
            return "hotkey not registered"
        if not self._permit[uid]:
            return "no validator permit"
        last = int(self._last_weights[uid])
        if last >= 0 and self._block - last < hp.weights_rate_limit:
            return f"rate limited: {self._block - last} < {hp.weights_rate_limit} blocks since last weights"
        if len(uids) != len(weights):
            return "uids and weights differ in length"
        if len(set(uids)) != len(uids):
            return "duplicate uids"
        if any(not 0 <= int(u) < n for u in uids):
            return f"uid out of range 0..{n - 1}"
        if any(not 0 <= int(w) <= U16_MAX for w in weights):
            return "weights must be u16 (0..65535)"
        if len(uids) < min(hp.min_allowed_weights, n):
            return f"too few weights: {len(uids)} < min_allowed_weights {hp.min_allowed_weights}"
        total = sum(int(w) for w in weights)
        if total == 0:
            return "weights sum to zero"
        if hp.max_weight_limit < U16_MAX and max(int(w) for w in weights) * U16_MAX > hp.max_weight_limit * total:
            return f"a weight exceeds max_weight_limit {hp.max_weight_limit}/65535 of the total"
        return ""

    # -- time and epochs ------------------------------------------------------------------------------------
    def advance_blocks(self, n: int) -> list[EpochResult]:
        """Move ``n`` blocks forward; run an epoch at every block divisible by ``tempo``."""
        if n < 0:
            raise ChainError("blocks do not go backwards")
        tempo, results = self.hparams.tempo, []
        with self._lock:
            end = self._block + n
            next_epoch = (self._block // tempo + 1) * tempo
            while next_epoch <= end:
                self._block = next_epoch
                results.append(self.run_epoch())
                next_epoch += tempo
            self._block = end
            self._changed()
        return results

    def run_epoch(self) -> EpochResult:
        """Run Yuma consensus now and pay out one epoch's emission."""
        hp = self.hparams
        with self._lock:
            n = self.n
            active = (self._block - self._last_update[:n]) <= hp.activity_cutoff
            stake = self._stake[:n] * self._permit[:n] * active
            weights = self._weights[:n, :n] * self._permit[:n, None]
            np.fill_diagonal(weights, 0.0)
            out = yuma_epoch(stake, weights, self._bonds[:n, :n],
                             kappa=hp.kappa, alpha=hp.bonds_alpha, beta=hp.bonds_penalty)
            split = split_emission(out.incentive, out.dividends, stake,
                                   total=hp.epoch_emission, owner_cut=hp.owner_cut)
            self._bonds[:n, :n] = out.bonds
            for name in ("incentive", "dividends", "consensus", "trust", "validator_trust"):
                self._vec[name][:n] = getattr(out, name)
            self._vec["emission"][:n] = split.per_uid
            self.total_emission[:n] += split.per_uid
            self.owner_emission_total += split.owner
            self._epoch += 1
            s_norm = stake / stake.sum() if stake.sum() > 0 else np.zeros(n)
            result = EpochResult(
                epoch=self._epoch, block=self._block, hotkeys=tuple(self._hotkeys),
                stake=frozen_array(s_norm, np.float64),
                consensus=frozen_array(out.consensus, np.float64),
                incentive=frozen_array(out.incentive, np.float64),
                dividends=frozen_array(out.dividends, np.float64),
                trust=frozen_array(out.trust, np.float64),
                validator_trust=frozen_array(out.validator_trust, np.float64),
                bonds=frozen_array(out.bonds, np.float64),
                emission=frozen_array(split.per_uid, np.float64),
                owner_emission=split.owner, miner_emission=split.miners,
                validator_emission=split.validators, unemitted=split.unemitted,
            )
            self.last_epoch = result
            self._changed()
            return result

    def block_hash(self, block: int) -> str:
        """The hash of a past or current block: ``0x`` + BLAKE2b-256(genesis hash, block number)."""
        if not 0 <= block <= self._block:
            raise ChainError(f"block {block} is not on this chain yet (head is {self._block})")
        return "0x" + hashlib.blake2b(f"{self.genesis_hash}:{block}".encode(), digest_size=32).hexdigest()

    # -- reading ------------------------------------------------------------------------------------------
    def metagraph(self) -> Metagraph:
        """An immutable snapshot (cached until the next change)."""
        with self._lock:
            if self._snapshot is None:
                n = self.n
                self._snapshot = Metagraph.build(
                    block=self._block, hotkeys=self._hotkeys, coldkeys=self._coldkeys,
                    stake=self._stake[:n], validator_permit=self._permit[:n],
                    last_update=self._last_update[:n], registered_at_block=self._registered_at[:n],
                    weights=self._weights[:n, :n], bonds=self._bonds[:n, :n],
                    **{k: v[:n] for k, v in self._vec.items()},
                )
            return self._snapshot
