"""Signed requests (docs/arena.md §10.1, ORO's ``bittensor-auth`` scheme).

Every mutating request carries ``X-Hotkey``, ``X-Timestamp`` (unix seconds), ``X-Nonce`` and ``X-Signature``,
the hex sr25519 signature of ``"{hotkey}:{timestamp}:{nonce}"``. :class:`RequestVerifier` accepts a request when

1. all four headers are present and well formed (nonce: 1–128 of ``[A-Za-z0-9_-]``)   — else 401;
2. the timestamp is within ±``skew_s`` (60 s) of its clock                            — else 401;
3. the signature verifies against the hotkey                                          — else 401;
4. the hotkey is registered in the metagraph (→ role ``miner``; a validator permit and at least
   ``min_validator_stake`` → role ``validator``)                                        — else 403;
   ``require="validator"`` refuses a non-validator                                    — 403;
5. the (hotkey, nonce) pair was not accepted before                                   — else 401.

Only accepted requests enter the nonce cache; an entry lives until the request could no longer pass the skew
check (``max(now + nonce_ttl_s, timestamp + skew_s)``). The cache is bounded: when full it evicts the entry that
expires first and from then on refuses every timestamp not newer than the evicted one (a replay of an evicted
nonce can never be accepted; a client retries with a fresh timestamp).

The metagraph comes from a provider (``chain.metagraph``), cached for ``refresh_s`` (300 s). When the provider
raises, the cached copy serves until it is ``max_stale_s`` (1200 s) old; after that, or with no copy at all,
every request is refused with 503 (fail closed).
"""

from __future__ import annotations

import heapq
import math
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from shoparena.arena.chain.types import Metagraph
from shoparena.arena.identity import Keypair, is_ss58, verify
from shoparena.clock import Clock
from shoparena.errors import ShopArenaError

__all__ = [
    "HEADER_HOTKEY",
    "HEADER_NONCE",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "AuthError",
    "Caller",
    "RequestVerifier",
    "Role",
    "sign_headers",
    "signing_message",
]

HEADER_HOTKEY, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE = "X-Hotkey", "X-Timestamp", "X-Nonce", "X-Signature"
Role = Literal["miner", "validator"]
_NONCE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class AuthError(ShopArenaError):
    """A refused request: ``status`` is the HTTP status to answer (401, 403 or 503), ``reason`` says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Caller(BaseModel):
    """Who made an accepted request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hotkey: str
    role: Role
    uid: int


def signing_message(hotkey: str, timestamp: str, nonce: str) -> str:
    """The signed text: ``"{hotkey}:{timestamp}:{nonce}"``."""
    return f"{hotkey}:{timestamp}:{nonce}"


def sign_headers(keypair: Keypair, *, clock: Clock, nonce: str | None = None) -> dict[str, str]:
    """The four auth headers for one request, signed by ``keypair`` at ``clock.now()`` (a fresh random nonce
    unless one is given)."""
    hotkey = str(keypair.ss58_address)
    timestamp = str(int(clock.now()))
    nonce = nonce if nonce is not None else secrets.token_hex(16)
    signature = bytes(keypair.sign(signing_message(hotkey, timestamp, nonce).encode("utf-8"))).hex()
    return {HEADER_HOTKEY: hotkey, HEADER_TIMESTAMP: timestamp, HEADER_NONCE: nonce, HEADER_SIGNATURE: signature}


