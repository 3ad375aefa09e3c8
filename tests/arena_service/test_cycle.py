"""A full simulated cycle on a ManualClock and a LocalChain: qualifying → race (commit, reveal) → promotion,
hidden race scores, one racer per hotkey, the incumbent auto-qualifying, eliminations, DNF at the deadline, the
code embargo across a weekend and the US DST start, standings for the weight rule."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from shoparena.arena import races as rules
from shoparena.arena.chain import LocalChain
from shoparena.arena.service import Arena
from shoparena.arena.state.types import ClaimWork, LeaseExpired
from shoparena.arena.weights import build_weights
from shoparena.clock import ManualClock
from tests.arena_service import GOOD, TinyBanks, config, make_arena, ok

# Friday 2026-03-06 12:00 UTC (04:00 PST). US DST starts Sunday 2026-03-08.
START = datetime(2026, 3, 6, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def work_through(arena: Arena, validators: list[str], score: Callable[[ClaimWork], float | None]) -> list[str]:
    """Claim everything claimable; complete with ``score(work)`` (None: keep the lease and walk away)."""
    abandoned: list[str] = []
    progress = True
    while progress:
        progress = False
        for v in validators:
            w = arena.claim_work(v)
            if w is None:
                continue
            progress = True
            s = score(w)
            if s is None:
                abandoned.append(w.eval_run_id)
            else:
                arena.complete(w.eval_run_id, v, ok(s, len(w.problem_ids)))
    return abandoned


@pytest.fixture
def world() -> tuple[Arena, ManualClock, LocalChain, TinyBanks]:
    chain = LocalChain(seed=3)
    chain.register("owner", "owner-ck")  # uid 0: the burn
    for name in ("A", "B", "C", "D", "E", "F", "val-1", "val-2", "val-3"):
        chain.register(name, f"{name}-ck")
    for v in ("val-1", "val-2", "val-3"):
        chain.add_stake(v, 1000.0)
    clock = ManualClock(START)
    banks = TinyBanks()
    cfg = config(qualifying_close_utc_s=2 * HOUR, race_window_s=2 * HOUR, threshold_floor=0.1,
                 threshold_margin=0.9, threshold_decay_per_day=0.1, elimination_fraction=0.5, lease_s=3 * HOUR)
    return make_arena("sqlite://", clock=clock, chain=chain, banks=banks, cfg=cfg, seed=11), clock, chain, banks


def test_full_cycle(world: tuple[Arena, ManualClock, LocalChain, TinyBanks]) -> None:
    arena, clock, chain, banks = world
    vals = ["val-1", "val-2", "val-3"]
    assert arena.tick() == ["opened race-000001"]
    race1 = arena.race("race-000001")
    assert race1.race.status == "QUALIFYING_OPEN" and race1.race.qualifying_closes_at == utc(2026, 3, 7, 2, 0)
    commitment = race1.race.commitment
    assert race1.seed.secret is None and race1.seed.world_seed is None and not race1.seed.revealed
    assert len(commitment) == 64 and arena.suites()[0].problem_ids  # the open-bank suite is public

    # -- qualifying: A submits twice (12 h apart), C is weak, D is mediocre -------------------------------------
    a1 = arena.submit("A", "alpha", GOOD + "# a1\n").agent_version_id
    b1 = arena.submit("B", "beta", GOOD + "# b1\n").agent_version_id
    c1 = arena.submit("C", "gamma", GOOD + "# c1\n").agent_version_id
    d1 = arena.submit("D", "delta", GOOD + "# d1\n").agent_version_id
    qual = {a1: 0.5, b1: 0.55, c1: 0.05, d1: 0.3}
    work_through(arena, vals, lambda w: qual[w.agent_version_id])
    clock.advance(12 * HOUR)  # Saturday 00:00 UTC, still before the 02:00 close
    a2 = arena.submit("A", "alpha", GOOD + "# a2\n").agent_version_id
    qual[a2] = 0.6
    work_through(arena, vals, lambda w: qual[w.agent_version_id])
    states = {v.agent_version_id: v.state for h in "ABCD" for a in arena.agents(h) for v in arena.versions(h, a.agent_id)}
    assert states == {a1: "ELIGIBLE", a2: "ELIGIBLE", b1: "ELIGIBLE", c1: "DISCARDED", d1: "ELIGIBLE"}
    assert arena.race("race-000001").qualifiers == []  # racers are picked at close

    # -- close: reveal, held-out draw, one racer per hotkey -----------------------------------------------------
    clock.set(utc(2026, 3, 7, 2, 0))
    chain.advance_blocks(7)
    assert arena.tick() == ["started race-000001"]
    detail = arena.race("race-000001")
    seed = detail.seed
    assert seed.revealed and seed.secret and seed.beacon and seed.beacon_block == 7
    assert rules.verify_commitment(commitment, seed.secret) and seed.commitment == commitment
    assert seed.world_seed == hashlib.sha256(bytes.fromhex(seed.secret) + bytes.fromhex(seed.beacon)).hexdigest()
    assert banks.draws[-1] == ("held_out", 6, rules.seed_int(seed.world_seed))
    assert sorted(banks.used) == sorted(p.problem_id for p in banks.draw("held_out", 6, rules.seed_int(seed.world_seed)))
    racers = {q.miner_hotkey: q.agent_version_id for q in detail.qualifiers}
    assert racers == {"A": a2, "B": b1, "D": d1}  # A's best version only; C discarded
    assert all(q.qualification_type == "SCORED" for q in detail.qualifiers)
    race_suite = next(s for s in arena.suites() if s.kind == "RACE")
    assert race_suite.problem_ids is None and race_suite.problem_count == 6  # held-out ids never public

    # -- race: race items first; scores hidden until RACE_COMPLETE ----------------------------------------------
    race_scores = {a2: 0.7, b1: 0.8, d1: 0.2}
    seen_kinds: list[str] = []

    def race_score(w: ClaimWork) -> float:
        seen_kinds.append(w.kind)
        return race_scores[w.agent_version_id]

    late = arena.submit("E", "eps", GOOD + "# e1\n").agent_version_id  # waits: no qualifying window open
    w = arena.claim_work("val-1")
    assert w is not None and w.kind == "RACE" and len(w.problem_ids) == 6
    res = arena.complete(w.eval_run_id, "val-1", ok(race_scores[w.agent_version_id], 6))
    assert res.final_score is None  # not even the validator learns the pooled race score
    work_through(arena, vals, race_score)
    assert set(seen_kinds) == {"RACE"}
    running = arena.race("race-000001")
    assert running.race.status == "RACE_RUNNING" and running.race.winner_agent_version_id is None
    assert all(q.race_score is None and q.race_rank is None for q in running.qualifiers)
    assert arena.standings() is None and arena.top_agent() is None
    assert all(r.last_race_score is None for r in arena.leaderboard())

    clock.advance(30 * 60)  # Friday 18:30 PST
    assert arena.tick() == ["completed race-000001", "opened race-000002", "queued"]
    done = arena.race("race-000001")
    assert done.race.status == "RACE_COMPLETE" and done.race.winner_agent_version_id == b1 and done.race.promoted
    assert [(q.agent_version_id, q.race_score, q.race_rank, q.eliminated) for q in done.qualifiers] == [
        (b1, 0.8, 1, False), (a2, 0.7, 2, False), (d1, 0.2, 3, True)]
    # promoted Friday evening PST → code released Monday noon PDT (after the DST change) = 19:00 UTC
    assert done.race.code_release_at == utc(2026, 3, 9, 19, 0)
    top = arena.top_agent()
    assert top is not None and top.agent_version_id == b1 and top.release_state == "HIDDEN" and top.code is None
    assert top.challenge_threshold == pytest.approx(0.9 * 0.55)
    standings = arena.standings()
    assert standings is not None and standings.top_hotkey == "B"
    assert [(f.hotkey, f.race_score) for f in standings.finishers] == [("B", 0.8), ("A", 0.7), ("D", 0.2)]
    mg = chain.metagraph()
    weights = build_weights(standings.finishers, list(mg.hotkeys))
    assert weights[0] == 65535 and weights[mg.uid_of("B")] > 0
    board = arena.leaderboard()
    assert board[0].agent_version_id == b1 and board[0].is_top_agent and board[0].races_won == 1
    assert arena.versions("D", arena.agents("D")[0].agent_id)[0].eliminated_in_race_number == 1
    assert arena.versions("E", arena.agents("E")[0].agent_id)[0].state == "QUEUED"  # queued on race 2's suite
    assert arena.race("race-000002").race.qualifying_threshold == pytest.approx(0.495)

    # -- day 2: the incumbent auto-qualifies; a DNF at the deadline; the challenger is promoted -----------------
    qual2 = {late: 0.45}  # below 0.9 × 0.55 = 0.495 → discarded
    work_through(arena, vals, lambda w: qual2[w.agent_version_id])
    f1 = arena.submit("F", "phi", GOOD + "# f1\n").agent_version_id
    work_through(arena, vals, lambda w: {f1: 0.7}[w.agent_version_id])
    assert arena.versions("E", arena.agents("E")[0].agent_id)[0].state == "DISCARDED"
    clock.set(utc(2026, 3, 8, 2, 0))  # Saturday 18:00 PST
    assert arena.tick() == ["started race-000002"]
    detail2 = arena.race("race-000002")
    kinds = {q.miner_hotkey: (q.agent_version_id, q.qualification_type) for q in detail2.qualifiers}
    assert kinds == {"A": (a2, "SCORED"), "B": (b1, "INCUMBENT"), "F": (f1, "SCORED")}  # D eliminated
    scores2 = {a2: 0.76, b1: 0.75, f1: None}
    abandoned = work_through(arena, vals, lambda w: scores2[w.agent_version_id])
    assert abandoned and arena.tick() == []  # F's item is still open (leased, never finished): the race waits
    clock.set(utc(2026, 3, 8, 4, 0))  # the deadline
    assert arena.tick()[:2] == ["completed race-000002", "opened race-000003"]
    with pytest.raises(LeaseExpired, match="CANCELLED"):  # the unfinished run was cancelled with its item
        arena.complete(abandoned[0], _holder(arena, abandoned[0]), ok(0.9, 6))
    done2 = arena.race("race-000002")
    assert done2.race.winner_agent_version_id == a2 and done2.race.promoted
    assert [(q.agent_version_id, q.race_score, q.race_rank, q.eliminated) for q in done2.qualifiers] == [
        (a2, 0.76, 1, False), (b1, 0.75, 2, False), (f1, None, None, False)]
    assert done2.race.code_release_at == utc(2026, 3, 9, 19, 0)
    assert [f.hotkey for f in arena.standings().finishers] == ["A", "B"]  # type: ignore[union-attr]

    # -- release: hidden until Monday noon PDT, then public; the released code feeds the similarity check ------
    clock.set(utc(2026, 3, 9, 18, 59))
    assert arena.top_agent().code is None  # type: ignore[union-attr]
    clock.set(utc(2026, 3, 9, 19, 0))
    top = arena.top_agent()
    assert top is not None and top.release_state == "RELEASED" and top.code == GOOD + "# a2\n"
    copy = arena.submit("C", "copycat", GOOD + "# a2\n")
    assert copy.similar_to == "alpha@v2" and copy.similarity == 1.0
    # A's own released code is not a copy when A improves on it (its cooldown has long passed)
    own = arena.submit("A", "alpha", GOOD + "# a2\n")
    assert own.similar_to is None and own.admission_status == "ACCEPTED"
    # the threshold decays per whole day since A's promotion (Sunday 04:00 UTC → Monday 19:00 UTC: 1 day)
    assert top.challenge_threshold == pytest.approx(0.9 * 0.6 * 0.9)


def _holder(arena: Arena, run_id: str) -> str:
    from shoparena.arena.state.schema import eval_runs

    row = arena.db.read(lambda c: c.execute(eval_runs.select().where(eval_runs.c.eval_run_id == run_id)).one())
    return str(row.validator_hotkey)


def test_no_racers_completes_without_a_winner() -> None:
    clock = ManualClock(START)
    arena = make_arena("sqlite://", clock=clock, cfg=config(qualifying_close_utc_s=2 * HOUR))
    arena.tick()
    clock.set(utc(2026, 3, 7, 2, 0))
    assert arena.tick() == ["started race-000001", "completed race-000001", "opened race-000002"]
    r = arena.race("race-000001").race
    assert r.winner_agent_version_id is None and not r.promoted
    s = arena.standings()
    assert s is not None and s.finishers == [] and s.top_hotkey is None
    assert build_weights(s.finishers, ["owner", "x"]) == [65535, 0]


def test_pins_choose_the_racer() -> None:
    from shoparena.arena.state.types import Conflict

    clock = ManualClock(START)
    arena = make_arena("sqlite://", clock=clock, cfg=config(qualifying_close_utc_s=2 * HOUR))
    arena.tick()
    v1 = arena.submit("A", "alpha", GOOD + "# 1\n").agent_version_id
    with pytest.raises(Conflict, match="NOT_ELIGIBLE"):
        arena.pin("A", v1)
    work_through(arena, ["v1", "v2"], lambda w: 0.5)
    clock.advance(12 * HOUR)
    v2 = arena.submit("A", "alpha", GOOD + "# 2\n").agent_version_id
    work_through(arena, ["v1", "v2"], lambda w: 0.9)
    with pytest.raises(Conflict, match="NOT_FOUND"):
        arena.pin("B", v1)
    arena.pin("A", v1)
    clock.set(utc(2026, 3, 7, 2, 0))
    arena.tick()
    assert [q.agent_version_id for q in arena.race("race-000001").qualifiers] == [v1]
    assert v2 != v1
    with pytest.raises(Conflict, match="SELECTED_AFTER_CLOSE"):
        arena.pin("A", None)
