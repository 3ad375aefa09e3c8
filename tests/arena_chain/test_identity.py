"""Dev keypairs, identities and the sign/verify helpers (real sr25519)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bittensor_wallet import Wallet

from shoparena.arena.identity import (
    Identity,
    dev_keypair,
    is_ss58,
    new_identity,
    public_keypair,
    sign,
    verify,
)


def test_dev_keypair_is_deterministic_and_separated_by_name_and_seed() -> None:
    a = dev_keypair("miner-1")
    assert a.ss58_address == dev_keypair("miner-1").ss58_address
    assert a.ss58_address != dev_keypair("miner-2").ss58_address
    assert a.ss58_address != dev_keypair("miner-1", seed=1).ss58_address


def test_dev_keypair_is_sr25519_ss58_format_42() -> None:
    kp = dev_keypair("validator-1")
    assert kp.crypto_type == 1 and kp.ss58_format == 42
    assert kp.ss58_address.startswith("5") and is_ss58(kp.ss58_address)


def test_new_identity_has_distinct_hotkey_and_coldkey() -> None:
    ident = new_identity("alice", seed=3)
    assert ident.hotkey_ss58 != ident.coldkey_ss58
    assert ident == new_identity("alice", seed=3)
    assert ident != new_identity("alice", seed=4)
    assert "alice" in repr(ident)


def test_sign_and_verify_round_trip() -> None:
    kp = dev_keypair("signer")
    sig = sign(kp, "hello")
    assert len(bytes.fromhex(sig)) == 64
    assert verify(kp.ss58_address, "hello", sig)
    assert verify(kp.ss58_address, b"hello", "0x" + sig)


def test_verify_rejects_tampering_wrong_key_and_garbage() -> None:
    kp, other = dev_keypair("signer"), dev_keypair("other")
    sig = sign(kp, "hello")
    assert not verify(kp.ss58_address, "hellp", sig)
    assert not verify(other.ss58_address, "hello", sig)
    assert not verify(kp.ss58_address, "hello", sig[:-2] + ("00" if sig[-2:] != "00" else "11"))
    assert not verify(kp.ss58_address, "hello", "zz")
    assert not verify(kp.ss58_address, "hello", "ab" * 10)
    assert not verify("not-an-address", "hello", sig)
    assert not is_ss58("not-an-address")


def test_public_keypair_verifies() -> None:
    kp = dev_keypair("signer")
    pub = public_keypair(kp.ss58_address)
    assert pub.verify(b"m", kp.sign(b"m"))


def test_identity_from_a_wallet_on_disk(tmp_path: Path) -> None:
    wallet = Wallet(name="w", hotkey="h", path=str(tmp_path))
    wallet.create_coldkey_from_uri("//Alice", use_password=False, overwrite=True, suppress=True)
    wallet.create_hotkey_from_uri("//Bob", use_password=False, overwrite=True, suppress=True)
    ident = Identity.from_wallet(wallet)
    assert ident.hotkey_ss58 == wallet.hotkey.ss58_address
    assert ident.coldkey_ss58 == wallet.coldkeypub.ss58_address
    assert verify(ident.hotkey_ss58, "x", sign(ident.hotkey, "x"))


def test_rejected_addresses_and_signatures_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from shoparena.arena.identity import is_ss58, verify

    with caplog.at_level(logging.DEBUG, logger="shoparena.arena.identity"):
        assert is_ss58("not-an-address") is False
        assert verify("not-an-address", b"m", "00" * 64) is False
    messages = [r.getMessage() for r in caplog.records if r.name == "shoparena.arena.identity"]
    assert len(messages) == 2
    assert "not an SS58 address 'not-an-address'" in messages[0]
    assert "signature check of 'not-an-address' failed" in messages[1]
