"""Miner and validator identities: real sr25519 keypairs from ``bittensor-wallet``, SS58 format 42 (docs/arena.md §10.1).

A hotkey signs requests and owns a uid; a coldkey owns the stake. Simulations and tests use *dev keypairs*: a
32-byte seed derived with BLAKE2b from ``(name, seed)`` so the same name and seed give the same SS58 address on
every machine. Production identities come from a ``bittensor_wallet.Wallet`` on disk (:meth:`Identity.from_wallet`).
Nothing here raises on a bad signature or address: :func:`verify` and :func:`is_ss58` answer ``False``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from bittensor_wallet import Keypair

__all__ = [
    "Identity",
    "Keypair",
    "dev_keypair",
    "is_ss58",
    "new_identity",
    "public_keypair",
    "sign",
    "verify",
]

_DOMAIN = b"shoparena/dev-keypair/v1"
_log = logging.getLogger(__name__)


def _dev_seed(name: str, seed: int) -> str:
    h = hashlib.blake2b(digest_size=32, person=b"shoparena-dev")
    h.update(_DOMAIN + b"\x00" + name.encode("utf-8") + b"\x00" + str(int(seed)).encode("ascii"))
    return "0x" + h.hexdigest()


def dev_keypair(name: str, seed: int = 0) -> Keypair:
    """A deterministic sr25519 keypair for ``(name, seed)`` (development and simulation only: anyone who knows
    the name and seed can sign as it)."""
    return Keypair.create_from_seed(_dev_seed(name, seed))


def public_keypair(ss58_address: str) -> Keypair:
    """A verify-only keypair for an SS58 address; raises ``ValueError`` on a malformed address."""
    return Keypair(ss58_address=ss58_address)


def is_ss58(address: str) -> bool:
    """Whether ``address`` is a well-formed SS58 address."""
    try:
        public_keypair(address)
    except Exception as exc:  # the wallet library raises several kinds on a malformed address
        _log.debug("not an SS58 address %.80r: %s: %s", address, type(exc).__name__, exc)
        return False
    return True


def _as_bytes(message: bytes | str) -> bytes:
    return message.encode("utf-8") if isinstance(message, str) else bytes(message)


def sign(keypair: Keypair, message: bytes | str) -> str:
    """The sr25519 signature of ``message`` as lowercase hex (no ``0x``)."""
    return bytes(keypair.sign(_as_bytes(message))).hex()


def verify(ss58_address: str, message: bytes | str, signature_hex: str) -> bool:
    """Whether ``signature_hex`` (hex, optional ``0x``) is ``ss58_address``'s signature of ``message``.

    Never raises: a malformed address or signature is simply not valid."""
    try:
        sig = bytes.fromhex(signature_hex.removeprefix("0x"))
        if len(sig) != 64:
            return False
        return bool(public_keypair(ss58_address).verify(_as_bytes(message), sig))
    except Exception as exc:  # a malformed address or signature is simply not valid
        _log.debug("signature check of %.80r failed: %s: %s", ss58_address, type(exc).__name__, exc)
        return False


@dataclass(frozen=True, eq=False)
class Identity:
    """A participant: the hotkey signs and owns the uid, the coldkey owns the stake.

    ``coldkey`` may be verify-only (a wallet's ``coldkeypub``); only the hotkey is needed to sign requests."""

    hotkey: Keypair
    coldkey: Keypair
    name: str = ""

    @property
    def hotkey_ss58(self) -> str:
        return str(self.hotkey.ss58_address)

    @property
    def coldkey_ss58(self) -> str:
        return str(self.coldkey.ss58_address)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Identity)
            and other.hotkey_ss58 == self.hotkey_ss58
            and other.coldkey_ss58 == self.coldkey_ss58
        )

    def __hash__(self) -> int:
        return hash((self.hotkey_ss58, self.coldkey_ss58))

    def __repr__(self) -> str:
        return f"Identity(name={self.name!r}, hotkey={self.hotkey_ss58}, coldkey={self.coldkey_ss58})"

    @classmethod
    def from_wallet(cls, wallet: Any) -> Identity:
        """The identity of a ``bittensor_wallet.Wallet`` (hotkey unlocked, coldkey public only)."""
        return cls(hotkey=wallet.hotkey, coldkey=wallet.coldkeypub, name=str(getattr(wallet, "name", "")))


def new_identity(name: str, seed: int = 0) -> Identity:
    """A deterministic dev identity: hotkey and coldkey derived from ``(name/hotkey, seed)`` and
    ``(name/coldkey, seed)``."""
    return Identity(
        hotkey=dev_keypair(f"{name}/hotkey", seed), coldkey=dev_keypair(f"{name}/coldkey", seed), name=name
    )
