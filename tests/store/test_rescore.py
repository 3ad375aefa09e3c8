"""``shoparena store rescore`` and :mod:`shoparena.validator.rescore` over a store written by the real validator loop
(:func:`shoparena.corpus.testing.seed_world`: react, pipeline and react-expert on 6 generated problems → 18
records), copied into a fresh SQLite file or PostgreSQL schema per test."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from shoparena.catalog.directory import index_path
from shoparena.catalog.index import SearchIndex
from shoparena.scoring.scorer import Scorer
from shoparena.scoring.types import FIELDS
from shoparena.store import TrajectoryStore, open_store
from shoparena.store.schema import records
from shoparena.store.types import RecordQuery, TrajectoryRecord
from shoparena.tasks.loader import dump_problems
from shoparena.tasks.types import Problem
from shoparena.validator.rescore import (
    RESCORE_TAG,
    RescoreReport,
    is_rescore,
    original_of,
    rescore_store,
)

N_PROBLEMS = 6
N_RECORDS = 3 * N_PROBLEMS  # three agents of seed_world
REPORT_KEYS = {"store", "mode", "similarity", "catalog_sha256", "dry_run", "considered", "rescored", "appended",
               "already_rescored", "skipped", "changed", "gained", "lost", "rule_changed", "catalog_mismatch",
               "limit_reached", "pipelines", "by_bucket", "by_axis", "examples"}


@dataclass(frozen=True)
class World:
    catalog: Path
    problems: list[Problem]
    problems_file: Path
    store_file: Path
    index: Any


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    from shoparena.corpus.testing import seed_world

    root = tmp_path_factory.mktemp("rescore")
    w = seed_world(root, n_problems=N_PROBLEMS)
    dump_problems(w.problems, root / "problems.jsonl")
    return World(catalog=w.catalog, problems=w.problems, problems_file=root / "problems.jsonl",
                 store_file=root / "store.db", index=SearchIndex.open(index_path(w.catalog)))


@pytest.fixture
def seeded(world: World, store_url: str) -> str:
    """``store_url`` (a fresh SQLite file or PostgreSQL schema) holding the seed world's records, as stored."""
    with open_store(f"sqlite:///{world.store_file}", create=False) as src:
        originals = list(src.query())
    assert len(originals) == N_RECORDS
    with open_store(store_url) as dst:
        assert dst.append_many(originals) == N_RECORDS
    return store_url


def by_id(world: World) -> dict[str, Problem]:
    return {p.problem_id: p for p in world.problems}


def raw_rows(store: TrajectoryStore) -> list[tuple[Any, ...]]:
    """Every stored row, every column, in append order (what "untouched" is checked against)."""
    with store._engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(records).order_by(records.c.seq))]


def run(store: TrajectoryStore, world: World, **kw: Any) -> RescoreReport:
    return rescore_store(store, world.index, kw.pop("problems", by_id(world)), **kw)


# -- the library ------------------------------------------------------------------------------------------------
def test_one_new_record_per_original_under_a_new_pipeline(world: World, seeded: str) -> None:
    with open_store(seeded) as st:
        before = raw_rows(st)
        originals = list(st.query())
        report = run(st, world, batch=4)  # appends while the read stream is open
        assert report.rescored == report.appended == N_RECORDS
        assert report.considered == N_RECORDS and report.already_rescored == 0 and report.skipped == {}
        assert raw_rows(st)[:N_RECORDS] == before  # the originals are byte-identical
        assert st.count() == 2 * N_RECORDS and st.verify().ok
        (new_pv,) = report.pipelines
        fresh = list(st.query(pipeline_version=new_pv))
        assert len(fresh) == N_RECORDS
        old_pvs = {r.pipeline_version for r in originals}
        assert new_pv not in old_pvs
        pipeline = report.pipelines[new_pv]
        assert pipeline.scorer.endswith(RESCORE_TAG) and pipeline.scorer_mode == "strict"
        assert pipeline.catalog_sha256 == world.index.catalog_sha256
        # exactly one per original, carrying its whole trajectory; provenance resolves to it
        by_original = {r.record_id: r for r in originals}
        seen = Counter()
        for new in fresh:
            orig = original_of(st, new)
            assert orig is not None and orig.record_id in by_original
            seen[orig.record_id] += 1
            same = ("eval_run_id", "agent_id", "agent_version", "agent_code_sha256", "miner_hotkey",
                    "validator_hotkey", "problem_id", "suite", "cluster_id", "bucket", "status", "steps", "messages",
                    "trace_sha256", "call_log", "call_log_sha256", "axis", "judge", "judge_score", "coefficient",
                    "started_at", "finished_at")
            assert {k: getattr(new, k) for k in same} == {k: getattr(orig, k) for k in same}
            assert new.pipeline.judge == orig.pipeline.judge and is_rescore(new.pipeline)
            assert new.idempotency_key == f"{orig.eval_run_id}|{orig.problem_id}|{new_pv}"
        assert set(seen) == set(by_original) and set(seen.values()) == {1}
        assert original_of(st, originals[0]) is None  # an original is no re-score


