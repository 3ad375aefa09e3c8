"""``SubtensorChain``: the :class:`~shoparena.arena.chain.types.Chain` interface over the ``bittensor`` SDK
(optional extra ``shoparena[chain]``; ORO pins ``bittensor==10.1.0``).

A thin mapping, nothing more:

| ours | SDK |
|---|---|
| ``SubtensorChain(network, netuid, wallet)`` | ``bittensor.Subtensor(network=network)`` |
| ``block`` | ``subtensor.get_current_block()`` |
| ``block_hash(block)`` | ``subtensor.get_block_hash(block)`` |
| ``metagraph()`` | ``subtensor.metagraph(netuid=netuid, lite=lite)`` → our :class:`Metagraph` (S, W, B, I, D, E, …) |
| ``set_weights(hotkey, uids, w)`` | ``subtensor.set_weights(wallet=, netuid=, uids=, weights=, version_key=, wait_for_inclusion=, wait_for_finalization=)`` |
| ``register(hotkey, coldkey)`` | ``subtensor.burned_register(wallet=, netuid=)`` then ``get_uid_for_hotkey_on_subnet`` |
| ``add_stake(hotkey, amount)`` | ``subtensor.add_stake(wallet=, netuid=, hotkey_ss58=, amount=Balance.from_tao(amount))`` |

The wallet signs, so only the wallet's own hotkey can register or set weights here. ``advance_blocks`` and
``run_epoch`` raise: a real chain makes its own blocks and runs its own epochs. The SDK is imported lazily;
``sdk=`` lets a caller pass the module (or a stand-in) explicitly. Weights go out as the u16 values we computed:
the SDK max-upscales them to u16 again, which leaves a vector whose largest entry is 65535 (ORO's burn) unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shoparena.arena.chain.types import ChainError, EpochResult, Metagraph, WeightResult

__all__ = ["SubtensorChain", "load_sdk", "metagraph_from_sdk"]

_INSTALL_HINT = 'install the chain extra: pip install "shoparena[chain]" (the bittensor SDK)'


def load_sdk() -> Any:
    """The ``bittensor`` module, or a :class:`ChainError` with an install hint."""
    try:
        import bittensor
    except ImportError as e:
        raise ChainError("the bittensor SDK is not installed", hint=_INSTALL_HINT) from e
    return bittensor


def _arr(value: Any) -> np.ndarray:
    """A numpy array from an SDK field (numpy array, torch tensor or list)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def metagraph_from_sdk(mg: Any) -> Metagraph:
    """Our :class:`Metagraph` from an SDK metagraph (``lite=True`` gives empty W and B: they become zeros)."""
    hotkeys = [str(h) for h in mg.hotkeys]
    n = len(hotkeys)

    def vec(name: str) -> np.ndarray | None:
        v = getattr(mg, name, None)
        return None if v is None else _arr(v)

    def mat(name: str) -> np.ndarray | None:
        m = vec(name)
        return m if m is not None and m.shape == (n, n) else None

    return Metagraph.build(
        block=int(_arr(mg.block).reshape(-1)[0]),
        hotkeys=hotkeys,
        coldkeys=[str(c) for c in mg.coldkeys],
        stake=vec("S"),
        validator_permit=vec("validator_permit"),
        last_update=vec("last_update"),
        incentive=vec("I"),
        dividends=vec("D"),
        emission=vec("E"),
        consensus=vec("C"),
        trust=vec("T"),
        validator_trust=vec("Tv"),
        weights=mat("W"),
        bonds=mat("B"),
    )


def _outcome(response: Any) -> tuple[bool, str]:
    """(success, message) from a bittensor 9 tuple or a bittensor 10 ``ExtrinsicResponse``.

    The 10.x response mimics a tuple but has no ``__bool__``: read ``.success`` rather than its truth value."""
    if hasattr(response, "success"):
        return bool(response.success), str(getattr(response, "message", "") or "")
    if isinstance(response, tuple) and response:
        return bool(response[0]), str(response[1] if len(response) > 1 and response[1] is not None else "")
    if isinstance(response, bool):
        return response, ""
    raise ChainError(f"unexpected answer from the bittensor SDK: {response!r}")


