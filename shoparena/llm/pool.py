"""One model served by several OpenAI-compatible replicas, as one chat backend: least outstanding work, failover.

``openai:<base_url>/<model>?replica=<base_url>&replica=…`` (the URI form is in :mod:`shoparena.llm.openai_backend`)
resolves to a :class:`PooledOpenAIBackend`: one :class:`~shoparena.llm.openai_backend.OpenAIBackend` per replica
(its own client, timeouts, retries and total bound), and in front of them:

- **Spreading**: each call goes to the live replica with the fewest calls in flight from this pool; ties go round
  robin, so equal replicas take turns and a slow one is given less.
- **Failover**: a replica that fails a call (no connection, connection reset, a timeout, the per-call total bound,
  an answer that is not a chat completion, or a 5xx / 408 / 409 / 429 after the client's own retries) is left out
  for a cool-off period (``cooloff``, default :data:`DEFAULT_COOLOFF_S`) and the call is sent to another replica.
  Each replica is tried at most once per call, so a call takes at most one replica's total bound per replica.
- **Recovery**: once its cool-off is over, a replica is probed (``GET <base_url>/models``, any answer below 500
  within ``probe_timeout``) in the background while calls go elsewhere, and used again when the probe passes;
  a failed probe starts another cool-off. When no replica is live, the call probes every replica it has not tried
  yet, at once, rather than fail while one may be back.
- **Nothing made up**: a call returns a real answer from one replica or raises
  :class:`~shoparena.llm.wire.BackendError` naming every replica and what it last did wrong. An answer that is the
  request's fault (400, 401, 403, 404, 413, 422 …) is raised as it is, not tried elsewhere: every replica would
  refuse it the same way.

:meth:`PooledOpenAIBackend.stats` says what each replica did (answers, failures, refusals, whether it is up); the
``shoparena.llm.pool`` logger says when a replica is left out (warning) and when it is back (info), and names the
replica that answered each call at debug level. docs/serving.md shows how to serve replicas and point runs at them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shoparena.env.types import AssistantMessage
from shoparena.errors import ConfigError
from shoparena.llm.openai_backend import OpenAIBackend, env_number
from shoparena.llm.types import Sampling
from shoparena.llm.wire import BackendError

__all__ = ["DEFAULT_COOLOFF_S", "DEFAULT_PROBE_TIMEOUT_S", "PooledOpenAIBackend", "Replica", "replica_at_fault"]

log = logging.getLogger(__name__)

DEFAULT_COOLOFF_S = 30.0
"""Seconds a failed replica is left out before it is probed (``SHOPARENA_OPENAI_COOLOFF`` overrides it)."""
DEFAULT_PROBE_TIMEOUT_S = 5.0
"""Seconds a probe of a left-out replica may take, connection and answer together."""
REPLICA_STATUSES = frozenset({408, 409, 429})
"""4xx statuses that say the server, not the request, failed (timeout, conflict, overload): tried elsewhere."""


def replica_at_fault(exc: BackendError) -> bool:
    """Whether a replica's failure is the server's (no answer, a timeout, a 5xx or a status of
    :data:`REPLICA_STATUSES`), so another replica may answer, rather than the request's (other 4xx)."""
    return exc.status is None or exc.status >= 500 or exc.status in REPLICA_STATUSES


@dataclass(eq=False)
class Replica:
    """One server of a pool and what the pool knows of it."""

    backend: OpenAIBackend
    in_flight: int = 0
    """Calls of this pool on this replica now."""
    answered: int = 0
    """Calls it answered with a chat completion."""
    failed: int = 0
    """Calls it failed (the server's fault: each was tried on another replica)."""
    refused: int = 0
    """Calls it refused for the request's fault (4xx), raised to the caller."""
    down_until: float | None = None
    """While left out: the pool clock's time its cool-off ends (then it is probed). None: up."""
    last_error: str | None = None
    """What it last did wrong (a failed call or probe)."""
    last_status: int | None = None
    """The HTTP status of its last failed call (None: no answer)."""
    probing: bool = False

    @property
    def base_url(self) -> str:
        return self.backend.base_url


