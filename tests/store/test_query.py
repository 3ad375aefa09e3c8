"""Queries by every indexed field, ordering, limits, lightweight rows, streaming and stats."""

from __future__ import annotations

import pytest

from shoparena.errors import ConfigError
from shoparena.store import RecordQuery, TrajectoryStore
from shoparena.store.types import TrajectoryRecord
from tests.store.conftest import rec

N = 40


@pytest.fixture
def filled(store: TrajectoryStore) -> tuple[TrajectoryStore, list[TrajectoryRecord]]:
    records = [rec(i).sealed(1_000 + i) for i in range(N)]
    rescored = records[0].model_copy(update={"pipeline": records[0].pipeline.model_copy(update={"judge": "llm"})})
    assert store.append_many([*records, rescored.sealed(2_000)]) == N + 1
    return store, [*records, rescored.sealed(2_000)]


def _ids(records: object) -> set[str]:
    return {r.record_id for r in records}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("field", "value"), [
    ("agent_id", "agent-1"), ("agent_version", "v1"), ("problem_id", "p000007"), ("cluster_id", "c3"),
    ("suite", "open"), ("eval_run_id", "run-0-0"), ("axis", "B"), ("status", "TIMED_OUT"), ("bucket", "shop"),
    ("success", True), ("success", False),
])
def test_filter_by_field(filled: tuple[TrajectoryStore, list[TrajectoryRecord]], field: str, value: object) -> None:
    store, records = filled
    want = {r.record_id for r in records if getattr(r, field) == value}
    assert want, "the fixture should cover this value"
    assert _ids(store.query(**{field: value})) == want
    assert _ids(store.rows(**{field: value})) == want
    assert store.count(**{field: value}) == len(want)


def test_any_of_several_values(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    want = {r.record_id for r in records if r.axis in ("A", "none") and r.cluster_id in ("c1", "c2")}
    assert _ids(store.query(axis=["A", "none"], cluster_id=("c1", "c2"))) == want


def test_time_range_and_judge_score_range(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    assert _ids(store.query(since=1_010, until=1_020)) == {r.record_id for r in records
                                                          if 1_010 <= r.created_at < 1_020}
    want = {r.record_id for r in records if r.judge_score is not None and 0.3 <= r.judge_score <= 0.7}
    assert _ids(store.query(min_judge_score=0.3, max_judge_score=0.7)) == want


def test_pipeline_version(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    new = records[-1].pipeline_version
    assert [r.record_id for r in store.query(pipeline_version=new)] == [records[-1].record_id]
    assert store.count(pipeline_version=records[0].pipeline_version) == N


def test_order_and_limit(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    assert [r.record_id for r in store.query(limit=3)] == [r.record_id for r in records[:3]]
    assert [r.record_id for r in store.query(limit=2, descending=True)] == [records[-1].record_id,
                                                                          records[-2].record_id]
    by_score = [r.judge_score for r in store.rows(order_by="judge_score", descending=True)]
    assert by_score == sorted(by_score, reverse=True)
    assert [r.created_at for r in store.rows(order_by="created_at")] == sorted(r.created_at for r in records)
    assert list(store.query(limit=0)) == []
    assert store.count(limit=5) == 5


def test_query_object_and_keywords_combine(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    q = RecordQuery(agent_id="agent-2")
    want = {r.record_id for r in records if r.agent_id == "agent-2" and r.success}
    assert _ids(store.query(q, success=True)) == want


def test_unknown_filter_is_a_config_error(store: TrajectoryStore) -> None:
    with pytest.raises(ConfigError, match="unknown record filter"):
        list(store.query(agent="x"))


def test_streaming_in_small_chunks_while_appending(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    """A reader sees one consistent snapshot, fetched chunk by chunk, while a writer keeps appending."""
    store, records = filled
    stream = store.query(chunk=4)
    first = next(stream)
    assert store.append(rec(1000))
    rest = list(stream)
    assert [first.record_id, *(r.record_id for r in rest)] == [r.record_id for r in records]
    assert store.count() == N + 2


def test_an_abandoned_stream_does_not_block_writers(store: TrajectoryStore) -> None:
    store.append_many([rec(i) for i in range(10)])
    stream = store.query(chunk=2)
    next(stream)
    del stream
    assert store.append(rec(99))


def test_stats_counts_by_status_axis_bucket_pipeline(filled: tuple[TrajectoryStore, list[TrajectoryRecord]]) -> None:
    store, records = filled
    s = store.stats()
    assert s.records == N + 1 and s.schema_version >= 1
    for name, field in (("by_status", "status"), ("by_axis", "axis"), ("by_bucket", "bucket"),
                        ("by_pipeline", "pipeline_version")):
        want: dict[str, int] = {}
        for r in records:
            want[getattr(r, field)] = want.get(getattr(r, field), 0) + 1
        assert getattr(s, name) == want
    assert (s.first_created_at, s.last_created_at) == (1_000, 2_000)


def test_stats_of_an_empty_store(store: TrajectoryStore) -> None:
    s = store.stats()
    assert s.records == 0 and s.by_status == {} and s.first_created_at is None