class SubtensorChain:
    """One subnet on a real (local, test or finney) subtensor, acting as ``wallet``."""

    def __init__(
        self,
        network: str,
        netuid: int,
        wallet: Any,
        *,
        sdk: Any | None = None,
        version_key: int = 0,
        wait_for_inclusion: bool = True,
        wait_for_finalization: bool = False,
        lite: bool = False,
    ) -> None:
        self.network = network
        self.netuid = int(netuid)
        self.wallet = wallet
        self.version_key = int(version_key)
        self.wait_for_inclusion = wait_for_inclusion
        self.wait_for_finalization = wait_for_finalization
        self.lite = lite
        self.sdk = sdk if sdk is not None else load_sdk()
        self.subtensor = self.sdk.Subtensor(network=network)

    @property
    def hotkey_ss58(self) -> str:
        return str(self.wallet.hotkey.ss58_address)

    @property
    def block(self) -> int:
        return int(self.subtensor.get_current_block())

    def block_hash(self, block: int) -> str:
        return str(self.subtensor.get_block_hash(block))

    def metagraph(self) -> Metagraph:
        return metagraph_from_sdk(self.subtensor.metagraph(netuid=self.netuid, lite=self.lite))

    def set_weights(self, hotkey_ss58: str, uids: Sequence[int], weights_u16: Sequence[int]) -> WeightResult:
        if hotkey_ss58 != self.hotkey_ss58:
            return WeightResult(ok=False, reason=f"this chain signs as {self.hotkey_ss58}, not {hotkey_ss58}")
        if len(uids) != len(weights_u16):
            return WeightResult(ok=False, reason="uids and weights differ in length")
        ok, message = _outcome(self.subtensor.set_weights(
            wallet=self.wallet,
            netuid=self.netuid,
            uids=[int(u) for u in uids],
            weights=[float(w) for w in weights_u16],
            version_key=self.version_key,
            wait_for_inclusion=self.wait_for_inclusion,
            wait_for_finalization=self.wait_for_finalization,
        ))
        return WeightResult(ok=ok, reason="" if ok else message)

    def register(self, hotkey_ss58: str, coldkey_ss58: str) -> int:
        if hotkey_ss58 != self.hotkey_ss58:
            raise ChainError(f"this chain can only register its wallet's hotkey {self.hotkey_ss58}")
        uid = self.subtensor.get_uid_for_hotkey_on_subnet(hotkey_ss58, self.netuid)
        if uid is None:
            ok, message = _outcome(self.subtensor.burned_register(wallet=self.wallet, netuid=self.netuid))
            if not ok:
                raise ChainError(f"registration failed: {message}")
            uid = self.subtensor.get_uid_for_hotkey_on_subnet(hotkey_ss58, self.netuid)
            if uid is None:
                raise ChainError("registration reported success but the hotkey has no uid yet")
        return int(uid)

    def add_stake(self, hotkey_ss58: str, amount: float) -> None:
        ok, message = _outcome(self.subtensor.add_stake(
            wallet=self.wallet,
            netuid=self.netuid,
            hotkey_ss58=hotkey_ss58,
            amount=self.sdk.Balance.from_tao(float(amount)),
            wait_for_inclusion=self.wait_for_inclusion,
            wait_for_finalization=self.wait_for_finalization,
        ))
        if not ok:
            raise ChainError(f"add_stake failed: {message}")

    def advance_blocks(self, n: int) -> list[EpochResult]:
        raise ChainError("a real chain produces its own blocks", hint="use LocalChain for simulated time")

    def run_epoch(self) -> EpochResult:
        raise ChainError("a real chain runs its own epochs", hint="read the results with metagraph()")
