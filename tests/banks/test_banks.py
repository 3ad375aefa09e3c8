"""BankSet: partitions, rotation, draws, the verifier and persistence (docs/arena.md §12)."""

from __future__ import annotations

import pytest

from shoparena.clock import ManualClock
from shoparena.errors import ConfigError
from shoparena.tasks.banks import GROUPS, BankConfig, BankSet, BankState
from shoparena.tasks.types import Problem, RewardItem
from tests.banks import suites, synthetic_bank, upstream


@pytest.fixture(scope="module")
def real_bank() -> BankSet:
    return BankSet.build(upstream(), static={k: list(v) for k, v in suites().items()}, seed=1)


def test_real_bank_static_twins_are_protected(real_bank: BankSet) -> None:
    report = real_bank.verify()
    assert report.ok, report.violations
    by_query = {p.query: p for p in upstream()}
    for name, problems in real_bank.static_suites().items():
        assert [p.problem_id for p in problems] == [p.problem_id for p in suites()[name]]
        for p in problems:
            assert real_bank.partition_of(by_query[p.query].problem_id) == "static"
    sizes = real_bank.sizes()
    assert sum(s["problems"] for s in sizes.values()) == 990 and sizes["static"]["problems"] >= 180
    assert sizes["held_out"]["problems"] > 0 and sizes["open"]["problems"] > 0


def test_every_problem_in_exactly_one_partition_and_whole_clusters(real_bank: BankSet) -> None:
    part, clusters = real_bank.partition_map(), real_bank.cluster_map()
    assert set(part) == set(clusters) and len(part) == 990
    seen: dict[str, str] = {}
    for pid, cid in clusters.items():
        assert seen.setdefault(cid, part[pid]) == part[pid]


def test_held_out_is_stratified_by_bucket(real_bank: BankSet) -> None:
    buckets = {p.bucket for p in real_bank.held_out_problems()}
    assert buckets == {"product", "shop", "voucher", "knowledge"}
    assert set(real_bank.state.held_out_target) == buckets


def test_draw_is_deterministic_and_whole_clusters(real_bank: BankSet) -> None:
    a = real_bank.draw("held_out", 10, seed="race-1")
    assert a == real_bank.draw("held_out", 10, seed="race-1") and len(a) == 10
    assert a != real_bank.draw("held_out", 10, seed="race-2")
    assert all(real_bank.partition_of(p.problem_id) == "held_out" for p in a)
    whole = real_bank.draw("open", 5, seed=3, unit="clusters")
    cids = {real_bank.cluster_of(p.problem_id) for p in whole}
    assert len(cids) == 5
    assert len(whole) == sum(1 for c in real_bank.cluster_map().values() if c in cids)
    assert all(p.bucket == "shop" for p in real_bank.draw("open", 7, seed=0, bucket="shop"))
    assert len(real_bank.draw("retired", 10, seed=0)) == 0
    with pytest.raises(ConfigError):
        real_bank.draw("nope", 1, seed=0)


def test_build_is_deterministic_and_order_independent() -> None:
    problems = synthetic_bank(80, seed=1)
    a = BankSet.build(problems, seed=5)
    b = BankSet.build(list(reversed(problems)), seed=5)
    assert a.state == b.state
    assert BankSet.build(problems, seed=6).state != a.state


def test_rotation_rules() -> None:
    banks = BankSet.build(synthetic_bank(120, seed=2), seed=0,
                          config=BankConfig(held_out_fraction=0.2, open_fraction=0.2, open_ttl_days=2))
    held = banks.held_out_problems()
    opened = {p.problem_id for p in banks.open_problems()}
    assert not banks.rotate(0).rotated  # nothing due on the build day
    used = held[:3]
    banks.mark_used(p.problem_id for p in used)
    report = banks.rotate(1)
    assert report.rotated and report.released >= 1 and report.retired == 0 and report.drawn >= 1
    for p in used:  # used held-out clusters move to open, whole
        assert banks.partition_of(p.problem_id) == "open"
    assert all(banks.partition_of(p.problem_id) == "held_out" for p in held if p not in used
               and banks.cluster_of(p.problem_id) not in {banks.cluster_of(u.problem_id) for u in used})
    assert not banks.rotate(1).rotated  # at most once per period
    banks.rotate(2)
    assert all(banks.partition_of(pid) == "retired" for pid in opened)  # open for open_ttl_days → retired
    assert {banks.partition_of(p.problem_id) for p in used} == {"open"}
    assert banks.verify().ok


