"""Runs: per-run capability tokens, request limits and the state the gateway keeps for each open run.

``open`` mints a random token (32 bytes, url-safe) for a run; every request carries it as
``Authorization: Bearer <token>``. ``close`` freezes the run: its token stops working (401) and its log is
returned sorted by ``seq``. Limits are data (:class:`Limits`); the defaults are ORO's proxy rules (30 requests/s
with a burst of 50, bodies ≤ 10 MB) plus per-run call and token budgets.

Thread model: the HTTP handlers run on the server's event-loop thread; ``open`` / ``close`` / snapshots may come
from any thread. The registry's dicts are guarded by one lock, each run's counters and log by its own lock (held
for microseconds, never across an await).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from shoparena.clock import Clock, SystemClock
from shoparena.errors import ConfigError
from shoparena.llm.gateway.attribution import Attributor
from shoparena.llm.gateway.calllog import CallRecord

__all__ = ["BUDGET_SPENT", "Limits", "Refusal", "RunHandle", "RunRegistry", "RunState"]

MB = 1024 * 1024
BUDGET_SPENT = "completion token budget spent"
"""How the refusal of a run's completion-token budget begins (its call record's ``error``): the validator reads a
run that met it as timed out (:func:`shoparena.validator.core.budget_timeout`)."""


class Limits(BaseModel):
    """Per-run request limits. ``None`` = unlimited. Exceeding a count, budget or rate answers 429; a larger
    body answers 413."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_search_calls: int | None = Field(default=2000, ge=0)
    """Search calls answered (status 200) per run."""
    max_inference_calls: int | None = Field(default=200, ge=0)
    """Inference calls accepted per run."""
    max_completion_tokens: int | None = Field(default=500_000, ge=0)
    """Completion tokens per run (as backends report them); a request's ``max_tokens`` is clamped to what is
    left, and a request arriving with nothing left gets 429."""
    rate_per_s: float | None = Field(default=30.0, gt=0)
    """Token-bucket refill rate over all of a run's requests (ORO's proxy: 30 r/s)."""
    burst: int = Field(default=50, ge=1)
    """Token-bucket size (ORO's proxy: burst 50)."""
    max_body_bytes: int = Field(default=10 * MB, ge=0)
    """Largest request body (ORO's proxy: 10 MB)."""

    @classmethod
    def unlimited(cls) -> Limits:
        """No counts, budgets or rate limit (benchmarks, trusted in-process use); the body cap stays."""
        return cls(max_search_calls=None, max_inference_calls=None, max_completion_tokens=None, rate_per_s=None)


class RunHandle(BaseModel):
    """What :meth:`Gateway.open_run` gives the caller: the run's identity, token, allowlist and limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    token: str = Field(repr=False)
    """Capability token: pass it to the agent as ``SHOPARENA_RUN_TOKEN``; never log it."""
    problem_id: str | None = None
    models: tuple[str, ...] | None = None
    """Models this run may call; None = the gateway's allowlist."""
    limits: Limits

    def sdk_env(self, address: str, model: str | None = None) -> dict[str, str]:
        """Environment variables configuring :mod:`shoparena.sdk` for this run (``address``: ``http://host:port``
        or ``unix:/path.sock``; ``model``: the default model, else the run's first allowed model)."""
        env = {"SHOPARENA_GATEWAY": address, "SHOPARENA_RUN_TOKEN": self.token}
        default = model or (self.models[0] if self.models else None)
        if default:
            env["SHOPARENA_MODEL"] = default
        return env


class Refusal(NamedTuple):
    """Why :meth:`RunState.admit` refused a call; ``retry_after`` (seconds) only for the rate limit, which a
    well-behaved client waits out (the other limits are final for the run)."""

    message: str
    retry_after: float | None = None


