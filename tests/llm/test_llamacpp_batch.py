"""``llamacpp:`` batched mode (shoparena/llm/llamacpp_batch.py) on a tiny prepared checkpoint: concurrent requests
give the text each gives alone and the ``slots`` path's greedy text; a shared prompt prefix is evaluated once and
copied; an episode's next turn continues its own sequence; seeds repeat; abandoned, evicted and failed requests end
as they should. Needs ``llama-cpp-python`` (``make llamacpp``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from shoparena.llm.types import Sampling
from tests.sharp import SetAfter, sharpened_copy

SYSTEM = {"role": "system", "content": "You are a shopping assistant. " + "Search the catalog before you answer. " * 12}
QUERIES = ["find a red dress under 700", "wireless earbuds", "a steel water bottle", "running shoes size 42",
           "a gift for a gardener", "a waterproof backpack"]


@pytest.fixture(scope="module")
def sharp(prepared: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint with prompt-dependent greedy continuations (tests/sharp.py)."""
    return sharpened_copy(prepared, tmp_path_factory.mktemp("sharp") / "sharp")


def _conversation(i: int) -> list[dict[str, Any]]:
    return [SYSTEM, {"role": "user", "content": QUERIES[i % len(QUERIES)]}]


def _backend(prepared: Path, **options: Any) -> Any:
    from shoparena.llm.llamacpp_backend import LlamaCppBackend

    return LlamaCppBackend(prepared, dtype="F32", threads=1, **options)