def test_rotate_at_clock_and_dry_reserve() -> None:
    clock = ManualClock()
    banks = BankSet.build(synthetic_bank(30, seed=3), seed=1, epoch=clock.now(),
                          config=BankConfig(held_out_fraction=0.3, open_fraction=0.6, held_out_ttl_days=1))
    assert not banks.rotate_at(clock).rotated
    shorts = []
    for _ in range(6):
        clock.advance(86_400)
        shorts.append(banks.rotate_at(clock).short)
    assert banks.state.day == 6 and shorts[-1] > 0  # the reserve ran dry: reported, never refilled from open
    assert banks.sizes()["reserve"]["problems"] == 0 and banks.verify().ok


def test_extend_resolves_cross_partition_clusters() -> None:
    base = synthetic_bank(60, seed=4)
    banks = BankSet.build(base, seed=0, config=BankConfig(held_out_fraction=0.3, open_fraction=0.3))
    held, opened = banks.held_out_problems()[0], banks.open_problems()[0]
    bridge = Problem(problem_id="bridge", bucket="shop", query="a new problem bridging two clusters",
                     reward=[RewardItem(product_id=held.gt_ids()[0], title=["t1"]),
                             RewardItem(product_id=opened.gt_ids()[0], title=["t2"])])
    fresh = synthetic_bank(5, seed=9, prefix="new")
    counts = banks.extend([bridge, *fresh], day=0)
    assert counts["added"] == 1 + len(fresh) and counts["exposed"] >= 1
    assert {banks.partition_of(pid) for pid in ("bridge", held.problem_id, opened.problem_id)} == {"open"}
    assert {banks.partition_of(p.problem_id) for p in fresh} == {"reserve"}
    assert banks.verify().ok


def test_verifier_catches_a_planted_leak() -> None:
    banks = BankSet.build(synthetic_bank(60, seed=5), seed=0)
    held = banks.held_out_problems()[0]
    leak = Problem(problem_id="leak", bucket="product", query="totally different words for a leaked twin",
                   reward=[RewardItem(product_id=held.gt_ids()[0], title=["x"])])
    st = banks.state
    clusters = dict(st.clusters)
    clusters["planted"] = clusters[banks.cluster_of(held.problem_id)].model_copy(
        update={"partition": "open", "members": ["leak"]})
    planted = BankSet({**{p.problem_id: p for p in synthetic_bank(60, seed=5)}, "leak": leak}, static={},
                      static_hashes={}, state=BankState.model_validate({**st.model_dump(), "clusters": clusters}),
                      config=banks.config)
    quick = planted.verify(recluster=False)  # trusts the planted cluster map, still sees the shared GT id
    assert not quick.ok and {v.check for v in quick.violations} == {"disjoint_gt_product_id"}
    full = planted.verify()
    assert {"cluster_ids", "whole_clusters", "disjoint_cluster_id", "disjoint_gt_product_id"} <= {
        v.check for v in full.violations}


def test_verifier_catches_a_split_cluster_and_a_changed_suite(real_bank: BankSet) -> None:
    st = real_bank.state
    cid, c = next((k, v) for k, v in st.clusters.items() if v.partition == "held_out" and len(v.members) > 1)
    clusters = {**st.clusters, cid: c.model_copy(update={"members": c.members[:1]}),
                "split-off": c.model_copy(update={"partition": "open", "members": c.members[1:]})}
    problems = {p.problem_id: p for p in [*upstream(), *(p for s in suites().values() for p in s)]}
    ids = next(iter(real_bank.static_suites().values()))
    problems[ids[0].problem_id] = ids[0].model_copy(update={"query": ids[0].query + " (edited)"})
    broken = BankSet(problems, static={n: [p.problem_id for p in s] for n, s in real_bank.static_suites().items()},
                     static_hashes=real_bank.static_hashes,
                     state=BankState.model_validate({**st.model_dump(), "clusters": clusters}),
                     config=real_bank.config)
    checks = {v.check for v in broken.verify().violations}
    assert {"whole_clusters", "static_pinned", "disjoint_cluster_id"} <= checks
    assert GROUPS["open"] == "visible" and GROUPS["held_out"] == "hidden"