def test_unchanged_scorer_changes_no_outcome(world: World, seeded: str) -> None:
    with open_store(seeded) as st:
        originals = {(r.eval_run_id, r.problem_id): r for r in st.query()}
        report = run(st, world, mode="strict")
        fresh = list(st.query(pipeline_version=tuple(report.pipelines)))
    assert report.changed == report.gained == report.lost == report.rule_changed == 0
    assert report.examples == []
    for new in fresh:  # the same pure function of the same stored run gives the same score, field for field
        assert new.outcome == originals[(new.eval_run_id, new.problem_id)].outcome
    buckets = Counter(r.bucket for r in originals.values())
    assert {b: d.rescored for b, d in report.by_bucket.items()} == dict(buckets)
    for b, d in report.by_bucket.items():
        solved = sum(r.success for r in originals.values() if r.bucket == b)
        assert d.changed == 0 and d.success_before == d.success_after == solved
    for f in FIELDS:
        a = report.by_axis[f]
        assert (a.hits_before, a.total_before) == (a.hits_after, a.total_after)
    assert report.by_axis["title"].total_before > 0


def test_rerun_appends_nothing(world: World, seeded: str) -> None:
    with open_store(seeded) as st:
        run(st, world)
        rows = raw_rows(st)
        again = run(st, world)
        assert raw_rows(st) == rows
    assert again.rescored == again.appended == 0
    assert again.already_rescored == N_RECORDS and again.skipped == {"rescore_record": N_RECORDS}
    assert again.considered == 2 * N_RECORDS


def test_upstream_mode_shows_the_flipped_outcomes(world: World, seeded: str) -> None:
    # the oracle: each original's steps scored directly by an upstream-mode scorer
    scorer = Scorer(world.index, mode="upstream")
    problems = by_id(world)
    with open_store(seeded) as st:
        originals = list(st.query())
        want: dict[str, Counter[str]] = {}
        for r in originals:
            ok = scorer.score_steps(problems[r.problem_id], {"status": r.status, "dialogue": r.steps}).success
            c = want.setdefault(r.bucket, Counter())
            c["gained"] += ok and not r.success
            c["lost"] += r.success and not ok
        strict = run(st, world, mode="strict")
        upstream = run(st, world, mode="upstream")
        assert st.count() == 3 * N_RECORDS
        assert len(st.stats().by_pipeline) == 3  # originals, strict re-score, upstream re-score
    assert strict.changed == 0
    assert upstream.rescored == N_RECORDS and upstream.skipped == {"rescore_record": N_RECORDS}
    assert set(upstream.pipelines).isdisjoint(strict.pipelines)
    assert all(p.scorer_mode == "upstream" for p in upstream.pipelines.values())
    total = sum(c["gained"] + c["lost"] for c in want.values())
    assert total > 0, "the seed world should hold a record whose outcome differs under upstream scoring"
    assert upstream.changed == total
    for bucket, c in want.items():
        d = upstream.by_bucket[bucket]
        assert (d.gained, d.lost, d.changed) == (c["gained"], c["lost"], c["gained"] + c["lost"])
        assert d.success_after - d.success_before == c["gained"] - c["lost"]
    flips = [e for e in upstream.examples if e.success_before != e.success_after]
    assert flips and len(flips) == min(total, 5) and upstream.examples[:len(flips)] == flips
    with open_store(seeded) as st:
        for e in flips:
            new = st.get(e.new_record_id)
            assert new is not None and new.success == e.success_after and new.outcome["rule"] == e.rule_after
            orig = st.get(e.record_id)
            assert orig is not None and orig.success == e.success_before and original_of(st, new) == orig


def test_unresolvable_problems_are_skipped_with_a_reason(world: World, seeded: str) -> None:
    problems = by_id(world)
    product = [p for p in world.problems if p.bucket == "product"]
    shop = next(p for p in world.problems if p.bucket == "shop")
    for p in product:
        del problems[p.problem_id]
    problems[shop.problem_id] = shop.model_copy(update={"query": shop.query + " (edited)"})
    with open_store(seeded) as st:
        report = run(st, world, problems=problems)
        n_product = sum(r.bucket == "product" for r in st.query())
        n_shop = sum(r.problem_id == shop.problem_id for r in st.query())
    assert report.skipped == {"unknown_problem": n_product, "problem_mismatch": n_shop}
    assert report.rescored == N_RECORDS - n_product - n_shop == report.appended
    assert "product" not in report.by_bucket


def test_dry_run_and_limit(world: World, seeded: str) -> None:
    with open_store(seeded) as st:
        rows = raw_rows(st)
        dry = run(st, world, mode="upstream", dry_run=True)
        assert raw_rows(st) == rows
        assert dry.dry_run and dry.rescored == N_RECORDS and dry.appended == 0
        first = run(st, world, mode="upstream", limit=5)
        assert first.rescored == first.appended == 5 and first.limit_reached
        rest = run(st, world, mode="upstream")
        assert rest.already_rescored == 5 and rest.rescored == rest.appended == N_RECORDS - 5
        assert not rest.limit_reached and st.count() == 2 * N_RECORDS
    assert first.changed + rest.changed == dry.changed  # the dry run predicted what the two passes did
    assert {e.new_record_id for e in dry.examples} <= {r.record_id for r in _all(seeded)}


