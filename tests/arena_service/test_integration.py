"""The arena over the real neighbours: a BankSet (open / held-out / static partitions), the real submission gate
run against every bank, and a LocalChain beacon."""

from __future__ import annotations

import pytest

from shoparena.arena import races as rules
from shoparena.arena.chain import LocalChain
from shoparena.arena.service import Arena
from shoparena.clock import ManualClock
from shoparena.tasks.banks import BankSet
from tests.arena_service import T0, config, ok
from tests.banks import synthetic_bank

AGENT = '''"""A tiny agent."""


def agent_main(problem):
    words = problem["query"].split()
    return [{"think": "search " + " ".join(words[:3])}]
'''


@pytest.fixture
def banks() -> BankSet:
    return BankSet.build(synthetic_bank(60, seed=1), static={"core": synthetic_bank(4, seed=9, prefix="st")}, seed=1)


def _arena(banks: BankSet, clock: ManualClock, **cfg: object) -> Arena:
    chain = LocalChain(seed=2)
    for hk in ("owner", "A", "B", "C"):
        chain.register(hk, hk + "-ck")
    return Arena("sqlite://", chain=chain, banks=banks, clock=clock, config=config(**cfg), seed=4)


def test_real_gate_against_all_banks(banks: BankSet) -> None:
    arena = _arena(banks, ManualClock(T0))
    assert arena.submit("A", "a", AGENT).admission_status == "ACCEPTED"
    held = banks.held_out_problems()[0].query
    leak = arena.submit("B", "b", AGENT + f"\nHINT = {' '.join(held.split()[:8])!r}\n")
    assert leak.admission_reason == "INVALID_FILE" and leak.cooldown == "full"
    assert [v.rule for v in leak.violations] == ["verbatim_phrase"] and leak.violations[0].severity == "integrity"
    sec = arena.submit("C", "c", "import subprocess\n" + AGENT)
    assert sec.cooldown == "reduced" and sec.violations[0].model_dump()["rule"] == "banned_import"


def test_cycle_draws_from_the_right_partitions(banks: BankSet) -> None:
    clock = ManualClock(T0)
    arena = _arena(banks, clock)
    arena.tick()
    open_ids = {p.problem_id for p in banks.open_problems()}
    held_ids = {p.problem_id for p in banks.held_out_problems()}
    qual = arena.suites()[0]
    assert qual.kind == "QUALIFYING" and set(qual.problem_ids or []) <= open_ids and qual.problem_count == 5
    vid = arena.submit("A", "a", AGENT).agent_version_id
    for v in ("val-1", "val-2"):
        w = arena.claim_work(v)
        assert w is not None
        arena.complete(w.eval_run_id, v, ok(0.4))
    arena.chain.advance_blocks(3)
    clock.set(T0 + 18 * 3600)
    arena.tick()
    detail = arena.race("race-000001")
    w = arena.claim_work("val-1")
    assert w is not None and w.kind == "RACE" and set(w.problem_ids) <= held_ids
    assert detail.seed.beacon_source == "chain:block_hash" and detail.seed.beacon_block == 3
    assert w.problem_ids == [p.problem_id for p in banks.draw("held_out", 6, rules.seed_int(detail.seed.world_seed))]
    assert banks.state.clusters[banks.cluster_of(w.problem_ids[0])].used  # moves to open at the next rotation
    arena.complete(w.eval_run_id, "val-1", ok(0.5, 6))
    w = arena.claim_work("val-2")
    assert w is not None
    arena.complete(w.eval_run_id, "val-2", ok(0.5, 6))
    clock.advance(60)
    arena.tick()
    top = arena.top_agent()
    assert top is not None and top.agent_version_id == vid
    clock.set(top.code_available_at)
    copy = arena.submit("B", "copy", AGENT)  # the released winner, resubmitted
    assert copy.admission_status == "REJECTED" and copy.similar_to == "a@v1" and copy.similarity == 1.0


def test_static_qualifying_suite(banks: BankSet) -> None:
    arena = _arena(banks, ManualClock(T0), qualifying_source="static", qualifying_suite="core",
                   qualifying_problems=50)
    arena.tick()
    suite = arena.suites()[0]
    assert suite.source == "static:core" and suite.problem_ids is None  # static problems are never published
    assert suite.problem_count == len(banks.static_suites()["core"])