class RunState:
    """Mutable state of one open run (counters, rate bucket, attribution, log)."""

    __slots__ = ("_seq", "allowed", "attributor", "clock", "closed_event", "completion_tokens", "handle",
                 "inference_calls", "limits", "lock", "records", "search_calls", "tokens", "tokens_at")

    def __init__(self, handle: RunHandle, allowed: frozenset[str] | None, clock: Clock | None = None) -> None:
        self.handle = handle
        self.clock: Clock = clock or SystemClock()
        """What the rate bucket reads time from (a :class:`~shoparena.clock.ManualClock` in tests)."""
        self.limits = handle.limits
        self.allowed = allowed
        self.lock = threading.Lock()
        self.attributor = Attributor()
        self.records: list[CallRecord] = []
        self.closed_event = threading.Event()
        """Set when the run closes: generations still running for it stop (:mod:`shoparena.llm.abandon`)."""
        self._seq = 0
        self.search_calls = self.inference_calls = self.completion_tokens = 0
        self.tokens = float(handle.limits.burst)
        self.tokens_at = self.clock.now()

    @property
    def closed(self) -> bool:
        """Whether the run has closed (set under ``lock`` by :meth:`RunRegistry.close`)."""
        return self.closed_event.is_set()

    def next_seq(self) -> int:
        with self.lock:
            seq = self._seq
            self._seq += 1
            return seq

    def admit(self, kind: str) -> Refusal | None:
        """Apply the rate limit and ``kind``'s count / budget limits; count the call. Returns why the call is
        refused (answered 429), or None. An admitted inference request closes the composite-tool windows."""
        limits = self.limits
        with self.lock:
            if limits.rate_per_s is not None:
                now = self.clock.now()
                elapsed = max(0.0, now - self.tokens_at)  # a wall clock stepped back refills nothing
                self.tokens = min(float(limits.burst), self.tokens + elapsed * limits.rate_per_s)
                self.tokens_at = now
                if self.tokens < 1.0:
                    return Refusal(f"rate limit: at most {limits.rate_per_s:g} requests/s (burst {limits.burst}) "
                                   "per run", (1.0 - self.tokens) / limits.rate_per_s)
                self.tokens -= 1.0
            if kind == "search":
                if limits.max_search_calls is not None and self.search_calls >= limits.max_search_calls:
                    return Refusal(f"search call limit reached ({limits.max_search_calls} per run)")
                self.search_calls += 1
            elif kind == "inference":
                if limits.max_inference_calls is not None and self.inference_calls >= limits.max_inference_calls:
                    return Refusal(f"inference call limit reached ({limits.max_inference_calls} per run)")
                if (limits.max_completion_tokens is not None
                        and self.completion_tokens >= limits.max_completion_tokens):
                    return Refusal(f"{BUDGET_SPENT} ({limits.max_completion_tokens} per run)")
                self.inference_calls += 1
                self.attributor.on_inference_request()
            return None

    def tokens_left(self) -> int | None:
        budget = self.limits.max_completion_tokens
        return None if budget is None else max(0, budget - self.completion_tokens)

    def append(self, record: CallRecord) -> bool:
        """Add a record; False when the run was closed meanwhile (the caller logs it as an orphan)."""
        with self.lock:
            if self.closed:
                return False
            self.records.append(record)
            return True

    def snapshot(self) -> list[CallRecord]:
        with self.lock:
            return sorted(self.records, key=lambda r: r.seq)


class RunRegistry:
    """Open runs by token, plus the most recently closed tokens (so a late request is logged against its run)."""

    def __init__(self, *, allowed_models: frozenset[str] | None, limits: Limits,
                 remember_closed: int = 100_000, clock: Clock | None = None) -> None:
        self.allowed_models = allowed_models
        self.limits = limits
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._open: dict[str, RunState] = {}
        self._open_ids: set[str] = set()
        self._closed: OrderedDict[str, str] = OrderedDict()
        self._remember_closed = remember_closed

    def open(self, run_id: str, *, problem_id: str | None = None, models: Any = None,
             limits: Limits | None = None) -> RunHandle:
        if not run_id:
            raise ConfigError("a run needs a non-empty run_id")
        wanted = tuple(models) if models is not None else None
        if wanted is not None and self.allowed_models is not None:
            extra = sorted(set(wanted) - self.allowed_models)
            if extra:
                raise ConfigError(f"run {run_id!r} asks for models outside the gateway allowlist: {extra}",
                                  hint=f"allowed: {sorted(self.allowed_models)}")
        allowed = frozenset(wanted) if wanted is not None else self.allowed_models
        handle = RunHandle(run_id=run_id, token=secrets.token_urlsafe(32), problem_id=problem_id, models=wanted,
                           limits=limits or self.limits)
        with self._lock:
            if run_id in self._open_ids:
                raise ConfigError(f"run {run_id!r} is already open", hint="close it first or use another run_id")
            self._open_ids.add(run_id)
            self._open[handle.token] = RunState(handle, allowed, self.clock)
        return handle

    def get(self, token: str) -> RunState | None:
        return self._open.get(token)

    def closed_run_id(self, token: str) -> str | None:
        with self._lock:
            return self._closed.get(token)

    def state(self, token: str) -> RunState:
        state = self._open.get(token)
        if state is None:
            raise ConfigError("no open run has this token")
        return state

    def close(self, token: str) -> list[CallRecord]:
        with self._lock:
            state = self._open.pop(token, None)
            if state is None:
                raise ConfigError("no open run has this token", hint="was the run already closed?")
            self._open_ids.discard(state.handle.run_id)
            self._closed[token] = state.handle.run_id
            while len(self._closed) > self._remember_closed:
                self._closed.popitem(last=False)
        with state.lock:
            state.closed_event.set()
            return sorted(state.records, key=lambda r: r.seq)

    def open_runs(self) -> list[RunHandle]:
        with self._lock:
            return [s.handle for s in self._open.values()]