class RequestVerifier:
    """Checks signed headers against a clock, a nonce cache and the metagraph (thread-safe)."""

    def __init__(
        self,
        metagraph: Callable[[], Metagraph],
        *,
        clock: Clock,
        skew_s: float = 60.0,
        nonce_ttl_s: float | None = None,
        max_nonces: int = 65536,
        min_validator_stake: float = 0.0,
        refresh_s: float = 300.0,
        max_stale_s: float = 1200.0,
    ) -> None:
        if max_nonces < 1:
            raise ValueError("max_nonces must be at least 1")
        self._provider = metagraph
        self.clock = clock
        self.skew_s = float(skew_s)
        self.nonce_ttl_s = float(skew_s if nonce_ttl_s is None else nonce_ttl_s)
        self.max_nonces = max_nonces
        self.min_validator_stake = float(min_validator_stake)
        self.refresh_s = float(refresh_s)
        self.max_stale_s = float(max_stale_s)
        self._lock = threading.Lock()
        self._nonces: dict[tuple[str, str], tuple[float, float]] = {}  # key → (expires_at, timestamp)
        self._expiry: list[tuple[float, tuple[str, str]]] = []
        self._floor = -math.inf  # timestamps ≤ floor are refused after an overflow eviction
        self._cached: Metagraph | None = None
        self._fetched_at = -math.inf
        self._force_refresh = False

    # -- metagraph cache -----------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Fetch the metagraph again on the next request (e.g. right after a registration)."""
        with self._lock:
            self._force_refresh = True

    def current_metagraph(self) -> Metagraph:
        """The cached metagraph, refreshed when older than ``refresh_s``; 503 when unavailable or too stale."""
        now = self.clock.now()
        with self._lock:
            cached, fetched_at, force = self._cached, self._fetched_at, self._force_refresh
        if cached is not None and not force and now - fetched_at < self.refresh_s:
            return cached
        try:
            fresh = self._provider()
        except Exception as e:
            if cached is not None and now - fetched_at <= self.max_stale_s:
                return cached
            raise AuthError(503, "metagraph unavailable: refusing requests until it can be read") from e
        with self._lock:
            self._cached, self._fetched_at, self._force_refresh = fresh, now, False
        return fresh

    # -- verification --------------------------------------------------------------------------------------
    def verify(self, headers: Mapping[str, str], *, require: Role | None = None) -> Caller:
        """The caller of a request with these headers, or :class:`AuthError` (see the module docstring)."""
        h = {str(k).lower(): str(v) for k, v in headers.items()}
        try:
            hotkey, ts_raw, nonce, signature = (
                h[name.lower()] for name in (HEADER_HOTKEY, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)
            )
        except KeyError as e:
            raise AuthError(401, f"missing header {e.args[0]}") from None
        if not _NONCE.match(nonce):
            raise AuthError(401, "malformed nonce")
        try:
            timestamp = float(ts_raw)
        except ValueError:
            raise AuthError(401, "malformed timestamp") from None
        now = self.clock.now()
        if not math.isfinite(timestamp) or abs(now - timestamp) > self.skew_s:
            raise AuthError(401, f"timestamp outside the ±{self.skew_s:g} s window")
        if not is_ss58(hotkey):
            raise AuthError(401, "malformed hotkey")
        if not verify(hotkey, signing_message(hotkey, ts_raw, nonce), signature):
            raise AuthError(401, "invalid signature")

        mg = self.current_metagraph()
        uid = mg.uid_of(hotkey)
        if uid is None:
            raise AuthError(403, "hotkey not registered on the subnet")
        role: Role = "validator" if mg.is_validator(hotkey, self.min_validator_stake) else "miner"
        if require == "validator" and role != "validator":
            raise AuthError(403, "validator permit and minimum stake required")

        self._accept_nonce(hotkey, nonce, timestamp, now)
        return Caller(hotkey=hotkey, role=role, uid=uid)

    def _accept_nonce(self, hotkey: str, nonce: str, timestamp: float, now: float) -> None:
        key = (hotkey, nonce)
        with self._lock:
            while self._expiry and self._expiry[0][0] <= now:  # forget what can no longer pass the skew check
                _, old = heapq.heappop(self._expiry)
                if old in self._nonces and self._nonces[old][0] <= now:
                    del self._nonces[old]
            if key in self._nonces:
                raise AuthError(401, "replayed nonce")
            if timestamp <= self._floor:
                raise AuthError(401, "nonce cache overflow: retry with a fresh timestamp")
            while len(self._nonces) >= self.max_nonces:
                _, old = heapq.heappop(self._expiry)
                if old in self._nonces:
                    self._floor = max(self._floor, self._nonces.pop(old)[1])
            if timestamp <= self._floor:
                raise AuthError(401, "nonce cache overflow: retry with a fresh timestamp")
            expires = max(now + self.nonce_ttl_s, timestamp + self.skew_s)
            self._nonces[key] = (expires, timestamp)
            heapq.heappush(self._expiry, (expires, key))
