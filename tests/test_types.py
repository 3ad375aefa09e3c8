"""The shared words have one home: every package's alias is the same object as ``shoparena.types``'s."""

from __future__ import annotations

import typing

import pytest

from shoparena import types
from shoparena.errors import DataError


def test_every_package_uses_the_one_literal() -> None:
    from shoparena.arena.state.types import Status as arena_status
    from shoparena.catalog.search import Flavor as search_flavor
    from shoparena.catalog.search import Mode as search_mode
    from shoparena.corpus.types import Axis as corpus_axis
    from shoparena.llm.gateway.calllog import Axis as call_axis
    from shoparena.scoring.types import Mode as score_mode
    from shoparena.store.types import Axis as store_axis
    from shoparena.store.types import Status as store_status

    assert search_mode is score_mode is types.Mode
    assert store_status is arena_status is types.Status
    assert store_axis is corpus_axis is types.Axis
    assert call_axis is types.SearchAxis
    assert search_flavor is types.Flavor and types.FLAVORS == ("upstream", "oro")
    assert set(types.SEARCH_AXES) < set(types.AXES)
    assert types.STATUSES == typing.get_args(types.Status) == ("SUCCESS", "FAILED", "TIMED_OUT")


def test_one_envelope_shared_by_sandbox_and_records() -> None:
    from shoparena.env.records import read_envelope
    from shoparena.env.types import ENVELOPE_KEYS, Envelope
    from shoparena.validator.sandbox import Envelope as sandbox_envelope

    assert sandbox_envelope is Envelope
    line = Envelope(problem_id="p1", status="TIMED_OUT", execution_time=1.5).model_dump()
    keys = ("problem_id", "status", "execution_time", "inference_failure_count", "inference_total", "error",
            "dialogue")
    assert tuple(line) == ENVELOPE_KEYS == keys
    assert read_envelope(line) is line
    with pytest.raises(DataError, match="bad status"):
        read_envelope({**line, "status": "CRASHED"})
    with pytest.raises(ValueError):
        Envelope(problem_id="p1", status="CRASHED", execution_time=0.0)  # type: ignore[arg-type]


def test_scorer_reads_the_envelope_it_shares() -> None:
    from shoparena.env.types import Envelope
    from shoparena.scoring.steps import unwrap

    call = {"name": "recommend_product", "parameters": {"product_ids": "1"}}
    env = Envelope(problem_id="p1", status="FAILED", execution_time=0.1,
                   error={"type": "Boom", "message": "x"}, dialogue=[{"tool_call": [call]}])
    got = unwrap(env.model_dump())
    assert (got.problem_id, got.status, got.error, len(got.steps)) == ("p1", "FAILED", "Boom: x", 1)
