"""LocalChain: registration and pruning, permits, the weight rules, tempo and the epoch wiring."""

from __future__ import annotations

import time

import numpy as np
import pytest

from shoparena.arena.chain import Chain, ChainError, Hyperparameters, LocalChain
from shoparena.arena.identity import Identity, new_identity

IDS = [new_identity(f"node-{i}") for i in range(12)]


def _chain(**hp: object) -> LocalChain:
    base: dict[str, object] = {"tempo": 10, "immunity_period": 0, "weights_rate_limit": 5}
    return LocalChain(Hyperparameters(**{**base, **hp}))  # type: ignore[arg-type]


def _reg(chain: LocalChain, ident: Identity) -> int:
    return chain.register(ident.hotkey_ss58, ident.coldkey_ss58)


def _members(chain: LocalChain) -> None:
    """uid 0 owner; validators 1–3 staking 50/30/20; miners 4–6."""
    for ident in IDS[:7]:
        _reg(chain, ident)
    for uid, stake in ((1, 50.0), (2, 30.0), (3, 20.0)):
        chain.add_stake(IDS[uid].hotkey_ss58, stake)


def _subnet(chain: LocalChain) -> None:
    """The members with test_yuma's weights: validator 3 is an outlier backing miner 6 alone."""
    _members(chain)
    assert chain.set_weights(IDS[1].hotkey_ss58, [4, 5], [6, 4]).ok
    assert chain.set_weights(IDS[2].hotkey_ss58, [4, 5], [5, 5]).ok
    assert chain.set_weights(IDS[3].hotkey_ss58, [6], [65535]).ok


def test_local_chain_is_a_chain() -> None:
    assert isinstance(LocalChain(), Chain)


def test_registration_assigns_uids_in_order_and_is_idempotent() -> None:
    chain = _chain()
    assert [_reg(chain, i) for i in IDS[:3]] == [0, 1, 2]
    assert _reg(chain, IDS[1]) == 1
    with pytest.raises(ChainError, match="another coldkey"):
        chain.register(IDS[1].hotkey_ss58, IDS[2].coldkey_ss58)
    mg = chain.metagraph()
    assert mg.n == 3 and mg.hotkeys[2] == IDS[2].hotkey_ss58 and mg.coldkeys[2] == IDS[2].coldkey_ss58
    assert mg.uid_of(IDS[2].hotkey_ss58) == 2 and mg.uid_of(IDS[5].hotkey_ss58) is None


def test_epoch_matches_the_hand_computed_case() -> None:
    chain = _chain()
    _subnet(chain)
    result = chain.run_epoch()
    assert result.incentive[4:].tolist() == pytest.approx([0.45 / 0.77, 0.32 / 0.77, 0.0])
    assert result.consensus[6] == 0.0  # the outlier's miner is clipped to consensus
    v1, v2 = 2 / 3 * 0.45 + 4 / 7 * 0.32, 1 / 3 * 0.45 + 3 / 7 * 0.32
    assert result.dividends[1:4].tolist() == pytest.approx([v1 / 0.77, v2 / 0.77, 0.0])
    total = chain.hparams.emission_per_block * chain.hparams.tempo
    assert result.owner_emission == pytest.approx(0.18 * total)
    assert result.miner_emission == pytest.approx(0.41 * total) == result.validator_emission
    assert result.emission.sum() + result.owner_emission == pytest.approx(total)
    mg = chain.metagraph()
    assert mg.incentive.tolist() == result.incentive.tolist() and mg.emission.tolist() == result.emission.tolist()


def test_tempo_runs_an_epoch_every_tempo_blocks() -> None:
    chain = _chain(tempo=10)
    _subnet(chain)
    results = chain.advance_blocks(25)
    assert [r.block for r in results] == [10, 20] and chain.block == 25
    assert [r.epoch for r in results] == [1, 2]
    assert [r.block for r in chain.advance_blocks(5)] == [30]
    assert chain.advance_blocks(0) == []
    with pytest.raises(ChainError):
        chain.advance_blocks(-1)


def test_permits_go_to_the_top_stake() -> None:
    chain = _chain(max_allowed_validators=2)
    for ident in IDS[:5]:
        _reg(chain, ident)
    chain.add_stake(IDS[1].hotkey_ss58, 10)
    chain.add_stake(IDS[2].hotkey_ss58, 30)
    chain.add_stake(IDS[3].hotkey_ss58, 30)
    assert chain.metagraph().validator_permit.tolist() == [False, False, True, True, False]
    chain.add_stake(IDS[1].hotkey_ss58, 25)  # 35 now; uids 2 and 3 tie at 30 for the last permit: the lower uid
    assert chain.metagraph().validator_permit.tolist() == [False, True, True, False, False]
    with pytest.raises(ChainError):
        chain.add_stake(IDS[4].hotkey_ss58, 0)
    with pytest.raises(ChainError, match="not registered"):
        chain.add_stake(IDS[9].hotkey_ss58, 1)


