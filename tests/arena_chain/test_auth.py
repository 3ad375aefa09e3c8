"""Signed request headers and the verifier: real sr25519 signatures, a manual clock and a LocalChain metagraph."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shoparena.arena.auth import (
    HEADER_HOTKEY,
    HEADER_NONCE,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    AuthError,
    RequestVerifier,
    sign_headers,
    signing_message,
)
from shoparena.arena.chain import Hyperparameters, LocalChain, Metagraph
from shoparena.arena.identity import new_identity, verify
from shoparena.clock import ManualClock

OWNER, VALIDATOR, MINER, STRANGER = (new_identity(n) for n in ("owner", "validator", "miner", "stranger"))


@pytest.fixture
def chain() -> LocalChain:
    c = LocalChain(Hyperparameters(max_allowed_validators=4))
    for ident in (OWNER, VALIDATOR, MINER):
        c.register(ident.hotkey_ss58, ident.coldkey_ss58)
    c.add_stake(VALIDATOR.hotkey_ss58, 50_000.0)
    return c


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def verifier(chain: LocalChain, clock: ManualClock) -> RequestVerifier:
    return RequestVerifier(chain.metagraph, clock=clock)


def _refused(verifier: RequestVerifier, headers: dict[str, str], status: int, **kw: object) -> str:
    with pytest.raises(AuthError) as err:
        verifier.verify(headers, **kw)  # type: ignore[arg-type]
    assert err.value.status == status
    return err.value.reason


def test_headers_carry_a_signature_of_hotkey_timestamp_nonce(clock: ManualClock) -> None:
    h = sign_headers(MINER.hotkey, clock=clock, nonce="abc")
    assert h[HEADER_HOTKEY] == MINER.hotkey_ss58
    assert h[HEADER_TIMESTAMP] == str(int(clock.now()))
    assert verify(MINER.hotkey_ss58, signing_message(MINER.hotkey_ss58, h[HEADER_TIMESTAMP], "abc"),
                  h[HEADER_SIGNATURE])
    assert sign_headers(MINER.hotkey, clock=clock)[HEADER_NONCE] != sign_headers(MINER.hotkey, clock=clock)[HEADER_NONCE]


def test_valid_requests_get_their_roles(verifier: RequestVerifier, clock: ManualClock) -> None:
    miner = verifier.verify(sign_headers(MINER.hotkey, clock=clock))
    assert (miner.hotkey, miner.role, miner.uid) == (MINER.hotkey_ss58, "miner", 2)
    validator = verifier.verify(sign_headers(VALIDATOR.hotkey, clock=clock), require="validator")
    assert (validator.role, validator.uid) == ("validator", 1)


def test_header_names_are_case_insensitive(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = {k.lower(): v for k, v in sign_headers(MINER.hotkey, clock=clock).items()}
    assert verifier.verify(h).role == "miner"


def test_tampered_headers_are_refused(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = sign_headers(MINER.hotkey, clock=clock)
    assert _refused(verifier, {**h, HEADER_NONCE: h[HEADER_NONCE] + "x"}, 401) == "invalid signature"
    assert _refused(verifier, {**h, HEADER_TIMESTAMP: str(int(h[HEADER_TIMESTAMP]) - 1)}, 401) == "invalid signature"
    assert _refused(verifier, {**h, HEADER_SIGNATURE: "00" * 64}, 401) == "invalid signature"
    assert _refused(verifier, {**h, HEADER_SIGNATURE: "nothex"}, 401) == "invalid signature"


def test_a_signature_by_another_key_is_refused(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = sign_headers(STRANGER.hotkey, clock=clock)
    h[HEADER_HOTKEY] = VALIDATOR.hotkey_ss58  # claims the validator, signed by someone else
    assert _refused(verifier, h, 401) == "invalid signature"


def test_missing_and_malformed_headers(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = sign_headers(MINER.hotkey, clock=clock)
    for name in (HEADER_HOTKEY, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE):
        assert "missing header" in _refused(verifier, {k: v for k, v in h.items() if k != name}, 401)
    assert _refused(verifier, {**h, HEADER_TIMESTAMP: "soon"}, 401) == "malformed timestamp"
    assert _refused(verifier, {**h, HEADER_NONCE: "a:b"}, 401) == "malformed nonce"
    assert _refused(verifier, {**h, HEADER_HOTKEY: "5notanaddress"}, 401) == "malformed hotkey"


def test_skew_window_is_sixty_seconds_either_way(verifier: RequestVerifier, clock: ManualClock) -> None:
    old = sign_headers(MINER.hotkey, clock=clock)
    edge = sign_headers(MINER.hotkey, clock=clock)
    clock.advance(60)
    assert verifier.verify(edge).role == "miner"  # exactly 60 s old: still inside
    clock.advance(1)
    assert "window" in _refused(verifier, old, 401)  # 61 s old
    future = sign_headers(MINER.hotkey, clock=ManualClock(clock.now() + 61))
    assert "window" in _refused(verifier, future, 401)


def test_a_replayed_nonce_is_refused(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = sign_headers(MINER.hotkey, clock=clock)
    verifier.verify(h)
    assert _refused(verifier, h, 401) == "replayed nonce"
    clock.advance(30)
    assert _refused(verifier, h, 401) == "replayed nonce"
    clock.advance(31)
    assert "window" in _refused(verifier, h, 401)  # by now the skew check refuses it on its own


def test_the_same_nonce_from_two_hotkeys_is_not_a_replay(verifier: RequestVerifier, clock: ManualClock) -> None:
    verifier.verify(sign_headers(MINER.hotkey, clock=clock, nonce="n1"))
    verifier.verify(sign_headers(VALIDATOR.hotkey, clock=clock, nonce="n1"))


def test_unregistered_hotkey_is_forbidden(verifier: RequestVerifier, clock: ManualClock) -> None:
    assert "not registered" in _refused(verifier, sign_headers(STRANGER.hotkey, clock=clock), 403)


def test_a_miner_calling_a_validator_route_is_forbidden(verifier: RequestVerifier, clock: ManualClock) -> None:
    h = sign_headers(MINER.hotkey, clock=clock)
    assert "validator permit" in _refused(verifier, h, 403, require="validator")
    assert verifier.verify(h).role == "miner"  # a refused request does not burn its nonce


def test_minimum_validator_stake(chain: LocalChain, clock: ManualClock) -> None:
    strict = RequestVerifier(chain.metagraph, clock=clock, min_validator_stake=100_000.0)
    assert strict.verify(sign_headers(VALIDATOR.hotkey, clock=clock)).role == "miner"
    _refused(strict, sign_headers(VALIDATOR.hotkey, clock=clock), 403, require="validator")


def test_metagraph_refresh_and_invalidate(chain: LocalChain, clock: ManualClock) -> None:
    v = RequestVerifier(chain.metagraph, clock=clock, refresh_s=300)
    v.verify(sign_headers(MINER.hotkey, clock=clock))
    chain.register(STRANGER.hotkey_ss58, STRANGER.coldkey_ss58)
    _refused(v, sign_headers(STRANGER.hotkey, clock=clock), 403)  # cached metagraph
    v.invalidate()
    assert v.verify(sign_headers(STRANGER.hotkey, clock=clock)).uid == 3


class _Flaky:
    """A metagraph provider that can be switched off (an unreachable chain)."""

    def __init__(self, source: Callable[[], Metagraph]) -> None:
        self.source, self.up, self.calls = source, True, 0

    def __call__(self) -> Metagraph:
        self.calls += 1
        if not self.up:
            raise ConnectionError("chain unreachable")
        return self.source()


def test_fail_closed_without_any_metagraph(chain: LocalChain, clock: ManualClock) -> None:
    provider = _Flaky(chain.metagraph)
    provider.up = False
    v = RequestVerifier(provider, clock=clock)
    assert "metagraph unavailable" in _refused(v, sign_headers(MINER.hotkey, clock=clock), 503)


def test_stale_metagraph_serves_until_the_limit_then_fails_closed(chain: LocalChain, clock: ManualClock) -> None:
    provider = _Flaky(chain.metagraph)
    v = RequestVerifier(provider, clock=clock, refresh_s=300, max_stale_s=1200)
    v.verify(sign_headers(MINER.hotkey, clock=clock))
    provider.up = False
    clock.advance(1200)
    assert v.verify(sign_headers(MINER.hotkey, clock=clock)).role == "miner"  # stale but within the limit
    assert provider.calls == 2
    clock.advance(1)
    _refused(v, sign_headers(MINER.hotkey, clock=clock), 503)
    provider.up = True
    assert v.verify(sign_headers(MINER.hotkey, clock=clock)).role == "miner"


def test_nonce_cache_is_bounded_and_never_reopens_a_replay(chain: LocalChain, clock: ManualClock) -> None:
    v = RequestVerifier(chain.metagraph, clock=clock, max_nonces=2)
    first = sign_headers(MINER.hotkey, clock=clock)
    v.verify(first)
    clock.advance(1)
    v.verify(sign_headers(MINER.hotkey, clock=clock))
    clock.advance(1)
    v.verify(sign_headers(MINER.hotkey, clock=clock))  # evicts `first`
    assert len(v._nonces) == 2
    assert "overflow" in _refused(v, first, 401)  # evicted, but its timestamp is below the floor
    clock.advance(1)
    v.verify(sign_headers(MINER.hotkey, clock=clock))


def test_expired_nonces_are_forgotten(chain: LocalChain, clock: ManualClock) -> None:
    v = RequestVerifier(chain.metagraph, clock=clock)
    for _ in range(5):
        v.verify(sign_headers(MINER.hotkey, clock=clock))
    clock.advance(61)
    v.verify(sign_headers(MINER.hotkey, clock=clock))
    assert len(v._nonces) == 1

