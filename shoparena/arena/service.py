"""The arena backend (docs/arena.md §2, §6, §8, §9): one :class:`Arena` over the arena tables in the trajectory store's
database. Miners submit; validators claim leased work, heartbeat, report progress and complete; :meth:`Arena.tick`
reaps lapsed leases and drives the race state machine; the public views respect the score and code embargoes.

    arena = Arena("sqlite:///runs/arena.db", chain=chain, banks=banks, clock=clock)
    result = arena.submit(hotkey, "my-agent", code)          # SubmitResult (ACCEPTED / REJECTED + why)
    arena.tick()                                              # opens race 1, queues qualifying work
    work = arena.claim_work(validator_hotkey)                 # ClaimWork | None
    arena.complete(work.eval_run_id, validator_hotkey, summary)   # EvaluationSummary or CompleteRequest

Everything time-dependent reads ``clock`` (never the wall clock), everything random derives from ``seed`` (None:
race secrets from ``secrets``), so a simulated day runs in seconds and replays exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shoparena.arena.config import ArenaConfig
from shoparena.arena.state import submissions as subs
from shoparena.arena.state import views, work
from shoparena.arena.state.db import ArenaDB
from shoparena.arena.state.ports import Gate, bank_gate, registered_hotkeys
from shoparena.arena.state.racing import RaceContext
from shoparena.arena.state.racing import tick as race_tick
from shoparena.arena.state.schema import weight_submissions
from shoparena.arena.state.types import (
    AgentPublic,
    ClaimWork,
    CompleteRequest,
    CompleteResult,
    Conflict,
    LeaderboardRow,
    ProblemProgress,
    RaceDetail,
    RacePublic,
    Standings,
    SubmitResult,
    SuitePublic,
    TopAgent,
    VersionPublic,
)
from shoparena.clock import Clock, SystemClock

__all__ = ["Arena"]


class Arena:
    """The arena state machine over a database URL (``sqlite:///…``, ``sqlite://``, ``postgresql://…``).

    ``chain``: registration (submit refuses unregistered hotkeys; racers must be registered at close) and the
    race beacon; None = everyone registered, stand-in beacon. ``banks``: ``draw("open" | "held_out", n, seed)``
    (+ ``static_suites()`` for a static qualifying suite). ``gate``: ``gate(code, released) -> GateReport``;
    default: ``arena.gate.check_submission`` against every bank's phrases and product ids."""

    def __init__(self, url: str, *, chain: Any = None, banks: Any = None, clock: Clock | None = None,
                 config: ArenaConfig | None = None, gate: Gate | None = None, seed: int | None = None,
                 migrate: bool = True) -> None:
        self.config = config or ArenaConfig()
        self.clock: Clock = clock or SystemClock()
        self.chain = chain
        self.banks = banks
        self.seed = seed
        self.gate: Gate = gate or bank_gate(banks)
        self.db = ArenaDB(url, migrate=migrate)
        self._ctx = RaceContext(config=self.config, banks=banks, chain=chain, seed=seed)

    @property
    def url(self) -> str:
        return self.db.url

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def now(self) -> float:
        return self.clock.now()

    # -- miners ------------------------------------------------------------------------------------------------
    def submit(self, hotkey: str, agent_name: str, code: str | bytes) -> SubmitResult:
        """Gate + cooldown + new version. Refusals are results (``admission_status`` REJECTED with the reason:
        COOLDOWN with ``remaining_seconds``, INVALID_FILE with ``violations``, …), never exceptions."""
        data = code.encode("utf-8") if isinstance(code, str) else bytes(code)
        return subs.submit(self.db, hotkey=hotkey, agent_name=agent_name, code=data, now=self.now(),
                           config=self.config, gate=self.gate, registered=registered_hotkeys(self.chain))

    def agents(self, hotkey: str) -> list[AgentPublic]:
        return self.db.read(lambda c: views.agents_of(c, hotkey))

    def versions(self, hotkey: str, agent_id: str) -> list[VersionPublic]:
        return self.db.read(lambda c: views.versions_of(c, hotkey, agent_id))

    def pin(self, hotkey: str, agent_version_id: str | None) -> None:
        """Choose the hotkey's racer for the next race close (None: back to its best version). Raises
        :class:`Conflict` with ORO's refusal reason."""
        now = self.now()
        reason = self.db.write(lambda c: subs.pin(c, hotkey, agent_version_id, now, self.config))
        if reason is not None:
            raise Conflict(reason)

    # -- validators --------------------------------------------------------------------------------------------
    def claim_work(self, validator: str) -> ClaimWork | None:
        now = self.now()
        return self.db.write(lambda c: work.claim(c, validator, now, self.config))

    def heartbeat(self, eval_run_id: str, validator: str) -> float:
        """Renew the lease; returns the new ``lease_expires_at`` (:class:`LeaseExpired` once it lapsed)."""
        now = self.now()
        return self.db.write(lambda c: work.heartbeat(c, eval_run_id, validator, now, self.config))

    def progress(self, eval_run_id: str, validator: str, updates: Sequence[ProblemProgress]) -> int:
        now = self.now()
        return self.db.write(lambda c: work.progress(c, eval_run_id, validator, list(updates), now))

    def complete(self, eval_run_id: str, validator: str, result: CompleteRequest | Any) -> CompleteResult:
        """Record a run from its ``CompleteRequest`` or the validator's ``EvaluationSummary``."""
        req = result if isinstance(result, CompleteRequest) else CompleteRequest.from_summary(result)
        now = self.now()
        return self.db.write(lambda c: work.complete(c, eval_run_id, validator, req, now, self.config))

    def agent_code(self, eval_run_id: str, validator: str) -> dict[str, Any]:
        now = self.now()
        return self.db.write(lambda c: views.run_agent(c, eval_run_id, validator, now))

    def run_problems(self, eval_run_id: str, validator: str) -> dict[str, Any]:
        now = self.now()
        return self.db.write(lambda c: views.run_problems(c, eval_run_id, validator, now))

    def record_weights(self, validator: str, *, uids: Sequence[int], weights: Sequence[int], ok: bool,
                       reason: str = "", block: int | None = None, race_id: str | None = None) -> None:
        """Keep what a validator set on chain (for audits and the simulation summary)."""
        now = self.now()
        self.db.write(lambda c: c.execute(weight_submissions.insert().values(
            validator_hotkey=validator, race_id=race_id, block=block, uids=list(uids), weights=list(weights),
            ok=ok, reason=reason, at=now)))

    def record_epoch(self, *, epoch: int, block: int, emission: dict[str, float], owner: float) -> None:
        """Keep one chain epoch's payout (an ``EPOCH`` event: emission per hotkey, the owner's cut), so the pages
        can plot emissions over time without the chain."""
        from shoparena.arena.state.db import event

        now = self.now()
        self.db.write(lambda c: event(c, now, "EPOCH", "chain", str(epoch), epoch=epoch, block=block,
                                      emission={k: round(float(v), 9) for k, v in emission.items()},
                                      owner=round(float(owner), 9)))

    # -- the race clock ----------------------------------------------------------------------------------------
    def tick(self) -> list[str]:
        """Reap lapsed leases and apply every race transition due now; returns what happened."""
        now = self.now()
        return self.db.write(lambda c: race_tick(c, now, self._ctx))

    # -- public views ------------------------------------------------------------------------------------------
    def leaderboard(self) -> list[LeaderboardRow]:
        return self.db.read(views.leaderboard)

    def races(self, limit: int = 50) -> list[RacePublic]:
        return self.db.read(lambda c: views.race_list(c, limit))

    def race(self, race_id: str) -> RaceDetail:
        return self.db.read(lambda c: views.race_detail(c, race_id))

    def top_agent(self) -> TopAgent | None:
        now = self.now()
        return self.db.read(lambda c: views.top_agent(c, now, self.config))

    def standings(self) -> Standings | None:
        """The newest completed race's finishers for the weight rule; None until a race completes."""
        return self.db.read(views.standings)

    def suites(self) -> list[SuitePublic]:
        return self.db.read(views.suite_list)
