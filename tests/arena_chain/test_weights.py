"""ORO's top-50 % weight rule (docs/arena.md §9, §15)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoparena.arena.weights import Finisher, build_weights, rank_finishers, weight_shares
from shoparena.errors import ConfigError

HOTKEYS = ["owner"] + [f"hk{i}" for i in range(1, 12)]


def _f(hotkey: str, score: float, version: int | str) -> Finisher:
    return Finisher(hotkey=hotkey, race_score=score, agent_version_id=version)


def _six() -> list[Finisher]:
    return [_f(f"hk{i}", 0.9 - 0.1 * i, i) for i in range(1, 7)]


def test_worked_example_six_finishers() -> None:
    vector = build_weights(_six(), HOTKEYS)
    assert vector == [65535, 21846, 2, 1, 0, 0, 0] + [0] * 5
    shares = weight_shares(vector)
    assert round(shares[0], 6) == 0.749966
    assert round(shares[1], 6) == 0.250000
    assert round(sum(shares[2:]), 6) == 0.000034


def test_tie_break_is_score_desc_then_version_asc() -> None:
    finishers = [_f("hk1", 0.5, 7), _f("hk2", 0.5, 3), _f("hk3", 0.9, 9), _f("hk4", 0.1, 1)]
    assert [f.hotkey for f in rank_finishers(finishers, HOTKEYS)] == ["hk3", "hk2", "hk1", "hk4"]
    vector = build_weights(finishers, HOTKEYS)  # K = 2: hk3 top, hk2 gets 1
    assert vector[3] > 1 and vector[2] == 1 and vector[1] == 0 and vector[4] == 0


def test_string_version_ids_sort_after_ints_and_lexically() -> None:
    finishers = [_f("hk1", 1.0, "b"), _f("hk2", 1.0, "a"), _f("hk3", 1.0, 5)]
    assert [f.hotkey for f in rank_finishers(finishers, HOTKEYS)] == ["hk3", "hk2", "hk1"]


def test_unregistered_finishers_are_dropped_before_computing() -> None:
    finishers = [_f("gone", 10.0, 0), *_six()]  # the best finisher has deregistered: N = 6, not 7
    assert build_weights(finishers, HOTKEYS) == build_weights(_six(), HOTKEYS)


def test_a_finisher_on_the_burn_uid_does_not_count() -> None:
    assert build_weights([_f("owner", 10.0, 0), *_six()], HOTKEYS) == build_weights(_six(), HOTKEYS)


def test_a_duplicate_hotkey_keeps_its_best_entry() -> None:
    finishers = [*_six(), _f("hk6", 0.95, 99)]
    ranked = rank_finishers(finishers, HOTKEYS)
    assert [f.hotkey for f in ranked][:2] == ["hk6", "hk1"] and len(ranked) == 6


@pytest.mark.parametrize("finishers", [None, [], [_f("hk1", 1.0, 1)], [_f("nobody", 1.0, 1), _f("hk2", 1.0, 2)]])
def test_k_zero_sends_everything_to_uid_zero(finishers: list[Finisher] | None) -> None:
    assert build_weights(finishers, HOTKEYS) == [65535] + [0] * 11


def test_two_finishers_one_winner_no_tail() -> None:
    vector = build_weights([_f("hk1", 1.0, 1), _f("hk2", 0.5, 2)], HOTKEYS)
    assert vector[:3] == [65535, 21845, 0]  # round(0.25 · 65535 / 0.75)


def test_empty_metagraph_gives_an_empty_vector() -> None:
    assert build_weights(_six(), []) == []


def test_other_splits() -> None:
    vector = build_weights(_six(), HOTKEYS, t_top=0.5, t_burn=0.5)  # the top no longer fits under 65535
    assert vector[:4] == [65535 - 3, 65535, 2, 1]
    assert weight_shares(vector)[1] == 0.5
    assert build_weights(_six(), HOTKEYS, t_top=0.0, t_burn=1.0)[:4] == [65535, 0, 2, 1]


@pytest.mark.parametrize(("t_top", "t_burn"), [(0.3, 0.6), (-0.1, 1.1), (1.0, 0.0), (float("nan"), 0.5)])
def test_invalid_splits_are_refused(t_top: float, t_burn: float) -> None:
    with pytest.raises(ConfigError):
        build_weights(_six(), HOTKEYS, t_top=t_top, t_burn=t_burn)


def test_finisher_rejects_nan_scores() -> None:
    with pytest.raises(ValueError):
        Finisher(hotkey="hk1", race_score=float("nan"), agent_version_id=1)


_finisher = st.builds(
    Finisher,
    hotkey=st.sampled_from([*HOTKEYS, "ghost-1", "ghost-2"]),
    race_score=st.floats(min_value=0, max_value=1, allow_nan=False).map(lambda x: round(x, 2)),
    agent_version_id=st.one_of(st.integers(0, 20), st.sampled_from(["a", "b", "c"])),
)


@settings(max_examples=200, deadline=None)
@given(finishers=st.lists(_finisher, max_size=20), data=st.data())
def test_vector_is_independent_of_input_order(finishers: list[Finisher], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(finishers))
    assert build_weights(shuffled, HOTKEYS) == build_weights(finishers, HOTKEYS)


@settings(max_examples=200, deadline=None)
@given(finishers=st.lists(_finisher, max_size=20))
def test_invariants(finishers: list[Finisher]) -> None:
    vector = build_weights(finishers, HOTKEYS)
    assert len(vector) == len(HOTKEYS) and all(0 <= w <= 65535 for w in vector)
    assert vector[0] == 65535  # uid 0 always holds the pinned burn
    ranked = rank_finishers(finishers, HOTKEYS)
    k = len(ranked) // 2
    if k == 0:
        assert sum(vector) == 65535
        return
    total = sum(vector)
    top = vector[HOTKEYS.index(ranked[0].hotkey)]
    assert abs(top / total - 0.25) <= 0.5 / total  # exactly t_top up to u16 rounding
    assert sorted((w for w in vector[1:] if w), reverse=True) == [top, *range(k - 1, 0, -1)]
    assert {HOTKEYS[u] for u, w in enumerate(vector) if w and u} == {f.hotkey for f in ranked[:k]}