def _concurrently(fn: Any, n: int) -> list[Any]:
    out: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            out[i] = fn(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


def test_concurrent_requests_give_the_slots_paths_greedy_text_and_share_the_prefix(sharp: Path) -> None:
    greedy = Sampling(temperature=0.0, max_tokens=16)
    slots = _backend(sharp, mode="slots", slots=1)
    try:
        want = [slots.generate(_conversation(i), None, greedy) for i in range(6)]
    finally:
        slots.close()
    assert len({w[0] for w in want}) > 1  # the conversations lead to different texts: the comparison means something
    batched = _backend(sharp, mode="batched", parallel=8)
    try:
        got = _concurrently(lambda i: batched.generate(_conversation(i), None, greedy), 6)
        stats = batched._engines[0].stats
    finally:
        batched.close()
    # Batched logits are summed in another order than one sequence's (other kernel shapes, the shared prefix's
    # cells): a near-tie between two candidates may go the other way late in a turn, never early.
    assert [g[1:] for g in got] == [w[1:] for w in want]  # same prompt tokens, same lengths
    assert all(g[0][:6] == w[0][:6] for g, w in zip(got, want, strict=True))
    assert sum(g == w for g, w in zip(got, want, strict=True)) >= 5
    # The system block is evaluated once: every later request copies it and evaluates only its own tail.
    prompt = want[0][1]
    assert stats.prefix_copies >= 5
    assert stats.prompt_tokens == sum(w[1] for w in want)
    assert stats.prompt_tokens_evaluated < stats.prompt_tokens - 4 * (prompt // 2)


def test_a_next_turn_continues_its_own_sequence(sharp: Path) -> None:
    greedy = Sampling(temperature=0.0, max_tokens=12)
    lc = _backend(sharp, mode="batched", parallel=4)
    try:
        first = _conversation(0)
        text, n_prompt, _ = lc.generate(first, None, greedy)
        second = [*first, {"role": "assistant", "content": text},
                  {"role": "user", "content": "cheaper, please"}]
        text2, n_prompt2, _ = lc.generate(second, None, greedy)
        timing = lc.last_call.timing
        assert lc._engines[0].stats.takeovers == 1
        assert timing.prompt_tokens == n_prompt2
        assert timing.prompt_evaluated < n_prompt2 - n_prompt // 2  # only what the first turn did not hold
    finally:
        lc.close()
    fresh = _backend(sharp, mode="batched", parallel=4)
    try:
        assert fresh.generate(second, None, greedy)[0] == text2  # reusing the cache changed nothing
    finally:
        fresh.close()


def test_seeds_repeat_in_batched_mode(sharp: Path) -> None:
    lc = _backend(sharp, mode="batched", parallel=4)
    try:
        hot = Sampling(temperature=1.0, max_tokens=12, seed=7)
        first = lc.generate(_conversation(1), None, hot)
        assert lc.generate(_conversation(1), None, hot) == first
        together = _concurrently(lambda i: lc.generate(_conversation(1), None, hot), 3)
        assert all(t == first for t in together)  # a request's draws are its own, whatever shares the batch
        assert any(lc.generate(_conversation(1), None, Sampling(temperature=1.0, max_tokens=12, seed=s))[0]
                   != first[0] for s in (8, 9, 10))
    finally:
        lc.close()


def test_more_conversations_than_sequences_evict_idle_ones_and_all_finish(sharp: Path) -> None:
    greedy = Sampling(temperature=0.0, max_tokens=8)
    lc = _backend(sharp, mode="batched", parallel=2)
    try:
        alone = [lc.generate([{"role": "user", "content": f"{q} number {i}"}], None, greedy)
                 for i, q in enumerate(QUERIES)]
        together = _concurrently(
            lambda i: lc.generate([{"role": "user", "content": f"{QUERIES[i]} number {i}"}], None, greedy), 6)
        assert lc._engines[0].stats.evictions > 0
    finally:
        lc.close()
    assert together == alone


def test_stop_strings_and_the_turn_cap(sharp: Path) -> None:
    slots = _backend(sharp, mode="slots", slots=1)
    batched = _backend(sharp, mode="batched", parallel=2)
    try:
        base = Sampling(temperature=0.0, max_tokens=24)
        text = slots.generate(_conversation(2), None, base)[0]
        assert len(text) > 4
        stop = Sampling(temperature=0.0, max_tokens=24, stop=[text[2:4]])
        assert batched.generate(_conversation(2), None, stop) == slots.generate(_conversation(2), None, stop)
        assert text[2:4] not in batched.generate(_conversation(2), None, stop)[0]
        capped = Sampling(temperature=0.0, max_tokens=3)
        assert batched.generate(_conversation(2), None, capped)[2] <= 3
    finally:
        slots.close()
        batched.close()


def test_an_abandoned_request_raises_and_leaves_the_others_whole(sharp: Path) -> None:
    from shoparena.llm.abandon import Abandoned, abandon_when

    greedy = Sampling(temperature=0.0, max_tokens=20)
    lc = _backend(sharp, mode="batched", parallel=2)
    try:
        control = lc.generate(_conversation(3), None, greedy)
        assert control[2] > 5
        closed = threading.Event()
        closed.set()
        with abandon_when(closed), pytest.raises(Abandoned):
            lc.generate(_conversation(3), None, greedy)
        midway = SetAfter(4)
        with abandon_when(midway), pytest.raises(Abandoned):  # type: ignore[arg-type]
            lc.generate(_conversation(3), None, greedy)
        assert 4 <= midway.looks < control[2] + 2  # it stopped part-way, not at the end
        assert lc.generate(_conversation(3), None, greedy) == control
    finally:
        lc.close()


def test_a_closed_engine_fails_its_callers_with_a_backend_error(sharp: Path) -> None:
    from shoparena.errors import BackendError

    lc = _backend(sharp, mode="batched", parallel=2)
    engine = lc._engines[0]
    engine.close()
    with pytest.raises(BackendError, match="stopped"):
        lc.generate(_conversation(0), None, Sampling(temperature=0.0, max_tokens=4))
    lc._engines = []


def test_two_engines_share_new_episodes_and_keep_each_episode_on_its_own(sharp: Path) -> None:
    from shoparena.llm.llamacpp_backend import LlamaCppBackend

    greedy = Sampling(temperature=0.0, max_tokens=8)
    one = _backend(sharp, mode="batched", parallel=4)
    two = LlamaCppBackend(sharp, mode="batched", dtype="F32", threads=2, engines=2, parallel=4)
    try:
        assert len(two._engines) == 2
        firsts = _concurrently(lambda i: two.generate(_conversation(i), None, greedy), 4)
        assert all(e.stats.prompt_tokens > 0 for e in two._engines)  # new episodes went to both engines
        seconds = [[*_conversation(i), {"role": "assistant", "content": firsts[i][0]},
                    {"role": "user", "content": "cheaper"}] for i in range(4)]
        again = _concurrently(lambda i: two.generate(seconds[i], None, greedy), 4)
        assert sum(e.stats.takeovers for e in two._engines) == 4  # every next turn found its own sequence
        alone = [one.generate(m, None, greedy) for m in seconds]
    finally:
        one.close()
        two.close()
    assert [a[1:] for a in again] == [a[1:] for a in alone]
    assert sum(a == b for a, b in zip(again, alone, strict=True)) >= 3
