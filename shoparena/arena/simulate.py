"""``shoparena arena simulate``: a whole SN15-style subnet on the embedded default, days in minutes.

The world: a synthetic catalog; a problem pool with leak clusters split into banks (three static suites that are
never drawn or exported, an open bank for qualifying, a held-out race bank, rotation each day); a
:class:`~shoparena.arena.chain.LocalChain` with the owner at uid 0, validators with stake and permits, and miners;
the :class:`~shoparena.arena.service.Arena` over the trajectory store's database; a miner population
(:mod:`shoparena.arena.population`) that submits single-file agents through the gate and resubmits improved
versions; validators that claim leased work and run the real validator loop (sandbox → rule score → judge →
append-only records). Simulated time advances in steps on a :class:`ManualClock`: each step the arena ticks (races
open, close, complete, promote), validators drain the work queue, and every ``tempo`` validators set weights from
the newest race's standings and the chain runs an epoch (Yuma consensus, emissions). One validator is flaky: it
abandons its first claim, whose lease then lapses and returns the item to the queue.

``richness_weight`` (paper §9, ``docs/incentives.md``) is the arena's agentic-richness incentive: the arena and
every validator score with it, and teams that respond to incentives (:func:`~shoparena.arena.population.respond`)
redesign when it withholds enough of their score, judged from the richness of their own trajectories the day
before. Each day reports ``axis_a_share`` (trajectories whose searches the model emitted), the design changes, and
the top agent with its held-out ASR (the success rate of its race runs). Weight 0 is today's subnet.

Each day also counts its failed episodes by error kind (:class:`DayOutcomes`), telling the validator's
infrastructure failures — the agent never started: the sandbox itself failed, or (rarely: the sandbox hands
agents the validator's own package, :mod:`shoparena.validator.sandbox.paths`) ``shoparena`` would not import —
from the agents' own
failures (their exceptions, timeouts, a failing model backend). A day whose every episode failed for an
infrastructure reason, or a first day without one usable trajectory, stops the simulation with one error
(:func:`check_day`): the arena exists to produce trajectories, and a day of nothing but sandbox failures would only
hand an empty corpus to the steps after it. Agents that fail some of their tasks, or crash on some, are the arena
working: the day goes on.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shoparena.arena.config import DAY_S, ArenaConfig
from shoparena.arena.population import MinerProfile, agent_source, default_population, respond
from shoparena.clock import ManualClock
from shoparena.errors import BackendError, ConfigError, ShopArenaError
from shoparena.seal import write_json

__all__ = ["DayOutcomes", "SimulationConfig", "SimulationFailed", "SimulationResult", "check_day", "failure_kind",
           "simulate", "store_outcomes"]

ARENA_FILE = "arena.json"
"""Written last into a kept simulation directory: what it is (``shoparena-arena/1``) and its configuration."""

POLICY_MODELS = ("policy:novice", "policy:careful", "policy:expert")


class SimulationConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    miners: int = 12
    validators: int = 3
    days: int = 2
    seed: int = 0
    store: str | None = None
    """Trajectory store URL (the arena tables live in the same database); default: a SQLite file in ``out``."""
    out: str | None = None
    """Working directory (catalog, agent files, the store, and ``banks/`` saved at the end); default: a temporary
    directory, removed afterwards."""
    catalog_size: int = 3000
    problems: int = 450
    """Problems in the rotating banks (clusters of 1 + 2 paraphrases)."""
    qualifying_problems: int = 50
    race_problems: int = 50
    step_s: float = 3600.0
    sandbox: str = "bubblewrap"
    """Falls back to the non-hermetic ``process`` sandbox (and says so) when bubblewrap is missing."""
    judge: str = "rubric"
    workers: int | None = None
    flaky_validator: bool = True
    entrants: list[MinerProfile] = Field(default_factory=list)
    """Miners beside the default population, e.g. a distilled model entered on its ``join_day``
    (``shoparena loop``); their models are added to the validators' gateway allowlist."""
    richness_weight: float = Field(0.0, ge=0.0, le=1.0)
    """The agentic-richness incentive of the arena's score (``ArenaConfig.richness_weight``); 0 = ORO's scoring."""


class DayStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    day: int
    trajectories: int
    evaluations: int
    by_axis: dict[str, int]
    by_bucket: dict[str, int]
    by_status: dict[str, int]
    wall_s: float
    axis_a_share: float = 0.0
    """Share of the day's trajectories whose searches the model emitted (axis ``A``; ``mixed`` is not)."""
    design_changes: int = 0
    """Teams that redesigned that day in response to the score (:func:`~shoparena.arena.population.respond`)."""
    top_agent: str | None = None
    """The miner whose agent is the top agent at the end of the day."""
    top_agent_version: str | None = None
    top_agent_asr: float | None = None
    """The top agent's held-out ASR: the mean success rate of its latest race's runs."""
    eval_runs: list[str] = []
    """The day's evaluation runs (the trajectory records' ``eval_run_id``), in completion order."""
    episodes: int = 0
    """Episodes the day's evaluations ran: its trajectories plus those whose sandbox never reached the agent."""
    failures: dict[str, int] = {}
    """The day's failed episodes by error kind (:func:`failure_kind`: ``ModuleNotFoundError``, ``SandboxError``,
    ``AgentError``, ``Timeout`` …); empty when none failed."""
    infra_failures: int = 0
    """Those of :attr:`failures` that were the validator's infrastructure, not the agent (:func:`failure_kind`)."""


class SimulationResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    config: SimulationConfig
    sandbox: str
    miners: list[dict[str, Any]]
    submissions: list[dict[str, Any]]
    races: list[dict[str, Any]]
    winners: list[dict[str, Any]]
    leaderboard: list[dict[str, Any]]
    versions: list[dict[str, Any]] = []
    """Every submitted version of every miner with its state (the leaderboard lists the ELIGIBLE ones only)."""
    weights: dict[str, Any]
    emissions: dict[str, Any]
    trajectories: dict[str, Any]
    days: list[DayStats]
    events: list[str]
    store: str
    wall_s: float


# ── failed episodes ───────────────────────────────────────────────────────────────────────────────────────────

INFRA_KINDS = frozenset({"SandboxError"})
"""Error kinds that are always the validator's: the sandbox failed around the agent (it did not start, its launch
failed — a missing interpreter among them —, it died), after the fresh sandboxes the validator retries in."""
_IMPORTS = frozenset({"ModuleNotFoundError", "ImportError"})
_PACKAGE = re.compile(r"\bshoparena\b")
_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_EXAMPLE_CHARS = 200


def failure_kind(status: str, error: str | None) -> tuple[str, bool]:
    """``(kind, infrastructure)`` of a failed episode, from its envelope status and the error its record keeps
    (``"Type: message"``, the rule scorer's ``outcome["error"]``). The kind is the error's type (``Timeout`` for a
    ``TIMED_OUT`` episode that names none, ``unknown`` for a failure without an error). Infrastructure: the sandbox
    failed (:data:`INFRA_KINDS`), or the agent could not import the ``shoparena`` package that the sandbox provides
    to every agent (:mod:`shoparena.validator.sandbox.paths`): the validator's installation is at fault, not the
    agent. An agent that imports a package nobody promised it fails on its own."""
    text = (error or "").strip()
    head, _, rest = text.partition(":")
    head = head.strip()
    if _KIND.fullmatch(head):
        kind = head.rsplit(".", 1)[-1]
    else:
        kind, rest = ("Timeout" if status == "TIMED_OUT" else "unknown"), text
    infra = kind in INFRA_KINDS or (kind in _IMPORTS and bool(_PACKAGE.search(rest)))
    return kind, infra


