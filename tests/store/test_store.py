"""Appends, idempotency and content addressing, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from shoparena.errors import DataError
from shoparena.store import TrajectoryStore, open_store
from shoparena.store.testing import synthetic_record
from shoparena.store.types import body_problems, canonical_json
from tests.store.conftest import rec


def test_round_trip_returns_the_sealed_record(store: TrajectoryStore) -> None:
    r = rec(1)
    assert store.append(r)
    [got] = list(store.query())
    assert got.is_sealed and got.created_at > 0
    assert got == r.sealed(got.created_at)
    assert store.get(got.record_id) == got
    assert store.get("0" * 64) is None
    assert body_problems(got.model_dump()) == []


def test_realistic_20kb_record_round_trips_byte_for_byte(store: TrajectoryStore) -> None:
    r = synthetic_record(3).sealed(1_700_000_000_000)
    assert len(canonical_json(r.model_dump())) > 15_000
    assert store.append(r)
    assert list(store.bodies()) == [canonical_json(r.model_dump())]
    assert store.get(r.record_id) == r


def test_second_append_of_the_same_evaluation_is_a_noop(store: TrajectoryStore) -> None:
    assert store.append(rec(1)) is True
    assert store.append(rec(1)) is False
    assert store.append(rec(1).sealed(123)) is False  # same record sealed at another time: same key
    assert store.count() == 1


def test_same_key_different_content_keeps_the_first(store: TrajectoryStore) -> None:
    """Exactly one record per (eval_run, problem, pipeline): a retried run with another trace is not stored."""
    first = rec(1)
    other = first.model_copy(update={"steps": [{"step": 0, "think": "different"}]})
    assert store.append(first)
    assert not store.append(other)
    [got] = list(store.query())
    assert got.steps == first.steps


def test_rescore_under_a_new_pipeline_appends_a_new_record(store: TrajectoryStore) -> None:
    r = rec(1)
    rescored = r.model_copy(update={"pipeline": r.pipeline.model_copy(update={"scorer": "shoparena-rule/2"})})
    assert store.append(r) and store.append(rescored)
    assert store.count() == 2
    assert len({row.pipeline_version for row in store.rows()}) == 2


def test_append_many_is_one_transaction_and_counts_new_records(store: TrajectoryStore) -> None:
    assert store.append_many([rec(i) for i in range(5)]) == 5
    assert store.append_many([rec(i) for i in range(3, 8)] + [rec(7), rec(7)]) == 3
    assert store.append_many([]) == 0
    assert store.count() == 8


def test_append_many_rolls_back_entirely_on_a_bad_record(store: TrajectoryStore) -> None:
    good = [rec(i) for i in range(3)]
    tampered = rec(9).sealed(0).model_copy(update={"success": not rec(9).success})
    with pytest.raises(DataError):
        store.append_many([*good, tampered])
    assert store.count() == 0


def test_sealed_record_whose_id_does_not_match_its_content_is_refused(store: TrajectoryStore) -> None:
    sealed = rec(1).sealed(0)
    with pytest.raises(DataError, match="does not match its content"):
        store.append(sealed.model_copy(update={"judge_score": 0.0}))
    with pytest.raises(DataError, match="trace_sha256"):
        store.append(sealed.model_copy(update={"trace_sha256": "0" * 64}))
    assert store.count() == 0


def test_verify_reports_tampered_rows(store: TrajectoryStore, store_url: str) -> None:
    store.append_many([rec(i) for i in range(3)])
    assert store.verify().ok and store.verify().checked == 3
    victim = next(store.rows()).record_id
    engine = store._engine
    with engine.begin() as conn:  # an attacker with DDL rights first disables the append-only guard
        if engine.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE trajectory_records DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER trajectory_records_no_update"))
        conn.execute(text("UPDATE trajectory_records SET body = replace(body, :a, :b) "
                          "WHERE record_id = :r"), {"a": '"judge_score":', "b": '"judge_score":0.01,"x":', "r": victim})
    report = store.verify()
    assert report.checked == 3 and not report.ok
    assert {rid for rid, _ in report.mismatches} == {victim}
    whys = [why for _, why in report.mismatches]
    assert any(w.startswith("record_id") for w in whys) and any(w.startswith("column judge_score") for w in whys)


def test_reopening_keeps_everything(store_url: str) -> None:
    with open_store(store_url) as st:
        st.append_many([rec(i) for i in range(4)])
        before = [r.record_id for r in st.rows()]
    with open_store(store_url) as st:
        assert [r.record_id for r in st.rows()] == before
        assert st.verify().ok


def test_in_memory_sqlite_store() -> None:
    with open_store("sqlite://") as st:
        assert st.append(rec(1)) and not st.append(rec(1))
        assert st.count() == 1 and st.verify().ok
