"""A pool of long-lived worker processes that run ``agent_main`` calls, each with its own deadline.

One process per call would cost an interpreter start per problem; a plain process pool cannot kill one stuck call.
Each worker here owns a pipe: the parent hands it ``(agent file, problem, env)``, the worker sets the environment
(gateway address, run token, sampling) and calls ``agent_main``. A call past its deadline gets its worker killed
(TERM, then KILL) and replaced; the call is reported ``TIMED_OUT``. An exception in the agent is ``FAILED`` with
its type and message. Workers use the ``spawn`` start method, so they inherit no state from the parent.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["AgentCall", "AgentResult", "WorkerPool"]


@dataclass(frozen=True)
class AgentCall:
    """One ``agent_main`` invocation: which file, which (sanitised) problem, which environment."""

    key: Any
    agent_file: str
    problem: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentResult:
    key: Any
    status: str
    """``SUCCESS``, ``FAILED`` or ``TIMED_OUT`` (the ORO envelope statuses)."""
    steps: list[dict[str, Any]] | None
    error: dict[str, str] | None
    seconds: float


def _worker(conn: Connection) -> None:
    from shoparena.agents.loading import load_agent

    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        agent_file, problem, env = task
        os.environ.update(env)
        t0 = time.perf_counter()
        try:
            steps = load_agent(agent_file).agent_main(problem)
            if not isinstance(steps, list):
                raise TypeError(f"agent_main returned {type(steps).__name__}, not a list of steps")
            conn.send(("SUCCESS", steps, None, time.perf_counter() - t0))
        except Exception as exc:  # the agent's failure is data, not the worker's
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            conn.send(("FAILED", None, {"type": type(exc).__name__, "message": detail[:2000]},
                       time.perf_counter() - t0))


class WorkerPool:
    """``size`` worker processes; :meth:`run` yields results as calls finish (any order)."""

    def __init__(self, size: int, *, timeout_s: float = 300.0, base_env: dict[str, str] | None = None) -> None:
        self.size = max(1, size)
        self.timeout_s = timeout_s
        self.base_env = dict(base_env or {})
        self._ctx = mp.get_context("spawn")
        self._workers: list[tuple[Any, Connection]] = [self._spawn() for _ in range(self.size)]

    def _spawn(self) -> tuple[Any, Connection]:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def run(self, calls: Iterable[AgentCall], on_start: Callable[[AgentCall], None] | None = None
            ) -> Iterator[AgentResult]:
        pending = deque(calls)
        busy: dict[int, tuple[AgentCall, float]] = {}
        idle = list(range(self.size))
        while pending or busy:
            while idle and pending:
                slot = idle.pop()
                call = pending.popleft()
                if on_start is not None:
                    on_start(call)
                self._workers[slot][1].send((call.agent_file, call.problem, {**self.base_env, **call.env}))
                busy[slot] = (call, time.monotonic())
            conns = {self._workers[slot][1]: slot for slot in busy}
            ready = wait(list(conns), timeout=0.5)
            for conn in ready:
                slot = conns[conn]  # type: ignore[index]
                call, _ = busy.pop(slot)
                try:
                    status, steps, error, seconds = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    status, steps, error, seconds = "FAILED", None, {"type": "WorkerDied",
                                                                      "message": "the agent process exited"}, 0.0
                    self._replace(slot)
                idle.append(slot)
                yield AgentResult(call.key, status, steps, error, seconds)
            now = time.monotonic()
            for slot, (call, started) in list(busy.items()):
                if now - started > self.timeout_s:
                    busy.pop(slot)
                    self._replace(slot)
                    idle.append(slot)
                    yield AgentResult(call.key, "TIMED_OUT", None, {
                        "type": "Timeout", "message": f"agent_main exceeded {self.timeout_s:g} s"}, now - started)

    def _replace(self, slot: int) -> None:
        proc, conn = self._workers[slot]
        proc.terminate()
        proc.join(2)
        if proc.is_alive():
            proc.kill()
            proc.join(2)
        conn.close()
        self._workers[slot] = self._spawn()

    def close(self) -> None:
        for proc, conn in self._workers:
            try:
                conn.send(None)
            except OSError:
                pass
            proc.join(2)
            if proc.is_alive():
                proc.kill()
            conn.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