@dataclass
class DayOutcomes:
    """A day's episodes as :func:`check_day` judges them: how many ran, how many left a usable trajectory (the
    envelope ``SUCCESS``: the agent ran and returned its trace, whatever its task's score), and the failed ones by
    error kind, the infrastructure ones apart, with the first error seen of each kind."""

    day: int | None
    """The simulated day (0-based); None for a whole arena's records."""
    episodes: int = 0
    usable: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    infra: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, status: str, error: str | None = None) -> None:
        """One episode with its envelope status and its record's error."""
        if status == "SUCCESS":
            self.add_usable(1)
            return
        self.episodes += 1
        kind, infra = failure_kind(status, error)
        self._failed(kind, infra, error, 1)

    def add_usable(self, n: int) -> None:
        """``n`` episodes that left a usable trajectory."""
        self.episodes += n
        self.usable += n

    def add_unstarted(self, n: int, reason: str | None = None) -> None:
        """``n`` episodes whose sandbox never reached the agent (the validator's ``INFRA_FAILED`` problems, which
        leave no record), with the run's failure reason."""
        self.episodes += n
        self._failed("SandboxError", True, reason, n)

    def _failed(self, kind: str, infra: bool, error: str | None, n: int) -> None:
        if n <= 0:
            return
        self.failures[kind] += n
        if infra:
            self.infra[kind] += n
        if error:
            text = " ".join(str(error).split())
            while text.startswith(f"{kind}: "):  # "Type: Type: message" (the record's type, then the exception's)
                text = text[len(kind) + 2:]
            self.examples.setdefault(kind, text[:_EXAMPLE_CHARS])

    def summary(self) -> str:
        """``"ModuleNotFoundError 4, AgentError 1 (4 infrastructure)"``; empty when nothing failed."""
        if not self.failures:
            return ""
        infra = sum(self.infra.values())
        return ", ".join(f"{k} {n}" for k, n in self.failures.most_common()) + (f" ({infra} infrastructure)"
                                                                                if infra else "")


class SimulationFailed(ShopArenaError):
    """The simulated arena produced nothing to learn from: every episode of a day failed for an infrastructure
    reason, or its first day left no usable trajectory. ``exit_code``: 2 when the validator's installation or
    sandbox is at fault (as for a sandbox that cannot run here), 5 when the model backend failed the agents, 1
    otherwise (README, "Exit codes")."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = 1, day: int | None = None,
                 failures: Mapping[str, int] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code
        self.day = day
        self.failures = dict(failures or {})


def _hint(kind: str, infra: bool) -> str:
    if infra and kind in _IMPORTS:
        return ("agents import the validator's own shoparena inside the sandbox; an import failure there means the "
                "package the validator runs is broken or unreadable to the sandbox: reinstall it (pip install -e . "
                "in the repository) and run again")
    if infra:
        return ("the sandbox could not run the agents here: check that bubblewrap works (bwrap --ro-bind / / true) "
                "or pass --sandbox process (not isolated), and run again")
    if kind == "BackendError":
        return "the model backend failed the agents' inference calls: check the model URIs the agents call"
    return ("the agents failed on their own: read a failed record's outcome.error (shoparena store export) and "
            "check the agents and their models")


def check_day(outcomes: DayOutcomes) -> None:
    """Raise :class:`SimulationFailed` when the day's every episode failed for an infrastructure reason, or when it
    is the first day (0), or a whole arena's records (day None), and left no usable trajectory at all; a day where
    agents failed some episodes, or only some episodes failed for the infrastructure, passes. The error names the dominant kind, its count and its first
    message; the exit code says whose fault it was (:class:`SimulationFailed`)."""
    o = outcomes
    where = f"day {o.day}" if o.day is not None else "the arena"
    infra_n = sum(o.infra.values())
    all_infra = o.episodes > 0 and infra_n == o.episodes
    if not all_infra and not (o.day in (0, None) and o.usable == 0):
        return
    if o.episodes == 0:
        raise SimulationFailed(f"{where} ran no episode: no agent was evaluated", day=o.day, hint=(
            "every submission was refused, or no sandbox started (an episode that never starts leaves no record): "
            "check the miners' submissions and the problem counts (--json), and rerun the simulation to see each "
            "day's failures"))
    kind, n = (o.infra if all_infra else o.failures).most_common(1)[0]
    example = o.examples.get(kind)
    others = [f"{k} {c}" for k, c in o.failures.most_common() if k != kind]
    what = "before their agents ran" if all_infra else "and none left a usable trajectory"
    message = (f"{where}: all {o.episodes} episodes failed {what}: {n} {kind}"
               + (f" ({example})" if example else "") + (f"; also {', '.join(others)}" if others else ""))
    infra = all_infra or kind in o.infra
    code = ConfigError.exit_code if infra else BackendError.exit_code if kind == "BackendError" else 1
    raise SimulationFailed(message, hint=_hint(kind, infra), exit_code=code, day=o.day, failures=o.failures)


def store_outcomes(store: Any, eval_run_ids: Iterable[str] | None = None, *, day: int | None = None
                   ) -> DayOutcomes:
    """The outcomes of the records of ``eval_run_ids`` (each run once; every record of the store when None): the
    usable ones counted, the failed ones' errors read from their bodies."""
    out = DayOutcomes(day=day)
    runs: list[str | None] = list(dict.fromkeys(eval_run_ids)) if eval_run_ids is not None else [None]
    for run in runs:
        where = {} if run is None else {"eval_run_id": run}
        out.add_usable(store.count(status="SUCCESS", **where))
        for record in store.query(status=("FAILED", "TIMED_OUT"), **where):
            out.add(record.status, (record.outcome or {}).get("error"))
    return out