def test_set_weights_requires_registration_and_a_permit() -> None:
    chain = _chain()
    _subnet(chain)
    assert chain.set_weights(IDS[10].hotkey_ss58, [4], [1]).reason == "hotkey not registered"
    assert chain.set_weights(IDS[4].hotkey_ss58, [5], [1]).reason == "no validator permit"


def test_weights_rate_limit_in_blocks() -> None:
    chain = _chain(weights_rate_limit=5)
    _subnet(chain)
    hk = IDS[1].hotkey_ss58
    assert "rate limited" in chain.set_weights(hk, [4], [1]).reason
    chain.advance_blocks(4)
    assert not chain.set_weights(hk, [4], [1]).ok
    chain.advance_blocks(1)
    result = chain.set_weights(hk, [4], [1])
    assert result.ok and result.block == 5
    assert chain.metagraph().last_update[1] == 5


def test_weight_vector_rules() -> None:
    chain = _chain(min_allowed_weights=2, max_weight_limit=45000, weights_rate_limit=0)
    _members(chain)
    hk = IDS[1].hotkey_ss58
    assert "too few" in chain.set_weights(hk, [4], [1]).reason
    assert "max_weight_limit" in chain.set_weights(hk, [4, 5], [3, 1]).reason  # 75 % > 45000/65535
    assert chain.set_weights(hk, [4, 5], [3, 2]).ok  # 60 % ≤ 68.7 %
    assert "duplicate" in chain.set_weights(hk, [4, 4], [1, 1]).reason
    assert "out of range" in chain.set_weights(hk, [4, 99], [1, 1]).reason
    assert "u16" in chain.set_weights(hk, [4, 5], [70000, 1]).reason
    assert "zero" in chain.set_weights(hk, [4, 5], [0, 0]).reason
    assert "length" in chain.set_weights(hk, [4, 5], [1]).reason


def test_weights_are_stored_normalised_without_self_weight() -> None:
    chain = _chain(weights_rate_limit=0)
    _subnet(chain)
    assert chain.set_weights(IDS[1].hotkey_ss58, [0, 1, 4], [65535, 1000, 21845]).ok
    row = chain.metagraph().weights[1]
    assert row[1] == 0.0 and row.sum() == pytest.approx(1.0)
    assert row[0] == pytest.approx(0.75) and row[4] == pytest.approx(0.25)


def test_pruning_takes_the_lowest_emission_first() -> None:
    chain = _chain(max_allowed_uids=7)
    _subnet(chain)
    chain.run_epoch()
    emission = chain.metagraph().emission
    assert emission[6] == 0.0 and emission[3] == 0.0  # the outlier validator and its miner earned nothing
    newcomer = IDS[7]
    assert _reg(chain, newcomer) == 3  # tie on 0 emission: both registered at block 0 → the lower uid
    mg = chain.metagraph()
    assert mg.hotkeys[3] == newcomer.hotkey_ss58 and mg.uid_of(IDS[3].hotkey_ss58) is None
    assert mg.stake[3] == 0.0 and not mg.validator_permit[3]
    assert mg.weights[3].sum() == 0.0 and mg.weights[:, 3].sum() == 0.0 and mg.bonds[:, 3].sum() == 0.0
    assert mg.emission[3] == 0.0 and mg.registered_at_block[3] == chain.block


def test_pruning_ties_go_to_the_older_registration_then_the_lower_uid() -> None:
    chain = _chain(max_allowed_uids=4)
    for ident in IDS[:4]:
        _reg(chain, ident)  # all at block 0, no emission yet
    pruned = []
    for ident in IDS[4:8]:
        chain.advance_blocks(1)
        pruned.append(_reg(chain, ident))
    # uids 1, 2, 3 tie at block 0 → lower uid first; uid 1 (re-registered at block 1) is then newer than 2 and 3.
    assert pruned == [1, 2, 3, 1]


def test_uid_zero_is_never_pruned() -> None:
    chain = _chain(max_allowed_uids=2)
    _reg(chain, IDS[0])
    _reg(chain, IDS[1])
    assert _reg(chain, IDS[2]) == 1
    assert chain.metagraph().hotkeys[0] == IDS[0].hotkey_ss58


