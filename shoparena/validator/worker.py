"""A validator's work loop: claim a leased work item, fetch the agent and its problems, evaluate, complete.

The loop only talks to a *work source*: an :class:`~shoparena.arena.client.ArenaClient` (a validator process on
another machine, over the signed HTTP API) or :class:`LocalWork` (the same calls straight into an in-process
:class:`~shoparena.arena.service.Arena`, used by the simulation). That is the whole scale-out story: validators
are independent processes that share nothing but the arena API (and, for records, a store URL). While an
evaluation runs, a heartbeat thread renews the lease, so a slow evaluation keeps its item and a dead validator's
item returns to the queue when its lease lapses.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from shoparena.tasks.types import Problem
from shoparena.validator.core import AgentSpec, EvaluationSummary, ValidatorConfig, evaluate

_log = logging.getLogger(__name__)

__all__ = ["LocalWork", "WorkDone", "WorkSource", "keep_alive", "work_once", "work_until_empty"]


class WorkSource(Protocol):
    """The validator half of the arena API (``ArenaClient`` implements it over HTTP)."""

    def claim(self) -> Any: ...
    def heartbeat(self, eval_run_id: str) -> float: ...
    def agent_code(self, eval_run_id: str) -> dict[str, Any]: ...
    def problems(self, eval_run_id: str) -> list[Problem]: ...
    def complete(self, eval_run_id: str, result: Any) -> Any: ...


class LocalWork:
    """:class:`WorkSource` over an in-process :class:`~shoparena.arena.service.Arena` for one validator."""

    def __init__(self, arena: Any, validator: str) -> None:
        self.arena = arena
        self.validator = validator

    def claim(self) -> Any:
        return self.arena.claim_work(self.validator)

    def heartbeat(self, eval_run_id: str) -> float:
        return float(self.arena.heartbeat(eval_run_id, self.validator))

    def agent_code(self, eval_run_id: str) -> dict[str, Any]:
        return dict(self.arena.agent_code(eval_run_id, self.validator))

    def problems(self, eval_run_id: str) -> list[Problem]:
        return [Problem.model_validate(p) for p in self.arena.run_problems(eval_run_id, self.validator)["problems"]]

    def complete(self, eval_run_id: str, result: Any) -> Any:
        return self.arena.complete(eval_run_id, self.validator, result)


class WorkDone(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    eval_run_id: str
    kind: str
    race_id: str
    agent_version_id: str
    miner_hotkey: str
    summary: EvaluationSummary
    completed: Any
    """The arena's ``CompleteResult``."""


def keep_alive(source: WorkSource, eval_run_id: str, stop: threading.Event, every_s: float) -> None:
    """Renew the lease of ``eval_run_id`` every ``every_s`` seconds until ``stop`` is set. The first failure is
    logged (a warning with the exception) and ends the heartbeats: a lapsed lease is the arena's call, and the
    evaluation still finishes and reports."""
    while not stop.wait(every_s):
        try:
            source.heartbeat(eval_run_id)
        except Exception as exc:
            _log.warning("heartbeat for eval run %s failed (%s: %s); no more heartbeats for it",
                         eval_run_id, type(exc).__name__, exc, exc_info=exc)
            return


def agent_file(agent_dir: Path, agent_version_id: str) -> Path:
    """Where a claimed agent's code is written: a file directly in ``agent_dir`` whatever the arena sent as the
    version id (it is untrusted: ``../x`` or ``/etc/x`` must not name a path), readable by its safe characters and
    kept apart from every other id by a hash of the whole id."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", str(agent_version_id))[:48].strip("_") or "agent"
    digest = hashlib.sha256(str(agent_version_id).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return agent_dir / f"{readable}-{digest}.py"


def work_once(source: WorkSource, catalog: str | Path, store: Any, config: ValidatorConfig, agent_dir: Path, *,
              heartbeat_s: float = 60.0) -> WorkDone | None:
    """Claim and finish one work item; None when the queue is empty."""
    work = source.claim()
    if work is None:
        return None
    code = source.agent_code(work.eval_run_id)
    agent_dir.mkdir(parents=True, exist_ok=True)
    path = agent_file(agent_dir, work.agent_version_id)
    path.write_bytes(code["code"] if isinstance(code["code"], bytes) else str(code["code"]).encode("utf-8"))
    problems = source.problems(work.eval_run_id)
    spec = AgentSpec(path=str(path), agent_id=work.agent_id, agent_version=f"v{work.version_number}",
                     miner_hotkey=work.miner_hotkey)
    stop = threading.Event()
    beater = threading.Thread(target=keep_alive, args=(source, work.eval_run_id, stop, heartbeat_s), daemon=True)
    beater.start()
    try:
        summary = evaluate(spec, problems, catalog, store, config)
    finally:
        stop.set()
        beater.join(timeout=5)
    completed = source.complete(work.eval_run_id, summary)
    return WorkDone(eval_run_id=work.eval_run_id, kind=work.kind, race_id=work.race_id,
                    agent_version_id=work.agent_version_id, miner_hotkey=work.miner_hotkey, summary=summary,
                    completed=completed)


def work_until_empty(source: WorkSource, catalog: str | Path, store: Any, config: ValidatorConfig,
                     agent_dir: Path, *, max_items: int | None = None, idle_s: float = 0.0,
                     poll_s: float = 1.0) -> list[WorkDone]:
    """Work items until the queue stays empty for ``idle_s`` seconds (0: stop at the first empty claim)."""
    done: list[WorkDone] = []
    idle_since: float | None = None
    while max_items is None or len(done) < max_items:
        item = work_once(source, catalog, store, config, agent_dir)
        if item is not None:
            done.append(item)
            idle_since = None
            continue
        now = time.monotonic()
        idle_since = idle_since or now
        if now - idle_since >= idle_s:
            break
        time.sleep(poll_s)
    return done
