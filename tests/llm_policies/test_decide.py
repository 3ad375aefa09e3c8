"""Seeded, temperature-driven choices."""

from __future__ import annotations

from collections import Counter

from shoparena.llm.policies.decide import Decider, stable_seed


def test_greedy_takes_the_first_best_and_the_first_phrase() -> None:
    d = Decider(1, temperature=0.0)
    assert d.pick([0.1, 2.0, 2.0, -1.0]) == 1
    assert d.phrase(["a", "b", "c"]) == "a"
    assert d.chance(0.6) and not d.chance(0.4)
    assert d.noise(3.0) == 0.0


def test_softmax_follows_temperature() -> None:
    draws = Counter(Decider(s, temperature=1.0).pick([0.0, -1.0]) for s in range(2000))
    assert 0.66 < draws[0] / 2000 < 0.80  # e / (1 + e) = 0.73
    cold = Counter(Decider(s, temperature=0.1).pick([0.0, -1.0]) for s in range(500))
    assert cold[0] > 495


def test_top_p_cuts_the_tail() -> None:
    draws = Counter(Decider(s, temperature=1.0, top_p=0.5).pick([0.0, -0.1, -5.0]) for s in range(500))
    assert draws[2] == 0


def test_chance_sharpens_below_t1() -> None:
    rate = sum(Decider(s, temperature=0.5).chance(0.7) for s in range(2000)) / 2000
    assert 0.80 < rate < 0.90  # sigmoid(2·logit(0.7)) = 0.845


def test_stable_seed_is_stable() -> None:
    assert stable_seed("expert", 3, "q") == stable_seed("expert", 3, "q") != stable_seed("expert", 4, "q")
    assert stable_seed("a") == 160997478742474337  # BLAKE2b, not the per-process str hash
