"""Property: any sequence of rotations, race uses and growth keeps the guard (docs/arena.md §15: race set disjoint
from the open suite by cluster; static suites never train-visible)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shoparena.tasks.banks import GROUPS, BankConfig, BankSet
from shoparena.tasks.types import Problem, RewardItem
from tests.banks import synthetic_bank

op = st.one_of(
    st.tuples(st.just("rotate"), st.integers(0, 4)),
    st.tuples(st.just("use"), st.integers(0, 6)),
    st.tuples(st.just("extend"), st.integers(0, 3)),
    st.tuples(st.just("bridge"), st.integers(0, 10_000)),
)


def _check(banks: BankSet, ever_visible: set[str], static_ids: set[str], n: int) -> None:
    report = banks.verify(recluster=False)
    assert report.ok, report.violations
    part = banks.partition_map()
    assert len(part) == n == sum(s["problems"] for s in report.sizes.values())
    visible = {pid for pid, p in part.items() if GROUPS[p] == "visible"}
    assert ever_visible - static_ids <= visible | {pid for pid, p in part.items() if p == "static"}
    assert all(part[pid] == "static" for pid in static_ids)
    ever_visible |= visible


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), held=st.floats(0.05, 0.5), opened=st.floats(0.0, 0.45),
       open_ttl=st.integers(1, 4), held_ttl=st.one_of(st.none(), st.integers(1, 3)),
       ops=st.lists(op, max_size=14))
def test_rotation_preserves_disjointness(seed: int, held: float, opened: float, open_ttl: int,
                                         held_ttl: int | None, ops: list[tuple[str, int]]) -> None:
    suite = synthetic_bank(3, seed=seed, prefix="st")
    cfg = BankConfig(held_out_fraction=held, open_fraction=opened, open_ttl_days=open_ttl, held_out_ttl_days=held_ttl)
    banks = BankSet.build(synthetic_bank(30, seed=seed), static={"suite": suite}, seed=seed, config=cfg)
    static_ids = {p.problem_id for p in banks.problems("static")}
    ever: set[str] = set()
    n = len(banks.partition_map())
    _check(banks, ever, static_ids, n)
    day, grown = 0, 0
    for kind, k in ops:
        if kind == "rotate":
            day += k
            banks.rotate(day)
        elif kind == "use":
            banks.mark_used(p.problem_id for p in banks.draw("held_out", k, seed=f"{seed}:{day}"))
        elif kind == "extend":
            grown += 1
            banks.extend(synthetic_bank(k, seed=seed * 100 + grown, prefix=f"g{grown}-"), day=day)
        else:  # a new problem sharing GT products with two random existing problems, static ones included
            ids = sorted(banks.partition_map())
            a, b = banks.problem(ids[k % len(ids)]), banks.problem(ids[(k * 7 + 3) % len(ids)])
            grown += 1
            banks.extend([Problem(problem_id=f"bridge{grown}", bucket="shop", query=f"bridge number {grown} words",
                                  reward=[RewardItem(product_id=a.gt_ids()[0], title=["a"]),
                                          RewardItem(product_id=b.gt_ids()[0], title=["b"])])], day=day)
        static_ids = {p.problem_id for p in banks.problems("static")} | static_ids
        n = len(banks.partition_map())
        _check(banks, ever, static_ids, n)
        assert {p.problem_id for p in banks.static_suites()["suite"]} == {p.problem_id for p in suite}
    assert banks.verify().ok