class PooledOpenAIBackend:
    """A chat backend over several OpenAI-compatible servers of the same model (module docstring).

    ``base_urls``: each replica's base URL (``…/v1``); ``model``: the name every replica serves; ``cooloff``:
    seconds a failed replica is left out (None: ``SHOPARENA_OPENAI_COOLOFF``, else :data:`DEFAULT_COOLOFF_S`);
    ``probe_timeout``: seconds a probe may take; ``clock``: what cool-offs are measured on; ``backend_options``:
    passed to each replica's :class:`~shoparena.llm.openai_backend.OpenAIBackend` (``timeout``, ``max_retries``,
    ``total_timeout`` …). Usable from several event loops and threads at once (each replica keeps one client per
    loop; the pool's counts are guarded by a lock).
    """

    def __init__(self, base_urls: Sequence[str], model: str, *, cooloff: float | None = None,
                 probe_timeout: float = DEFAULT_PROBE_TIMEOUT_S, clock: Callable[[], float] = time.monotonic,
                 **backend_options: Any) -> None:
        urls = [u.rstrip("/") for u in base_urls]
        if not urls:
            raise ConfigError("a replica pool needs at least one base URL",
                              hint="e.g. openai:http://10.0.0.1:8000/v1/MODEL?replica=http://10.0.0.2:8000/v1")
        if len(set(urls)) != len(urls):
            raise ConfigError(f"a replica is named twice in {urls}", hint="name each server once")
        self.name = model
        self.cooloff = cooloff if cooloff is not None else env_number("SHOPARENA_OPENAI_COOLOFF", DEFAULT_COOLOFF_S)
        self.probe_timeout = probe_timeout
        self.replicas = [Replica(OpenAIBackend(u, model, **backend_options)) for u in urls]
        self._clock = clock
        self._lock = threading.Lock()
        self._next = 0
        self._probes: set[asyncio.Task[bool]] = set()

    @property
    def dropped_tool_calls(self) -> int:
        """Tool calls the replicas' answers carried with arguments that were not a JSON object (left out)."""
        return sum(r.backend.dropped_tool_calls for r in self.replicas)

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        tried: list[Replica] = []
        last: BackendError | None = None
        while True:
            replica = self._take(tried)
            if replica is None:
                replica = await self._revive(tried)
                if replica is None:  # chained to the last replica's failure, whose cause says what broke
                    raise self._none_answered(tried) from last
            tried.append(replica)
            try:
                message = await replica.backend.chat(messages, tools, sampling)
            except BackendError as exc:
                if not replica_at_fault(exc):
                    self._release(replica, refused=True)
                    raise
                self._release(replica, error=exc)
                last = exc
                continue
            except BaseException:  # cancelled (the run closed) or a bug: not the replica's fault
                self._release(replica)
                raise
            self._release(replica, answered=True)
            log.debug("%s answered by %s", self.name, replica.base_url)
            return message

    def _take(self, tried: Sequence[Replica]) -> Replica | None:
        """The live replica not in ``tried`` with the fewest calls in flight (ties: round robin), counted as taken;
        starts a background probe of each replica whose cool-off is over. None when no live replica is left."""
        n = len(self.replicas)
        due: list[Replica] = []
        with self._lock:
            now = self._clock()
            best: tuple[int, int] | None = None
            chosen = None
            for i, r in enumerate(self.replicas):
                if r.down_until is not None:
                    if r.down_until <= now and not r.probing:
                        r.probing = True
                        due.append(r)
                    continue
                if r in tried:
                    continue
                key = (r.in_flight, (i - self._next) % n)
                if best is None or key < best:
                    best, chosen = key, r
            if chosen is not None:
                chosen.in_flight += 1
                self._next = (self.replicas.index(chosen) + 1) % n
        for r in due:
            task = asyncio.get_running_loop().create_task(self._probe(r))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)
        return chosen

    async def _revive(self, tried: Sequence[Replica]) -> Replica | None:
        """No live replica is left for this call: probe every one it has not tried, at once, and take one that
        answers (None when none does)."""
        with self._lock:
            waiting = [r for r in self.replicas if r not in tried]
            for r in waiting:
                r.probing = True
        if not waiting:
            return None
        await asyncio.gather(*(self._probe(r) for r in waiting))
        return self._take(tried)

    async def _probe(self, replica: Replica) -> bool:
        """``GET <base_url>/models``: up again when the server answers below 500 within ``probe_timeout``."""
        import openai

        error: str | None = "probe cancelled"
        try:
            await asyncio.wait_for(replica.backend.client().get(
                "/models", cast_to=object, options={"max_retries": 0, "timeout": self.probe_timeout}),
                self.probe_timeout)
            error = None
        except openai.APIStatusError as exc:
            error = f"probe answered {exc.status_code}" if exc.status_code >= 500 else None
        except Exception as exc:  # refused, reset, timed out, closed session …: whatever it is, still down
            error = f"probe failed: {str(exc) or type(exc).__name__}"
        finally:
            with self._lock:
                replica.probing = False
                if error is None:
                    was_down = replica.down_until is not None
                    replica.down_until, replica.last_status = None, None
                else:
                    was_down, replica.down_until, replica.last_error = False, self._clock() + self.cooloff, error
        if was_down:
            log.info("replica %s of %s answers again; back in the pool", replica.base_url, self.name)
        return error is None

    def _release(self, replica: Replica, *, answered: bool = False, refused: bool = False,
                 error: BackendError | None = None) -> None:
        with self._lock:
            replica.in_flight -= 1
            replica.answered += answered
            replica.refused += refused
            if error is None:
                return
            replica.failed += 1
            replica.last_error, replica.last_status = error.message, error.status
            newly = replica.down_until is None
            replica.down_until = self._clock() + self.cooloff
        if newly:
            log.warning("replica %s of %s left out for %g s (calls go to the other replicas): %s",
                        replica.base_url, self.name, self.cooloff, error.message)

    def _none_answered(self, tried: Sequence[Replica]) -> BackendError:
        """The error of a call no replica answered; it carries the status every replica failed it with, if one."""
        with self._lock:
            parts = [f"{r.base_url} ({r.last_error or 'left out'})" for r in self.replicas]
            statuses = {r.last_status for r in tried}
        return BackendError(
            f"no replica of {self.name!r} answered ({len(self.replicas)} tried or probed): " + "; ".join(parts),
            hint=f"start or fix the servers and check their logs; a failed replica is probed again every "
                 f"{self.cooloff:g} s (cooloff= in the URI)",
            status=statuses.pop() if len(statuses) == 1 and len(tried) == len(self.replicas) else None,
        )

    def stats(self) -> list[dict[str, Any]]:
        """Per replica, in the URI's order: ``base_url``, ``up``, ``in_flight``, ``answered``, ``failed``,
        ``refused``, ``last_error``."""
        with self._lock:
            return [{"base_url": r.base_url, "up": r.down_until is None, "in_flight": r.in_flight,
                     "answered": r.answered, "failed": r.failed, "refused": r.refused, "last_error": r.last_error}
                    for r in self.replicas]

    async def aclose(self) -> None:
        """Close every replica's client of the running loop and stop this loop's probes."""
        loop = asyncio.get_running_loop()
        for task in [t for t in self._probes if t.get_loop() is loop]:
            task.cancel()
        for r in self.replicas:
            await r.backend.aclose()

    async def __aenter__(self) -> PooledOpenAIBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"PooledOpenAIBackend({[r.base_url for r in self.replicas]!r}, {self.name!r})"