def test_immunity_period_protects_young_uids() -> None:
    chain = _chain(max_allowed_uids=4, immunity_period=10)
    for ident in IDS[:3]:
        _reg(chain, ident)
    chain.advance_blocks(6)
    _reg(chain, IDS[3])  # uid 3 registered at block 6
    chain.advance_blocks(3)  # block 9: everyone is still immune
    with pytest.raises(ChainError, match="immune"):
        _reg(chain, IDS[4])
    chain.advance_blocks(1)  # block 10: uids 1 and 2 are out of immunity, uid 3 is not
    assert _reg(chain, IDS[4]) == 1
    assert _reg(chain, IDS[5]) == 2
    with pytest.raises(ChainError):
        _reg(chain, IDS[6])  # the only old uids left were just replaced; uid 3 is still immune


def test_inactive_validators_lose_their_say() -> None:
    chain = _chain(activity_cutoff=15, tempo=10, weights_rate_limit=0)
    _subnet(chain)
    chain.advance_blocks(10)
    chain.set_weights(IDS[1].hotkey_ss58, [4, 5], [6, 4])  # only validator 1 keeps its weights fresh
    result = chain.advance_blocks(10)[-1]  # block 20: validators 2 and 3 last updated at block 0
    assert result.stake[1:4].tolist() == [1.0, 0.0, 0.0]
    assert result.incentive[4:6].tolist() == pytest.approx([0.6, 0.4])


def test_a_lost_permit_masks_the_weights() -> None:
    chain = _chain(max_allowed_validators=3)
    _subnet(chain)
    chain.add_stake(IDS[4].hotkey_ss58, 25.0)  # miner 4 out-stakes validator 3 and takes its permit
    assert not chain.metagraph().validator_permit[3]
    result = chain.run_epoch()
    assert result.stake[3] == 0.0 and result.validator_trust[3] == 0.0


def test_metagraph_is_an_immutable_cached_snapshot() -> None:
    chain = _chain()
    _subnet(chain)
    mg = chain.metagraph()
    assert chain.metagraph() is mg
    with pytest.raises(ValueError):
        mg.stake[1] = 1e9
    chain.add_stake(IDS[1].hotkey_ss58, 1.0)
    assert chain.metagraph() is not mg and mg.stake[1] == 50.0
    as_json = mg.to_dict()
    assert as_json["hotkeys"][1] == IDS[1].hotkey_ss58 and len(as_json["weights"]) == mg.n
    assert mg.is_validator(IDS[1].hotkey_ss58) and not mg.is_validator(IDS[4].hotkey_ss58)
    assert not mg.is_validator(IDS[1].hotkey_ss58, min_stake=51.0)


def test_same_calls_give_the_same_chain() -> None:
    a, b = _chain(), _chain()
    for chain in (a, b):
        _subnet(chain)
        chain.advance_blocks(35)
    ma, mb = a.metagraph(), b.metagraph()
    for field in ("incentive", "dividends", "emission", "bonds", "weights"):
        assert np.array_equal(getattr(ma, field), getattr(mb, field))


def test_block_hashes_are_fixed_by_the_seed_and_only_for_past_blocks() -> None:
    a, b, c = LocalChain(seed=1), LocalChain(seed=1), LocalChain(seed=2)
    for chain in (a, b, c):
        chain.advance_blocks(3)
    assert a.block_hash(2) == b.block_hash(2) != c.block_hash(2)
    assert a.block_hash(2) != a.block_hash(3) and len(bytes.fromhex(a.block_hash(3)[2:])) == 32
    with pytest.raises(ChainError):
        a.block_hash(4)


def test_an_epoch_with_256_uids_takes_milliseconds() -> None:
    hp = Hyperparameters(max_allowed_uids=256, max_allowed_validators=64, weights_rate_limit=0, immunity_period=0)
    chain = LocalChain(hp)
    rng = np.random.default_rng(0)
    hotkeys = [f"hk{i}" for i in range(256)]  # any string works as a hotkey on the local chain
    for i, hk in enumerate(hotkeys):
        chain.register(hk, f"ck{i}")
    for hk in hotkeys[1:65]:
        chain.add_stake(hk, float(rng.integers(1, 1000)))
    for hk in hotkeys[1:65]:
        uids = list(range(65, 256))
        assert chain.set_weights(hk, uids, rng.integers(1, 65535, len(uids)).tolist()).ok
    chain.run_epoch()
    start = time.perf_counter()
    for _ in range(20):
        result = chain.run_epoch()
    per_epoch = (time.perf_counter() - start) / 20
    assert result.incentive.sum() == pytest.approx(1.0)
    assert per_epoch < 0.05, f"{per_epoch * 1000:.1f} ms per epoch"
