"""Abandoning generations nobody will read: when a run closes (its agent finished, or was killed at its clock),
the answers still being generated for it, or still waiting for the model, are dropped.

Why: a backend that serves one generation at a time (``hf:``) or a few (``llamacpp:`` slots) otherwise keeps
working for a killed agent: when several episodes of one problem (rejection sampling draws k of them) share one
``hf:`` model under a per-problem clock, their queued requests keep the model busy long after the last agent is
gone, and under a ``llamacpp:`` evaluation a timed-out episode's last turn holds a slot the next episodes wait
for.

How: the gateway sets :data:`ABANDON` to the run's closed event around a backend call (:func:`abandon_when`).
A context variable follows ``asyncio.to_thread`` into the backend's worker thread, so the backend needs no new
argument: before it takes the model it calls :func:`check_abandoned`, and while it generates it stops once
:func:`abandoned` is true, raising :class:`Abandoned` rather than returning a cut answer as if it were whole.
Callers outside the gateway (training's rollouts, ``shoparena serve``) never set it and see no change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ABANDON", "Abandoned", "abandon_when", "abandoned", "check_abandoned"]

ABANDON: ContextVar[threading.Event | None] = ContextVar("shoparena_abandon", default=None)
"""The event that, once set, means the requester is gone (None: generate to the end, the default)."""


class Abandoned(Exception):
    """The generation was dropped because its run closed first."""


def abandoned() -> bool:
    """True once the current request's run has closed."""
    event = ABANDON.get()
    return event is not None and event.is_set()


def check_abandoned() -> None:
    """Raise :class:`Abandoned` when the current request's run has closed."""
    if abandoned():
        raise Abandoned("the run closed before its answer was generated")


@contextmanager
def abandon_when(event: threading.Event) -> Iterator[None]:
    """Within the block (and the threads ``asyncio.to_thread`` starts from it), generation stops once ``event`` is
    set."""
    token = ABANDON.set(event)
    try:
        yield
    finally:
        ABANDON.reset(token)
