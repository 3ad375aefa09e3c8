"""The pure race rules: calendar, embargo (weekends, DST), threshold decay, commit-reveal, racers, ranking."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shoparena.arena import races as rules
from shoparena.arena.config import ArenaConfig

CFG = ArenaConfig()


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def as_utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@pytest.mark.parametrize(("promoted", "release"), [
    # Friday evening PST → Monday noon PST (20:00 UTC)
    (utc(2026, 1, 10, 2, 0), utc(2026, 1, 12, 20, 0)),
    # Wednesday 09:00 PST → the same day at noon
    (utc(2026, 1, 7, 17, 0), utc(2026, 1, 7, 20, 0)),
    # exactly noon → the next weekday's noon
    (utc(2026, 1, 7, 20, 0), utc(2026, 1, 8, 20, 0)),
    # Saturday and Sunday → Monday
    (utc(2026, 1, 10, 19, 0), utc(2026, 1, 12, 20, 0)),
    (utc(2026, 1, 11, 23, 0), utc(2026, 1, 12, 20, 0)),
    # Friday evening before DST starts (Sun 2026-03-08) → Monday noon PDT = 19:00 UTC
    (utc(2026, 3, 7, 3, 0), utc(2026, 3, 9, 19, 0)),
    # Friday evening PDT before DST ends (Sun 2026-11-01) → Monday noon PST = 20:00 UTC
    (utc(2026, 10, 31, 3, 0), utc(2026, 11, 2, 20, 0)),
])
def test_code_release_is_the_next_weekday_noon_pacific(promoted: float, release: float) -> None:
    assert rules.release_at(promoted, CFG) == release


def test_release_is_local_noon_on_a_weekday_across_a_year() -> None:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("America/Los_Angeles")
    t = utc(2026, 1, 1)
    while t < utc(2027, 1, 1):
        r = rules.release_at(t, CFG)
        local = datetime.fromtimestamp(r, tz)
        assert (local.hour, local.minute, local.second) == (12, 0, 0) and local.weekday() < 5
        assert 0 < r - t <= 3 * 86400 + 3600  # never more than a weekend (+ a DST hour) away
        t += 7 * 3600 + 17


def test_minimum_embargo_pushes_the_release() -> None:
    cfg = ArenaConfig(embargo_min_s=24 * 3600)
    # Thursday 13:00 PST + 24 h = Friday 13:00 → Monday noon
    assert rules.release_at(utc(2026, 1, 8, 21, 0), cfg) == utc(2026, 1, 12, 20, 0)


def test_qualifying_closes_at_the_next_daily_close() -> None:
    cfg = ArenaConfig(qualifying_close_utc_s=18 * 3600, min_qualifying_s=3600)
    assert rules.next_qualifying_close(utc(2026, 1, 7, 0, 0), cfg) == utc(2026, 1, 7, 18, 0)
    assert rules.next_qualifying_close(utc(2026, 1, 7, 17, 30), cfg) == utc(2026, 1, 8, 18, 0)
    assert rules.next_qualifying_close(utc(2026, 1, 7, 19, 0), cfg) == utc(2026, 1, 8, 18, 0)


def test_threshold_is_relative_to_the_incumbent_and_decays_daily() -> None:
    cfg = ArenaConfig(threshold_floor=0.1, threshold_margin=0.9, threshold_decay_per_day=0.1)
    assert rules.qualifying_threshold(None, None, 0.0, cfg) == 0.1
    assert rules.qualifying_threshold(0.8, 0.0, 3600.0, cfg) == pytest.approx(0.72)
    assert rules.qualifying_threshold(0.8, 0.0, 86_400 * 1.5, cfg) == pytest.approx(0.648)
    assert rules.qualifying_threshold(0.8, 0.0, 86_400 * 3, cfg) == pytest.approx(0.72 * 0.9 ** 3)
    assert rules.qualifying_threshold(0.8, 0.0, 86_400 * 60, cfg) == 0.1  # never below the floor


def test_commit_reveal_round_trip() -> None:
    secret = rules.race_secret(3, "race-000001")
    assert secret == rules.race_secret(3, "race-000001") != rules.race_secret(4, "race-000001")
    assert len(rules.race_secret(None, "x")) == 64 and rules.race_secret(None, "x") != rules.race_secret(None, "x")
    c = rules.commitment(secret)
    assert rules.verify_commitment(c, secret) and not rules.verify_commitment(c, rules.race_secret(4, "r"))
    beacon = "ab" * 32
    ws = rules.world_seed(secret, beacon)
    assert ws != rules.world_seed(secret, "cd" * 32) and 0 <= rules.seed_int(ws) < 2**64


def test_beacon_uses_the_chain_block_hash_when_there_is_one() -> None:
    from shoparena.arena.chain import LocalChain

    chain = LocalChain(seed=1)
    chain.advance_blocks(5)
    block, beacon, source = rules.beacon_for(chain, "race-000001", 0.0)
    assert (block, source) == (5, "chain:block_hash") and len(beacon) == 64
    assert rules.beacon_for(None, "race-000001", 1.0)[2] == "standin:no-chain"


def cand(v: str, hk: str, score: float | None, state: str = "ELIGIBLE", elim: bool = False) -> rules.Candidate:
    return rules.Candidate(agent_version_id=v, hotkey=hk, qualifying_score=score, state=state, eliminated=elim)


def test_one_racer_per_hotkey_best_version_or_pin() -> None:
    cs = [cand("a1", "A", 0.5), cand("a2", "A", 0.7), cand("b1", "B", 0.6), cand("b2", "B", 0.6),
          cand("c1", "C", 0.2), cand("d1", "D", 0.9, elim=True), cand("e1", "E", 0.9, state="DISCARDED")]
    racers = rules.select_racers(cs, threshold=0.3)
    assert [(r.hotkey, r.agent_version_id) for r in racers] == [("A", "a2"), ("B", "b1")]
    pinned = rules.select_racers(cs, threshold=0.3, pins={"A": "a1", "B": "zz"})
    assert {r.hotkey: r.agent_version_id for r in pinned} == {"A": "a1", "B": "b1"}
    assert rules.select_racers(cs, threshold=0.3, registered={"B"})[0].hotkey == "B"


def test_incumbent_qualifies_without_the_threshold() -> None:
    inc = cand("i1", "I", 0.2)
    cs = [inc, cand("i2", "I", 0.95), cand("b1", "B", 0.8)]
    racers = rules.select_racers(cs, threshold=0.9, incumbent=inc)
    assert [(r.agent_version_id, r.qualification_type) for r in racers] == [("i1", "INCUMBENT")]
    # the incumbent's miner may pin a qualifying version instead
    racers = rules.select_racers(cs, threshold=0.9, incumbent=inc, pins={"I": "i2"})
    assert [(r.agent_version_id, r.qualification_type) for r in racers] == [("i2", "SCORED")]


def test_rank_ties_by_version_id_and_dnf_last() -> None:
    assert rules.rank({"b": 0.5, "a": 0.5, "c": None, "d": 0.9}) == [
        ("d", 0.9, 1), ("a", 0.5, 2), ("b", 0.5, 3), ("c", None, None)]


def test_eliminations() -> None:
    results = {"w": 0.8, "x": 0.5, "y": 0.3, "z": None}
    assert rules.eliminated(results, "w", ArenaConfig(elimination_fraction=0.5)) == ["y"]
    assert rules.eliminated(results, "w", ArenaConfig(elimination_fraction=0.5, eliminate_dnf=True)) == ["y", "z"]
    assert rules.eliminated(results, "w", ArenaConfig(elimination_fraction=0.0)) == []


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        ArenaConfig(required_successes=3, max_attempts=2)
    with pytest.raises(ValueError):
        ArenaConfig(qualifying_source="static")
    with pytest.raises(ValueError):
        ArenaConfig(embargo_timezone="Mars/Olympus")
    with pytest.raises(ValueError):
        CFG.cooldown_s = 1  # type: ignore[misc]