def test_since_filters_by_creation_time(world: World, seeded: str) -> None:
    with open_store(seeded) as st:
        latest = max(r.created_at for r in st.query())
        report = rescore_store(st, world.index, by_id(world), query=RecordQuery(since=latest + 1))
    assert report.considered == report.rescored == 0


def test_tampered_record_is_skipped_not_rescored(world: World, tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    _copy_sqlite(world.store_file, path)
    conn = sqlite3.connect(path)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("UPDATE trajectory_records SET body = replace(body, '\"status\":\"SUCCESS\"', "
                 "'\"status\":\"FAILED\"') WHERE seq = (SELECT min(seq) FROM trajectory_records)")
    conn.execute("UPDATE trajectory_records SET body = 'not json' WHERE seq = (SELECT max(seq) FROM "
                 "trajectory_records)")
    conn.commit()
    conn.close()
    with open_store(f"sqlite:///{path}", create=False) as st:
        report = run(st, world)
    assert report.skipped == {"unreadable": 1, "hash_mismatch": 1}
    assert report.rescored == N_RECORDS - 2


def test_problems_from_a_bank_set(world: World, tmp_path: Path) -> None:
    from shoparena.tasks.banks import BankSet
    from shoparena.validator.rescore import load_problem_source, rescore_records

    BankSet.build(world.problems, seed=1).save(tmp_path / "bank")
    assert load_problem_source(banks=tmp_path / "bank") == by_id(world)
    _copy_sqlite(world.store_file, tmp_path / "s.db")
    report = rescore_records(f"sqlite:///{tmp_path / 's.db'}", world.catalog, banks=tmp_path / "bank", dry_run=True)
    assert report.rescored == N_RECORDS and report.changed == 0 and report.appended == 0


def test_in_memory_store(world: World) -> None:
    with open_store(f"sqlite:///{world.store_file}", create=False) as src:
        originals = list(src.query())
    with open_store("sqlite://") as st:
        st.append_many(originals)
        report = run(st, world, batch=4)
        assert report.appended == N_RECORDS and st.count() == 2 * N_RECORDS
        assert run(st, world).already_rescored == N_RECORDS


# -- the command ------------------------------------------------------------------------------------------------
def test_cli_json_and_out(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    path = tmp_path / "s.db"
    _copy_sqlite(world.store_file, path)
    out = tmp_path / "report.json"
    main(["store", "rescore", "--store", f"sqlite:///{path}", "--catalog", str(world.catalog), "--problems",
          str(world.problems_file), "--mode", "upstream", "--since", "2000-01-01T00:00:00Z", "--json",
          "--out", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == REPORT_KEYS and json.loads(out.read_text()) == printed
    assert printed["mode"] == "upstream" and printed["rescored"] == printed["appended"] == N_RECORDS
    assert set(printed["by_axis"]) == set(FIELDS)
    assert set(printed["by_bucket"]["shop"]) == {"rescored", "changed", "gained", "lost", "rule_changed",
                                                 "success_before", "success_after", "asr_before", "asr_after"}
    assert printed["examples"] and set(printed["examples"][0]) == {
        "record_id", "new_record_id", "problem_id", "bucket", "agent_id", "success_before", "success_after",
        "rule_before", "rule_after"}
    # the human view of a re-run: nothing new
    main(["store", "rescore", "--store", f"sqlite:///{path}", "--catalog", str(world.catalog), "--problems",
          str(world.problems_file), "--mode", "upstream", "--dry-run"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"{N_RECORDS} already re-scored" in text and "would append 0" in text


@pytest.mark.parametrize(("case", "code", "needle"), [
    ("missing", 4, "no trajectory store"),
    ("foreign", 3, "not a SQLite database"),
    ("no-problems", 2, "needs the problems"),
    ("bad-mode", 2, "'lenient' is not one of"),
    ("in-memory", 2, "in memory"),
])
def test_cli_errors(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, code: int,
                    needle: str) -> None:
    from shoparena.cli import main

    (tmp_path / "foreign.db").write_bytes(b"\x00garbage" * 64)
    store = {"missing": f"sqlite:///{tmp_path / 'nope.db'}", "foreign": f"sqlite:///{tmp_path / 'foreign.db'}",
             "in-memory": "sqlite://"}.get(case, f"sqlite:///{world.store_file}")
    args = ["store", "rescore", "--store", store, "--catalog", str(world.catalog)]
    if case != "no-problems":
        args += ["--problems", str(world.problems_file)]
    if case == "bad-mode":
        args += ["--mode", "lenient"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == code
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "nope.db").exists()


# -- helpers ----------------------------------------------------------------------------------------------------
def _copy_sqlite(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def _all(url: str) -> list[TrajectoryRecord]:
    with open_store(url) as st:
        return list(st.query())
