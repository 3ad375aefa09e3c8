"""The envelope → record path without the sandbox: random report bytes and random JSON dialogues
go through the sandbox's report reader, the output check and the validator's record step; never an exception,
always a storable record, with a known reason code whenever the output was invalid."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoparena import __version__
from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.env.output import REASON_CODES, parse_reason
from shoparena.scoring.scorer import Scorer
from shoparena.store import open_store
from shoparena.store.types import PipelineVersion
from shoparena.tasks.generator import generate_problems
from shoparena.validator.core import AgentSpec, Provenance, _finish_problem
from shoparena.validator.judge import get_judge
from shoparena.validator.output import check_envelope
from shoparena.validator.sandbox.supervise import Watched, make_outcome
from shoparena.validator.sandbox.types import Envelope, SandboxLimits
from tests.env.test_output import json_values, outputs


class _Path:
    """Everything ``_finish_problem`` needs, built once."""

    def __init__(self, root: Path) -> None:
        index = create_catalog(generate_catalog(60, seed=3), root / "cat")
        self.problem = generate_problems(index, n=1, seed=1, paraphrases=0)[0]
        self.scorer = Scorer(index, mode="strict")
        self.judge = get_judge("rubric")
        self.loop = asyncio.new_event_loop()
        self.pipeline = PipelineVersion(scorer="shoparena-rule/1", scorer_mode="strict", similarity="lexical",
                                        catalog_sha256=index.catalog_sha256, judge=self.judge.name,
                                        judge_prompt_version=self.judge.prompt_version, package_version=__version__)
        self.store = open_store(f"sqlite:///{root / 't.db'}")
        self.n = 0

    def record(self, report: bytes) -> Any:
        pid = self.problem.problem_id
        outcome = make_outcome(pid, Watched(report=bytearray(report), exit_code=0, wall_s=0.5), backend="test",
                               limits=SandboxLimits(), launched_wall=0.0, enforced={}, counters={})
        self.n += 1
        provenance = Provenance(agent=AgentSpec(path="a.py", agent_id="a"), code_sha="0" * 64,
                                pipeline=self.pipeline, run_id=f"ev-{self.n}")
        result = _finish_problem(outcome, self.problem, 0, [], 0, self.scorer, self.judge, self.loop, provenance)
        record = result.record
        assert record is not None and result.envelope.status == record.status
        assert self.store.append(record)
        error = record.outcome.get("error")
        if error is not None and error.startswith("INVALID_OUTPUT:"):
            assert parse_reason(error) in REASON_CODES and record.status == "FAILED" and record.steps == []
        return record


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Path]:
    p = _Path(tmp_path_factory.mktemp("prop"))
    yield p
    p.loop.close()
    p.store.close()


def _report(envelope: Any) -> bytes:
    return b'{"ready": 1.0}\n' + json.dumps({"envelope": envelope}).encode() + b"\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs)
def test_random_dialogue_becomes_a_record(path: _Path, dialogue: Any) -> None:
    record = path.record(_report({"status": "SUCCESS", "error": None, "dialogue": dialogue, "execution_time": 0.1}))
    if record.status == "SUCCESS":
        assert isinstance(dialogue, list) and record.steps == dialogue
    else:
        assert parse_reason(record.outcome["error"]) in REASON_CODES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), json_values.map(lambda v: _report(v)),
                 st.builds(lambda s, e, d: _report({"status": s, "error": e, "dialogue": d}),
                           st.sampled_from(["SUCCESS", "FAILED", "TIMED_OUT", "x"]), json_values, json_values)))
def test_random_report_bytes_become_a_record(path: _Path, report: bytes) -> None:
    path.record(report)


def test_a_deep_forged_report_is_a_record(path: _Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    record = path.record(b'{"ready": 1.0}\n{"envelope": {"status": "SUCCESS", "dialogue": ' + deep + b"}}\n")
    assert record.status == "FAILED" and "nested too deep" in record.outcome["error"]
    record = path.record(_report({"status": "SUCCESS", "error": None, "dialogue": [{"a": "\ud800"}]}))
    assert parse_reason(record.outcome["error"]) == "invalid_utf8"


def test_check_envelope_keeps_valid_and_timed_out_envelopes() -> None:
    good = Envelope(problem_id="p", status="SUCCESS", execution_time=1.0, dialogue=[])
    assert check_envelope(good) == (good, None)
    late = Envelope(problem_id="p", status="TIMED_OUT", execution_time=1.0, dialogue=[{"x": 1}],
                    error={"type": "Timeout", "message": "late"})
    checked, defect = check_envelope(late)
    assert defect is not None and defect.code == "unknown_key"
    assert checked.status == "TIMED_OUT" and checked.error == late.error and checked.dialogue is None
    big = Envelope(problem_id="p", status="FAILED", execution_time=1.0,
                   error={"type": "OutputTooLarge", "message": "the envelope exceeded 16 MB"})
    checked, defect = check_envelope(big)
    assert defect is not None and defect.code == "too_large" and checked.error["type"] == "INVALID_OUTPUT:too_large"