def _world(cfg: SimulationConfig, root: Path) -> tuple[Any, Any, Path]:
    from shoparena.catalog.directory import create_catalog
    from shoparena.catalog.synthetic import generate_catalog
    from shoparena.tasks.banks import BankSet
    from shoparena.tasks.generator import generate_problems

    index = create_catalog(generate_catalog(cfg.catalog_size, cfg.seed), root / "catalog")
    pool = generate_problems(index, n=cfg.problems + 90, seed=cfg.seed, paraphrases=2)
    suites = {f"static-v{i + 1}": [p for p in pool[-90:] if p.variant in (None, "base")][i * 10:(i + 1) * 10]
              for i in range(3)}
    static_ids = {p.problem_id for s in suites.values() for p in s}
    banks = BankSet.build([p for p in pool if p.problem_id not in static_ids], static=suites, seed=cfg.seed)
    return index, banks, root / "catalog"


def simulate(cfg: SimulationConfig, progress: Callable[[str], None] | None = None) -> SimulationResult:
    """Run the subnet for ``cfg.days`` simulated days; returns the leaderboard, races, weights, emissions and the
    trajectory firehose statistics."""
    from shoparena.arena.chain import Hyperparameters, LocalChain
    from shoparena.arena.identity import new_identity
    from shoparena.arena.service import Arena
    from shoparena.arena.weights import build_weights
    from shoparena.store import open_store
    from shoparena.validator.core import ValidatorConfig
    from shoparena.validator.worker import LocalWork, work_once

    t_start = time.perf_counter()
    say = progress or (lambda _m: None)
    root = Path(cfg.out) if cfg.out else Path(tempfile.mkdtemp(prefix="shoparena-sim-"))
    root.mkdir(parents=True, exist_ok=True)
    store_url = cfg.store or f"sqlite:///{(root / 'subnet.db').resolve()}"
    _index, banks, catalog = _world(cfg, root)
    say(f"world: {cfg.catalog_size} products, {len(banks.all_problems())} problems, banks {banks.sizes()}")

    clock = ManualClock()
    chain = LocalChain(Hyperparameters(tempo=360, immunity_period=5000, weights_rate_limit=100,
                                       max_allowed_validators=max(8, cfg.validators)), seed=cfg.seed)
    owner = new_identity("owner", cfg.seed)
    chain.register(owner.hotkey_ss58, owner.coldkey_ss58)
    validators = [new_identity(f"validator-{i}", cfg.seed) for i in range(cfg.validators)]
    for i, v in enumerate(validators):
        chain.register(v.hotkey_ss58, v.coldkey_ss58)
        chain.add_stake(v.hotkey_ss58, 100_000.0 * (i + 1))
    profiles = default_population(cfg.miners, cfg.seed) + list(cfg.entrants)
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"miner names must be unique: {sorted({n for n in names if names.count(n) > 1})}")
    models = tuple(dict.fromkeys((*POLICY_MODELS, *(m for p in cfg.entrants
                                                      for m in (p.model, p.improved_model) if m))))
    miners = {p.name: new_identity(p.name, cfg.seed) for p in profiles}
    for ident in miners.values():
        chain.register(ident.hotkey_ss58, ident.coldkey_ss58)

    arena_cfg = ArenaConfig(qualifying_problems=cfg.qualifying_problems, race_problems=cfg.race_problems,
                            required_successes=min(2, cfg.validators), max_attempts=max(2, cfg.validators),
                            lease_s=2 * cfg.step_s, cooldown_s=12 * 3600.0, richness_weight=cfg.richness_weight)
    sandbox = cfg.sandbox if cfg.sandbox != "bubblewrap" or shutil.which("bwrap") else "process"
    vcfgs = [ValidatorConfig(model="policy:careful", models=models, judge=cfg.judge, sandbox=sandbox,
                             allow_non_hermetic=sandbox == "process", workers=cfg.workers,
                             validator_hotkey=v.hotkey_ss58, richness_weight=cfg.richness_weight)
             for v in validators]
    leaked = [p for p in banks.open_problems()][:20]  # what the answer-table cheat pastes into its file
    submissions: list[dict[str, Any]] = []
    events: list[str] = []
    days: list[DayStats] = []
    weights_log: dict[str, Any] = {}
    flaky_pending = cfg.flaky_validator and cfg.validators > 1
    epoch_emissions: dict[str, float] = defaultdict(float)
    owner_emission = 0.0
    steps_per_day = int(DAY_S // cfg.step_s)
    blocks_per_step = int(cfg.step_s // chain.hparams.block_time_s)
    name_of = {miners[p.name].hotkey_ss58: p.name for p in profiles}
    seen: dict[str, list[float]] = {}  # per team: richness of its own trajectories on the day before
    race_asr: dict[str, tuple[str, list[float]]] = {}  # per agent version: (its latest race, those runs' ASR)

    scratch = contextlib.ExitStack()  # a temporary working directory goes when the run ends, failed or not
    if not cfg.out:
        scratch.callback(shutil.rmtree, root, ignore_errors=True)
    with scratch, Arena(store_url, chain=chain, banks=banks, clock=clock, config=arena_cfg, seed=cfg.seed) as arena, \
            open_store(store_url) as store:
        for day in range(cfg.days):
            t_day = time.perf_counter()
            run_ids: list[tuple[str, str]] = []
            unstarted: list[tuple[int, str | None]] = []  # per run: problems whose sandbox never reached the agent
            changes = 0
            today: dict[str, list[float]] = defaultdict(list)
            for step in range(steps_per_day):
                if step == 1:  # miners submit early in the day (cooldown 12 h: one version per miner per day)
                    for k, prof in enumerate(profiles):
                        r = seen.get(prof.name)
                        richness = sum(r) / len(r) if r else None
                        moved = respond(prof, day, weight=cfg.richness_weight, richness=richness)
                        if moved is not None:
                            profiles[k], changes = moved, changes + 1
                            events.append(f"day {day} {prof.name} redesigns: {prof.version(day)[0]} -> "
                                          f"{moved.redesign_strategy} (richness {richness:.3f})")
                    for prof in profiles:
                        _submit(arena, prof, miners[prof.name].hotkey_ss58, day, leaked, submissions)
                events.extend(f"day {day} {time.strftime('%H:%M', time.gmtime(clock.now()))} {e}"
                              for e in arena.tick())
                for vi, v in enumerate(validators):
                    source = LocalWork(arena, v.hotkey_ss58)
                    if flaky_pending and vi == len(validators) - 1:
                        claimed = source.claim()
                        if claimed is not None:  # the flaky validator crashes: its lease will lapse
                            flaky_pending = False
                            events.append(f"day {day} validator-{vi} abandoned {claimed.eval_run_id} (lease lapses)")
                    while (done := work_once(source, catalog, store, vcfgs[vi], root / "agents" / f"v{vi}")) \
                            is not None:
                        run_ids.append((done.summary.eval_run_id, done.kind))
                        unstarted.append((sum(1 for line in done.summary.problems if line.status == "INFRA_FAILED"),
                                          done.summary.failure_reason))
                        _observe(done, name_of, today, race_asr)
                        say(f"day {day} step {step}: validator-{vi} {done.kind} {done.agent_version_id} "
                            f"final={done.summary.final_score} status={done.summary.status}")
                clock.advance(cfg.step_s)
                for result in chain.advance_blocks(blocks_per_step):
                    owner_emission += float(result.owner_emission)
                    for hk, em in zip(result.hotkeys, result.emission, strict=True):
                        epoch_emissions[hk] += float(em)
                    arena.record_epoch(epoch=result.epoch, block=result.block, owner=float(result.owner_emission),
                                       emission={hk: float(em) for hk, em in zip(result.hotkeys, result.emission,
                                                                                 strict=True) if em})
                if step % 2 == 0:
                    weights_log = _set_weights(arena, chain, validators, build_weights)
            rotation = banks.rotate(day + 1)
            events.append(f"day {day} banks rotated: {rotation.model_dump(exclude_none=True)}")
            seen.update(today)
            top = arena.top_agent()
            outcomes = store_outcomes(store, [r for r, _ in run_ids], day=day)
            for n, reason in unstarted:
                outcomes.add_unstarted(n, reason)
            days.append(_day_stats(store, day, run_ids, time.perf_counter() - t_day, outcomes).model_copy(update={
                "design_changes": changes, "top_agent": name_of.get(top.miner_hotkey) if top else None,
                "top_agent_version": top.agent_version_id if top else None,
                "top_agent_asr": _race_asr(race_asr, top.agent_version_id) if top else None}))
            failed = outcomes.summary()
            say(f"day {day}: {days[-1].trajectories} trajectories in {days[-1].wall_s:.0f} s"
                + (f"; failed episodes: {failed}" if failed else ""))
            check_day(outcomes)  # a day of nothing but sandbox failures (or a first day of nothing) stops here
        result = _summary(cfg, arena, chain, store, store_url, sandbox, profiles, miners, validators, owner,
                          submissions, days, events, weights_log, epoch_emissions, owner_emission, t_start)
    if cfg.out:
        banks.save(root / "banks")  # the final bank state (clusters, static suites) for `shoparena corpus build`
        write_json(root / ARENA_FILE, {"format": "shoparena-arena/1", "config": cfg.model_dump(mode="json")})
    return result


def _submit(arena: Any, prof: MinerProfile, hotkey: str, day: int, leaked: list[Any],
            log: list[dict[str, Any]]) -> None:
    if day < prof.join_day:
        return  # not in the subnet yet
    strategy, model = prof.version(day)
    if day > prof.join_day and prof.version(day - 1) == (strategy, model):
        return  # nothing new to submit
    res = arena.submit(hotkey, prof.name, agent_source(prof, day, leaked=leaked))
    log.append({"day": day, "miner": prof.name, "strategy": strategy, "model": model,
                "status": res.admission_status, "reason": res.admission_reason,
                "version": res.version_number, "violations": [v.rule for v in res.violations][:5]})


def _observe(done: Any, name_of: dict[str, str], today: dict[str, list[float]],
             race_asr: dict[str, tuple[str, list[float]]]) -> None:
    """What a finished evaluation tells its team (the richness of each of its trajectories, from the run's problem
    lines) and the race table (the run's success rate, per agent version, its latest race's runs only)."""
    summary = done.summary
    name = name_of.get(done.miner_hotkey)
    if name is not None:
        today[name].extend(line.richness for line in summary.problems if line.richness is not None)
    if done.kind == "RACE" and summary.status == "SUCCESS":
        race, rates = race_asr.get(done.agent_version_id, (done.race_id, []))
        if race != done.race_id:
            race, rates = done.race_id, []
        race_asr[done.agent_version_id] = (race, [*rates, summary.success_rate])


def _race_asr(race_asr: dict[str, tuple[str, list[float]]], version: str) -> float | None:
    rates = race_asr.get(version, ("", []))[1]
    return round(sum(rates) / len(rates), 4) if rates else None


def _set_weights(arena: Any, chain: Any, validators: list[Any], build_weights: Any) -> dict[str, Any]:
    standings = arena.standings()
    if standings is None:
        return {}
    meta = chain.metagraph()
    vector = build_weights(standings.finishers, list(meta.hotkeys))
    uids = list(range(len(vector)))
    results = {}
    for v in validators:
        res = chain.set_weights(v.hotkey_ss58, uids, vector)
        arena.record_weights(v.hotkey_ss58, uids=uids, weights=vector, ok=res.ok, reason=res.reason,
                             block=res.block, race_id=standings.race_id)
        results[v.name] = {"ok": res.ok, "reason": res.reason}
    return {"race_id": standings.race_id, "vector": {meta.hotkeys[u]: w for u, w in zip(uids, vector, strict=True)
                                                      if w}, "validators": results}


def _day_stats(store: Any, day: int, run_ids: list[tuple[str, str]], wall_s: float,
               outcomes: DayOutcomes | None = None) -> DayStats:
    axis: Counter[str] = Counter()
    bucket: Counter[str] = Counter()
    status: Counter[str] = Counter()
    n = 0
    for run_id, _kind in run_ids:
        for row in store.rows(eval_run_id=run_id):
            n += 1
            axis[row.axis] += 1
            bucket[row.bucket] += 1
            status[row.status] += 1
    return DayStats(day=day, trajectories=n, evaluations=len(run_ids), by_axis=dict(axis), by_bucket=dict(bucket),
                    by_status=dict(status), wall_s=round(wall_s, 1),
                    axis_a_share=round(axis["A"] / n, 4) if n else 0.0, eval_runs=[r for r, _ in run_ids],
                    episodes=outcomes.episodes if outcomes else n,
                    failures=dict(outcomes.failures.most_common()) if outcomes else {},
                    infra_failures=sum(outcomes.infra.values()) if outcomes else 0)


def _summary(cfg: SimulationConfig, arena: Any, chain: Any, store: Any, store_url: str, sandbox: str,
             profiles: list[MinerProfile], miners: dict[str, Any], validators: list[Any], owner: Any,
             submissions: list[dict[str, Any]], days: list[DayStats], events: list[str], weights_log: dict[str, Any],
             emissions: dict[str, float], owner_emission: float, t_start: float) -> SimulationResult:
    by_hotkey = {ident.hotkey_ss58: name for name, ident in miners.items()}
    by_hotkey.update({v.hotkey_ss58: v.name for v in validators})
    by_hotkey[owner.hotkey_ss58] = "owner (uid 0, burn)"
    rows = arena.leaderboard()
    owner_of = {row.agent_version_id: by_hotkey.get(row.miner_hotkey, row.miner_hotkey) for row in rows}
    races = [r.model_dump(mode="json") for r in arena.races()]
    winners = [{"race": r["race_number"], "winner": owner_of.get(r["winner_agent_version_id"]),
                "agent_version_id": r["winner_agent_version_id"], "score": r["winner_score"],
                "promoted": r["promoted"]} for r in races if r["status"] == "RACE_COMPLETE"]
    board = [{**row.model_dump(mode="json"), "miner": by_hotkey.get(row.miner_hotkey, row.miner_hotkey)}
             for row in rows]
    versions = [{"miner": name, "agent_name": a.agent_name, **v.model_dump(mode="json")}
                for name, ident in miners.items() for a in arena.agents(ident.hotkey_ss58)
                for v in arena.versions(ident.hotkey_ss58, a.agent_id)]
    named = {by_hotkey.get(hk, hk): round(v, 4) for hk, v in sorted(emissions.items(), key=lambda kv: -kv[1]) if v}
    stats = store.stats()
    firehose = {"total": stats.records, "by_axis": stats.by_axis, "by_bucket": stats.by_bucket,
                "by_status": stats.by_status, "per_day": [d.trajectories for d in days]}
    vector = weights_log.get("vector", {})
    weights = {**weights_log, "vector": {by_hotkey.get(hk, hk): w for hk, w in vector.items()}} if weights_log else {}
    return SimulationResult(
        config=cfg, sandbox=sandbox,
        miners=[{"name": p.name, "strategy": p.strategy, "model": p.model, "improves_on_day": p.improve_day,
                 "improved_model": p.improved_model, "responds_at": p.responds_at,
                 "redesigns_on_day": p.redesign_day, "redesign_strategy": p.redesign_strategy,
                 "hotkey": miners[p.name].hotkey_ss58} for p in profiles],
        submissions=submissions, races=races, winners=winners, leaderboard=board, versions=versions, weights=weights,
        emissions={"owner": round(owner_emission, 4), "by_participant": named, "block": chain.block},
        trajectories=firehose, days=days, events=events, store=store_url,
        wall_s=round(time.perf_counter() - t_start, 1),
    )
