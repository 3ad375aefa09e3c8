"""SubtensorChain: construction and argument mapping only.

The ``bittensor`` SDK is not installed here and no chain is reachable, so these tests hand the adapter a
stand-in SDK module that records calls. This is the accepted exception to the project's no-mocks rule: what is
tested is our mapping onto the SDK's documented signatures, not the SDK."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from shoparena.arena.chain import Chain, ChainError, SubtensorChain
from shoparena.arena.chain.subtensor import load_sdk, metagraph_from_sdk
from shoparena.arena.identity import new_identity
from shoparena.arena.weights import Finisher, build_weights

ME, OTHER = new_identity("validator"), new_identity("someone-else")


class _Subtensor:
    """Stands in for ``bittensor.Subtensor``: records every call, answers from ``replies``."""

    def __init__(self, network: str) -> None:
        self.network = network
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.replies: dict[str, Any] = {}
        self.uid: int | None = None

    def _record(self, name: str, **kwargs: Any) -> Any:
        self.calls.append((name, kwargs))
        return self.replies.get(name, (True, ""))

    def get_current_block(self) -> int:
        return 4242

    def get_block_hash(self, block: int) -> str:
        self.calls.append(("get_block_hash", {"block": block}))
        return "0x" + "ab" * 32

    def metagraph(self, **kwargs: Any) -> Any:
        self.calls.append(("metagraph", kwargs))
        return _sdk_metagraph(lite=kwargs.get("lite", True))

    def set_weights(self, **kwargs: Any) -> Any:
        return self._record("set_weights", **kwargs)

    def burned_register(self, **kwargs: Any) -> Any:
        self.uid = 3
        return self._record("burned_register", **kwargs)

    def get_uid_for_hotkey_on_subnet(self, hotkey_ss58: str, netuid: int) -> int | None:
        return self.uid

    def add_stake(self, **kwargs: Any) -> Any:
        return self._record("add_stake", **kwargs)


def _sdk() -> Any:
    balance = SimpleNamespace(from_tao=lambda x: ("Balance", x))
    return SimpleNamespace(Subtensor=_Subtensor, Balance=balance)


def _sdk_metagraph(lite: bool) -> Any:
    n = 3
    w = np.array([[0, 0.25, 0.75], [0, 0, 0], [0, 0, 0]]) if not lite else np.array([])
    return SimpleNamespace(
        n=n, block=np.array(4242), hotkeys=["a", "b", "c"], coldkeys=["ca", "cb", "cc"],
        uids=np.arange(n), S=np.array([0.0, 100.0, 5.0]), W=w, B=w,
        I=np.array([0, 0.25, 0.75]), D=np.array([1.0, 0, 0]), E=np.array([0, 1.0, 3.0]),
        C=np.zeros(n), T=np.ones(n), Tv=np.array([1.0, 0, 0]),
        validator_permit=np.array([False, True, False]), last_update=np.array([1, 2, 3]),
    )


@pytest.fixture
def chain() -> SubtensorChain:
    return SubtensorChain("test", 15, SimpleNamespace(hotkey=ME.hotkey, name="v"), sdk=_sdk(), version_key=7)


def test_construction_opens_the_named_network(chain: SubtensorChain) -> None:
    assert isinstance(chain, Chain)
    assert chain.subtensor.network == "test" and chain.netuid == 15
    assert chain.block == 4242
    assert chain.block_hash(4000) == "0x" + "ab" * 32


def test_set_weights_maps_onto_the_sdk(chain: SubtensorChain) -> None:
    vector = build_weights([Finisher(hotkey="b", race_score=1, agent_version_id=1),
                            Finisher(hotkey="c", race_score=0.5, agent_version_id=2)], ["a", "b", "c"])
    result = chain.set_weights(ME.hotkey_ss58, range(3), vector)  # type: ignore[arg-type]
    assert result.ok
    name, kwargs = chain.subtensor.calls[-1]
    assert name == "set_weights"
    assert kwargs == {
        "wallet": chain.wallet, "netuid": 15, "uids": [0, 1, 2], "weights": [65535.0, 21845.0, 0.0],
        "version_key": 7, "wait_for_inclusion": True, "wait_for_finalization": False,
    }


def test_set_weights_reads_an_extrinsic_response_by_its_success_field(chain: SubtensorChain) -> None:
    class _Response:  # bittensor 10 answers an object that is not a tuple and has no __bool__
        success, message = False, "No validator permit"

    chain.subtensor.replies["set_weights"] = _Response()
    result = chain.set_weights(ME.hotkey_ss58, [0], [65535])
    assert not result.ok and result.reason == "No validator permit"
    chain.subtensor.replies["set_weights"] = (False, "rate limited")
    assert chain.set_weights(ME.hotkey_ss58, [0], [65535]).reason == "rate limited"


def test_set_weights_for_another_hotkey_never_reaches_the_sdk(chain: SubtensorChain) -> None:
    assert not chain.set_weights(OTHER.hotkey_ss58, [0], [1]).ok
    assert not chain.set_weights(ME.hotkey_ss58, [0, 1], [1]).ok
    assert chain.subtensor.calls == []


def test_metagraph_maps_the_sdk_fields() -> None:
    mg = metagraph_from_sdk(_sdk_metagraph(lite=False))
    assert mg.n == 3 and mg.block == 4242 and mg.hotkeys == ("a", "b", "c") and mg.coldkeys[2] == "cc"
    assert mg.stake.tolist() == [0.0, 100.0, 5.0] and mg.validator_permit.tolist() == [False, True, False]
    assert mg.weights[0].tolist() == [0, 0.25, 0.75] and mg.emission.tolist() == [0, 1.0, 3.0]
    assert mg.is_validator("b") and mg.uid_of("c") == 2
    lite = metagraph_from_sdk(_sdk_metagraph(lite=True))
    assert lite.weights.shape == (3, 3) and not lite.weights.any()


def test_metagraph_asks_for_the_full_graph(chain: SubtensorChain) -> None:
    chain.metagraph()
    assert chain.subtensor.calls[-1] == ("metagraph", {"netuid": 15, "lite": False})


def test_register_burns_once_and_answers_the_uid(chain: SubtensorChain) -> None:
    assert chain.register(ME.hotkey_ss58, ME.coldkey_ss58) == 3
    assert chain.subtensor.calls == [("burned_register", {"wallet": chain.wallet, "netuid": 15})]
    assert chain.register(ME.hotkey_ss58, ME.coldkey_ss58) == 3  # already registered: no second burn
    assert len(chain.subtensor.calls) == 1
    with pytest.raises(ChainError):
        chain.register(OTHER.hotkey_ss58, OTHER.coldkey_ss58)


def test_add_stake_converts_to_a_balance(chain: SubtensorChain) -> None:
    chain.add_stake(ME.hotkey_ss58, 12.5)
    assert chain.subtensor.calls[-1] == ("add_stake", {
        "wallet": chain.wallet, "netuid": 15, "hotkey_ss58": ME.hotkey_ss58, "amount": ("Balance", 12.5),
        "wait_for_inclusion": True, "wait_for_finalization": False,
    })
    chain.subtensor.replies["add_stake"] = (False, "not enough balance")
    with pytest.raises(ChainError, match="not enough balance"):
        chain.add_stake(ME.hotkey_ss58, 1.0)


def test_a_real_chain_keeps_its_own_time(chain: SubtensorChain) -> None:
    with pytest.raises(ChainError):
        chain.advance_blocks(1)
    with pytest.raises(ChainError):
        chain.run_epoch()


@pytest.mark.skipif(importlib.util.find_spec("bittensor") is not None, reason="the bittensor SDK is installed")
def test_missing_sdk_gives_an_install_hint() -> None:
    with pytest.raises(ChainError) as err:
        load_sdk()
    assert "shoparena[chain]" in str(err.value)
    with pytest.raises(ChainError):
        SubtensorChain("test", 15, SimpleNamespace(hotkey=ME.hotkey))
