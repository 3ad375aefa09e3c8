"""Malformed agent output through the real validator: every shape becomes a record, never a crash.

One agent file dispatches on the problem id, so one evaluation in the bubblewrap sandbox covers the whole table:
each malformed output must give a ``FAILED`` record whose outcome error is ``INVALID_OUTPUT:<code>`` (or, where the
table says so, the documented other outcome), the good problems after them are still judged and recorded, and
``shoparena validate`` on an agent whose step calls a tool without a ``tool_call_id`` exits normally with records
and no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.env.output import REASON_CODES, parse_reason
from shoparena.store import open_store
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.loader import dump_problems
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate
from shoparena.validator.sandbox import SandboxLimits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap is not installed (scripts/sysdeps.sh installs it)")

ISSUE_AGENT = '''
def agent_main(problem_data):
    return [{"completion": {"content": "", "message": {"think": "x",
             "tool_call": [{"name": "terminate", "parameters": {"status": "failure"}}]}},
             "extra_info": {"step": 0, "query": problem_data.get("query", "")}}]
'''

# One agent for the whole table: OUT[name] builds the output of problem "case:<name>".
TABLE_AGENT = '''
import math, sys

def step(i=1, calls=None, **message):
    if calls is None:
        calls = [{"name": "terminate", "parameters": {"status": "success"}, "tool_call_id": "t%d" % i}]
    return {"completion": {"content": "<think>x</think>", "message": {"think": "x", "tool_call": calls, **message}},
            "extra_info": {"step": i, "query": "q", "timestamp": 1767225600000}}

def edit(fn):
    s = step()
    fn(s, s["completion"]["message"], s["completion"]["message"]["tool_call"][0])
    return [s]

def nested(n):
    v = "leaf"
    for _ in range(n):
        v = [v]
    return v

class Opaque:
    pass

def circular():
    s = step()
    s["extra_info"]["self"] = s
    return [s]

def boom(p):
    raise ValueError("boom " + p["problem_id"])

def garbage(p):
    sys.stdout.write("\\x00\\xff garbage {\\"envelope\\": 1}\\n" * 100)
    sys.stdout.flush()
    return OUT["issue_example"](p)

OUT = {
    "issue_example": lambda p: [{"completion": {"content": "", "message": {"think": "x", "tool_call": [
        {"name": "terminate", "parameters": {"status": "failure"}}]}}, "extra_info": {"step": 0, "query": p["query"]}}],
    "none": lambda p: None,
    "bare_string": lambda p: "I recommend product 42",
    "int": lambda p: 42,
    "dict": lambda p: {"steps": [step()]},
    "ints": lambda p: [1, 2, 3],
    "nones": lambda p: [None],
    "missing_completion": lambda p: [{"extra_info": {"step": 1, "query": "q"}}],
    "missing_message": lambda p: [{"completion": {"content": ""}, "extra_info": {"step": 1, "query": "q"}}],
    "missing_extra_info": lambda p: [{"completion": {"message": {}}}],
    "missing_query": lambda p: edit(lambda s, m, c: s["extra_info"].pop("query")),
    "completion_string": lambda p: edit(lambda s, m, c: s.update(completion="<think>x</think>")),
    "think_int": lambda p: edit(lambda s, m, c: m.update(think=7)),
    "step_string": lambda p: edit(lambda s, m, c: s["extra_info"].update(step="1")),
    "tool_call_dict": lambda p: edit(lambda s, m, c: m.update(tool_call=c)),
    "tool_call_string": lambda p: edit(lambda s, m, c: m.update(tool_call=["terminate"])),
    "call_without_name": lambda p: edit(lambda s, m, c: c.pop("name")),
    "parameters_string": lambda p: edit(lambda s, m, c: c.update(parameters="status=success")),
    "parameters_none": lambda p: edit(lambda s, m, c: c.update(parameters=None)),
    "unknown_tool": lambda p: edit(lambda s, m, c: c.update(name="delete_catalog")),
    "obs_unknown_id": lambda p: edit(lambda s, m, c: m.update(obs=[{"tool_call_id": "ghost", "results": 1}])),
    "unknown_key": lambda p: edit(lambda s, m, c: s.update(reward=1.0)),
    "nan": lambda p: edit(lambda s, m, c: c["parameters"].update(price=float("nan"))),
    "infinity": lambda p: edit(lambda s, m, c: s["extra_info"].update(timestamp=math.inf)),
    "huge_int": lambda p: edit(lambda s, m, c: c["parameters"].update(page=2**70)),
    "lone_surrogate": lambda p: edit(lambda s, m, c: m.update(think="\\ud800 half a pair")),
    "bytes": lambda p: edit(lambda s, m, c: m.update(think=b"\\xff\\xfe")),
    "opaque_object": lambda p: [step(), Opaque()],
    "circular": lambda p: circular(),
    "nesting_200": lambda p: edit(lambda s, m, c: c["parameters"].update(deep=nested(200))),
    "nesting_5000": lambda p: edit(lambda s, m, c: c["parameters"].update(deep=nested(5000))),
    "ten_mb": lambda p: [step(i, response="x" * 100_000) for i in range(100)],
    "steps_5000": lambda p: [step(i) for i in range(5000)],
    "raises": boom,
    "garbage_stdout": garbage,
    "no_such_product": lambda p: [step(1, [{"name": "recommend_product", "parameters": {"product_ids": "nope-1"},
                                            "tool_call_id": "r1"}]), step(2)],
    "empty": lambda p: [],
    "good": lambda p: [step(1, [{"name": "find_product", "parameters": {"q": p["query"]}, "tool_call_id": "f1"}],
                            obs=[{"tool_call_id": "f1", "results": []}]), step(2)],
}

def agent_main(problem_data):
    return OUT[problem_data["problem_id"].split(":", 1)[1].removesuffix("-2")](problem_data)
'''

# name → the outcome: an INVALID_OUTPUT reason code, or ("status", error type prefix) for the documented others
EXPECTED: dict[str, str | tuple[str, str | None]] = {
    "issue_example": "tool_call_missing_id",
    "none": "not_a_list",
    "bare_string": "not_a_list",
    "int": "not_a_list",
    "dict": "not_a_list",
    "ints": "step_not_object",
    "nones": "step_not_object",
    "missing_completion": "missing_completion",
    "missing_message": "missing_message",
    "missing_extra_info": "missing_extra_info",
    "missing_query": "missing_key",
    "completion_string": "wrong_type",
    "think_int": "wrong_type",
    "step_string": "wrong_type",
    "tool_call_dict": "wrong_type",
    "tool_call_string": "tool_call_not_object",
    "call_without_name": "tool_call_missing_name",
    "parameters_string": "bad_arguments",
    "parameters_none": "bad_arguments",
    "unknown_tool": "unknown_tool",
    "obs_unknown_id": "unknown_call_id",
    "unknown_key": "unknown_key",
    "nan": "non_finite_number",
    "infinity": "non_finite_number",
    "huge_int": "number_out_of_range",
    "lone_surrogate": "invalid_utf8",
    "bytes": "not_json",
    "opaque_object": "not_json",
    "circular": "not_json",
    "nesting_200": "too_deep",
    "nesting_5000": "too_deep",
    "ten_mb": "too_large",
    "steps_5000": "too_many_steps",
    "garbage_stdout": "tool_call_missing_id",
    "raises": ("FAILED", "ValueError: "),               # the agent's own failure: recorded as such
    "no_such_product": ("SUCCESS", None),               # a wrong answer, scored: not invalid output
    "empty": ("SUCCESS", None),                         # no steps: nothing recommended, scored as a failure
    "good": ("SUCCESS", None),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    root = tmp_path_factory.mktemp("malformed")
    index = create_catalog(generate_catalog(200, seed=9), root / "cat")
    problems = generate_problems(index, n=4, seed=2, paraphrases=0)
    dump_problems(problems[:2], root / "problems.jsonl")
    return root / "cat", problems, root / "problems.jsonl"


def test_every_malformed_output_is_a_failed_record_and_the_evaluation_goes_on(world, tmp_path: Path) -> None:
    catalog, base, _ = world
    names = [n for n in EXPECTED if n != "good"]
    # the good problem comes after the malformed ones: the evaluation goes on past every one of them
    order = [*names[: len(names) // 2], "good", *names[len(names) // 2:], "good-2"]
    problems = [base[i % len(base)].model_copy(update={"problem_id": f"case:{n}"}) for i, n in enumerate(order)]
    agent = tmp_path / "table_agent.py"
    agent.write_text(TABLE_AGENT)
    config = ValidatorConfig(sandbox="bubblewrap", workers=1,
                             limits=SandboxLimits(timeout_s=60, memory_mb=2048, output_mb=16))
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        summary = evaluate(AgentSpec(path=str(agent), agent_id="table"), problems, catalog, store, config)
        records = {r.problem_id: r for r in store.query(eval_run_id=summary.eval_run_id)}
        assert store.verify().ok
    assert summary.records_written == len(problems) and summary.total_problems == len(problems)
    assert set(records) == {f"case:{n}" for n in order}
    for name, want in EXPECTED.items():
        r = records[f"case:{name}"]
        error = r.outcome.get("error")
        if isinstance(want, str):
            assert r.status == "FAILED" and not r.success, (name, r.status, error)
            assert parse_reason(error) == want, (name, error)
            assert r.judge is None and r.steps == [] and r.messages == []
        else:
            status, prefix = want
            assert r.status == status and parse_reason(error) is None, (name, r.status, error)
            assert (error or "").startswith(prefix) if prefix else error is None, (name, error)
        assert "Traceback" not in (error or "")
    for good in (records["case:good"], records["case:good-2"]):  # judged and stored whole, mid-run and last
        assert good.status == "SUCCESS" and good.judge is not None and len(good.steps) == 2 and good.messages
    wrong = records["case:no_such_product"]
    assert wrong.outcome["recommended_ids"] == ["nope-1"] and wrong.outcome["product"] == 0.0
    assert not wrong.success and wrong.judge is not None
    assert {parse_reason(r.outcome.get("error")) for r in records.values()} - {None} <= set(REASON_CODES)


def test_validate_cli_on_the_issue_example_exits_normally_with_records(world, tmp_path: Path) -> None:
    catalog, _, problems_file = world
    agent = tmp_path / "that.py"
    agent.write_text(ISSUE_AGENT)
    db = tmp_path / "t.db"
    cmd = [sys.executable, "-m", "shoparena", "validate", "--catalog", str(catalog), "--problems",
           str(problems_file), "--agent", str(agent), "--store", f"sqlite:///{db}", "--workers", "1", "--json"]
    proc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    summary: dict[str, Any] = json.loads(proc.stdout)
    assert summary["records_written"] == 2 and all(p["status"] == "FAILED" for p in summary["problems"])
    with open_store(f"sqlite:///{db}") as store:
        records = list(store.query())
    assert len(records) == 2
    for r in records:
        assert parse_reason(r.outcome["error"]) == "tool_call_missing_id"
        assert "steps[0].completion.message.tool_call[0]" in r.outcome["error"]
