"""Shared fixtures of the web tests: one real simulated arena day written to a SQLite store (built once per
session), one extra record whose reasoning carries an XSS payload cited by its verdict, and the pages served by
uvicorn on loopback over that store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.arena.simulate import SimulationConfig, simulate
from shoparena.clock import ManualClock
from shoparena.store import open_store
from shoparena.validator.judge.render import render_trace
from shoparena.validator.judge.rubric import RubricJudge
from shoparena.web import Site, create_app

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> & "quoted"'
END_OF_DAY = 1_767_225_600.0 + 86_400.0  # the simulation's ManualClock start + one simulated day


def _xss_record(store: Any) -> str:
    """Append a copy of a judged stored record whose first reasoning text carries :data:`XSS`, judged again by
    the rubric judge, plus one span citing the payload (built from the renderer, so it indexes the trace)."""
    src = next(r for r in store.query(limit=200) if r.judge and r.steps and r.call_log)
    steps = [dict(s) for s in src.steps]
    comp = dict(steps[0]["completion"])
    msg = dict(comp["message"])
    msg["think"] = f"Before searching: {XSS} — then I search."
    comp["message"] = msg
    steps[0] = {**steps[0], "completion": comp}
    query = steps[0]["extra_info"]["query"]
    verdict = RubricJudge().evaluate(query, steps, src.call_log)
    trace = render_trace(query, steps, src.call_log)
    think = trace.of("think", 0)[0]
    at = trace.text.index("<script>", think.start)
    span = trace.span(at, at + len("<script>window.__xss=1</script><img src=x"), gate=2)
    verdict = verdict.model_copy(update={"spans": [span, *verdict.spans]})
    body = src.model_dump(exclude={"record_id", "idempotency_key", "trace_sha256", "call_log_sha256",
                                   "pipeline_version", "created_at"})
    body.update(eval_run_id="ev-xss-test", steps=steps, judge=verdict.model_dump(mode="json"))
    record = type(src).model_validate(body).sealed(src.created_at + 1)
    assert store.append(record)
    return record.record_id


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real simulated day (6 miners, one of them a cheat the gate refuses; 2 validators; one race) in ``subnet.db`` + the XSS record."""
    out = tmp_path_factory.mktemp("web-sim")
    result = simulate(SimulationConfig(miners=6, validators=2, days=1, seed=0, catalog_size=800, problems=90,
                                       qualifying_problems=4, race_problems=4, sandbox="process", out=str(out)))
    with open_store(result.store) as store:
        xss_id = _xss_record(store)
        n = store.count()
    return {"url": result.store, "out": out, "result": result, "xss_record": xss_id, "records": n}


@pytest.fixture(scope="session")
def server(world: dict[str, Any]) -> Iterator[str]:
    """The pages over the simulated day, the clock at the end of that day, on 127.0.0.1."""
    site = Site(world["url"], clock=ManualClock(END_OF_DAY))
    with BackgroundServer(create_app(site)) as srv:
        yield srv.url
    site.close()


@pytest.fixture(scope="session")
def http(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$SHOPARENA_TEST_ARTIFACTS/web`` when set, else a pytest temporary directory."""
    root = os.environ.get("SHOPARENA_TEST_ARTIFACTS")
    path = Path(root) / "web" if root else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
