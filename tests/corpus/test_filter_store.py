"""The filter over the real store fixture (``corpus_world``: 36 records from the real validator loop — react on
axis A, pipeline on axis B, react-expert), with the real catalog index answering ``known_ids``."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from shoparena.catalog.directory import index_path
from shoparena.catalog.index import SearchIndex
from shoparena.corpus.filter import FilterConfig, run_filters
from shoparena.corpus.types import Trajectory
from shoparena.store import open_store
from tests.corpus.conftest import CorpusWorld
from tests.corpus.test_filter_support import assert_counts, store_row


@pytest.fixture(scope="module")
def world_rows(corpus_world: CorpusWorld) -> tuple[list[Trajectory], dict[str, str]]:
    with open_store(corpus_world.store_url) as store:
        bodies = [orjson.loads(b) for b in store.bodies()]
    return [store_row(b) for b in bodies], {b["record_id"]: b["agent_id"] for b in bodies}


@pytest.fixture(scope="module")
def known_ids(corpus_world: CorpusWorld) -> Callable[[str], bool]:
    index = SearchIndex.open(index_path(corpus_world.catalog))
    return lambda pid: index.doc_of(pid) >= 0


def test_pipeline_rows_go_to_axis_b(world_rows: tuple[list[Trajectory], dict[str, str]],
        known_ids: Callable[[str], bool]) -> None:
    rows, agent = world_rows
    assert len(rows) == 36
    res = run_filters(rows, FilterConfig(min_judge_score=0.0), known_ids=known_ids)
    assert_counts(res, 36)
    assert sorted(agent[t.traj_id] for t in res.axis_b) == ["pipeline"] * 12
    assert {agent[t.traj_id] for t in res.kept} <= {"react", "react-expert"}
    assert res.reports[1].rejected == {}  # the real validator's traces are well-formed
    assert res.reports[1].notes["ids_checked"] is True
    assert res.reports[2].notes["by_source"] == {"call_log": {"A": 24, "B": 12}}
    # 12 problems × 2 agentic rows each, at most 2 per problem
    per_problem: dict[str, int] = {}
    for t in res.kept:
        per_problem[t.problem_id or ""] = per_problem.get(t.problem_id or "", 0) + 1
    assert max(per_problem.values()) <= 2 and len(res.kept) + sum(res.reports[3].rejected.values()) == 24


def test_default_config_on_the_store(world_rows: tuple[list[Trajectory], dict[str, str]],
        known_ids: Callable[[str], bool]) -> None:
    rows, agent = world_rows
    res = run_filters(rows, FilterConfig(), known_ids=known_ids)
    assert_counts(res, 36)
    judged_out = {r.traj_id for r in res.rejections if r.stage == "judge"}
    # the rubric judge scores every sub-task (pipeline) trace below 0.5: none reaches the split
    assert {t.traj_id for t in rows if agent[t.traj_id] == "pipeline"} <= judged_out
    assert not res.axis_b and res.kept
    assert all(agent[t.traj_id] != "pipeline" for t in res.kept)
    assert all((t.judge_score or 0) >= 0.5 for t in res.kept)


def test_an_unknown_recommended_id_is_caught_on_real_traces(
        world_rows: tuple[list[Trajectory], dict[str, str]]) -> None:
    rows, _ = world_rows
    strict = run_filters(rows, FilterConfig(min_judge_score=0.0), known_ids=lambda pid: False)
    assert strict.reports[1].rejected == {"recommend_unresolved": 36}
    assert_counts(strict, 36)


def test_require_success_on_the_store(world_rows: tuple[list[Trajectory], dict[str, str]],
        known_ids: Callable[[str], bool]) -> None:
    rows, _ = world_rows
    res = run_filters(rows, FilterConfig(require_success=True), known_ids=known_ids)
    assert_counts(res, 36)
    assert all(t.success is True for t in res.kept) and all(t.success is False for t in res.failed)
    assert len(res.failed) == res.reports[4].rejected.get("outcome_failed", 0)
