"""What happened in a model's episodes (evaluate/diagnostics.py): counted from hand-made run files, so every
count below is known by construction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import DataError
from shoparena.evaluate import EvalConfig, ModelEntry, summarise
from shoparena.evaluate.diagnostics import is_think_then_stop, note_kind, run_diagnostics, states_decision
from shoparena.tasks.types import Problem, RewardItem


def _problem(pid: str, bucket: str, gt: str) -> Problem:
    return Problem(problem_id=pid, bucket=bucket, query=f"query of {pid}",
                   reward=[RewardItem(product_id=gt, title=[f"title {gt}"])])


PROBLEMS = [_problem("p1", "product", "G1"), _problem("p2", "shop", "G2")]


def _inference(pid: str, sample: int, *, status: int = 200, tools: list[str] = (), reasoning: str = "",
               content: str = "", notes: list[str] | None = None) -> dict[str, Any]:
    return {"kind": "inference", "problem_id": pid, "sample": sample, "status": status,
            "tool_calls": [{"name": t, "arguments": {}, "id": f"c{i}"} for i, t in enumerate(tools)] or None,
            "reasoning_content": reasoning, "content": content, "parse_notes": notes}


def _search(pid: str, sample: int, ids: list[str]) -> dict[str, Any]:
    return {"kind": "search", "problem_id": pid, "sample": sample, "status": 200, "result_product_ids": ids}


def _step(n: int, calls: list[str] = ()) -> dict[str, Any]:
    message = {"think": "…", **({"tool_call": [{"name": c, "parameters": {}, "tool_call_id": f"t{n}{i}"}
                                                for i, c in enumerate(calls)]} if calls else {})}
    return {"completion": {"reasoning_content": "", "content": "", "message": message}, "extra_info": {"step": n}}


PLACEHOLDER = [{"completion": {"reasoning_content": "", "content": "", "message": {}}, "extra_info": {"step": 1}}]

# Four episodes: A finished (3 turns, one of them think-then-stop, found and recommended the ground truth),
# B timed out (two turns without a call, one states the decision, one carries two parse notes), C failed on the
# model backend (its one inference call answered 502), D failed in the agent (no call at all).
RUNS = [
    {"problem_id": "p1", "sample": 0, "status": "SUCCESS", "error": None, "steps": 3, "success": True},
    {"problem_id": "p1", "sample": 1, "status": "TIMED_OUT", "error": {"type": "Timeout", "message": "60 s"},
     "steps": 0, "success": False},
    {"problem_id": "p2", "sample": 0, "status": "FAILED", "error": {"type": "BackendError", "message": "502"},
     "steps": 0, "success": False},
    {"problem_id": "p2", "sample": 1, "status": "FAILED", "error": {"type": "AgentError", "message": "boom"},
     "steps": 0, "success": False},
]
ROLLOUTS = [[_step(1, ["find_product"]), _step(2), _step(3, ["recommend_product"])], PLACEHOLDER, PLACEHOLDER,
            PLACEHOLDER]
CALLS = [
    _inference("p1", 0, tools=["find_product"], reasoning="Let me search."),
    _search("p1", 0, ["X", "G1"]),
    _inference("p1", 0, reasoning="Recommending G1. 'title G1' looks right."),  # think-then-stop
    _inference("p1", 0, tools=["recommend_product"], reasoning="I will recommend G1."),  # the call: not counted
    _inference("p1", 1, reasoning="Hmm, the price is too high. I will recommend X.",  # parse notes: not counted
               notes=["malformed <tool_call> JSON: Expecting value: line 1", "unknown tool 'buy' skipped"]),
    _inference("p1", 1, content="<think>I'll recommend 123 then.</think>"),  # think-then-stop in the text
    _search("p1", 1, ["Y"]),
    _inference("p2", 0, status=502),
    _inference("zz", 0, reasoning="Recommending Q."),  # a problem outside the evaluation: not counted
]
SCORES = [
    {"problem_id": "p1", "sample": 0, "success": True, "gt": 1.0, "recommended_ids": ["G1"], "status": "SUCCESS"},
    {"problem_id": "p1", "sample": 1, "success": False, "gt": 0.0, "recommended_ids": [], "status": "TIMED_OUT"},
    {"problem_id": "p2", "sample": 0, "success": False, "gt": 0.0, "recommended_ids": [], "status": "FAILED"},
    {"problem_id": "p2", "sample": 1, "success": False, "gt": 0.0, "recommended_ids": [], "status": "FAILED"},
]


def _write(run_dir: Path, **files: list[Any]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        (run_dir / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run_dir


def test_counts_of_a_hand_made_run(tmp_path: Path) -> None:
    run = _write(tmp_path / "m", runs=RUNS, rollouts=ROLLOUTS, calls=CALLS, scores=SCORES)
    d = run_diagnostics(run, PROBLEMS)
    assert d is not None
    assert (d["episodes"], d["finished"], d["timed_out"], d["failed"]) == (4, 1, 1, 2)
    assert d["failed_by_reason"] == {"AgentError": 1, "BackendError": 1}
    assert d["failure_examples"] == {"AgentError": "boom", "BackendError": "502"}
    assert d["all_failed_on_backend"] is False
    assert d["totals"] == {"inference_calls": 6, "inference_failed": 1, "turns": 5, "tool_calls": 2,
                           "search_calls": 2, "steps_recorded": 3}
    assert d["per_episode"] == {"inference_calls": 1.5, "turns": 1.25, "tool_calls": 0.5, "steps_recorded": 0.75}
    assert d["turns_without_tool_call"] == 3
    assert d["think_then_stop"] == 2
    assert d["episodes_think_then_stop"] == 2  # p1's two samples, one such turn each
    assert (d["gt_retrieved"], d["gt_recommended"]) == (1, 1)
    assert (d["repeated_tool_calls"], d["episodes_repeating"], d["timed_out_after_recommending"]) == (0, 0, 0)
    assert d["parse_notes"] == {"turns": 1, "notes": 2,
                                "by_kind": {"malformed <tool_call> JSON": 1, "unknown tool … skipped": 1}}


def test_every_episode_failed_on_the_backend(tmp_path: Path) -> None:
    runs = [{**RUNS[2], "sample": s} for s in range(3)]
    run = _write(tmp_path / "m", runs=runs, rollouts=[PLACEHOLDER] * 3,
                 calls=[_inference("p2", s, status=502) for s in range(3)], scores=[])
    d = run_diagnostics(run, PROBLEMS)
    assert d["all_failed_on_backend"] is True and d["failed_by_reason"] == {"BackendError": 3}
    assert d["totals"]["turns"] == 0 and d["totals"]["inference_failed"] == 3


def test_without_a_call_log_its_figures_are_unknown_not_zero(tmp_path: Path) -> None:
    run = _write(tmp_path / "m", runs=RUNS, rollouts=ROLLOUTS, scores=SCORES)
    d = run_diagnostics(run, PROBLEMS)
    assert d["totals"]["turns"] is None and d["think_then_stop"] is None and d["parse_notes"] is None
    assert d["totals"]["steps_recorded"] == 3 and d["gt_recommended"] == 1 and d["finished"] == 1
    assert run_diagnostics(tmp_path / "nothing", PROBLEMS) is None


def test_rollouts_that_do_not_line_up_with_the_runs_are_refused(tmp_path: Path) -> None:
    run = _write(tmp_path / "m", runs=RUNS, rollouts=ROLLOUTS[:2], calls=CALLS, scores=SCORES)
    with pytest.raises(DataError, match=r"rollouts\.jsonl"):
        run_diagnostics(run, PROBLEMS)


@pytest.mark.parametrize("text", [
    "Recommending 5365307451. 'basketball jersey' looks right.", "I will recommend the second one.",
    "I'll recommend 123", "I’m going to recommend it", "Let me recommend the cheapest.", "We will now recommend X",
    "My final recommendation: 42", "recommend_product(product_ids='1')", "So I recommend 77.",
])
def test_stated_decisions(text: str) -> None:
    assert states_decision(text)


@pytest.mark.parametrize("text", [
    "Let me search for a planter.", "The user wants a recommendation of a jacket.", "", "Which one to buy?",
    "recommended by the shop",
])
def test_not_decisions(text: str) -> None:
    assert not states_decision(text)


def test_think_then_stop_needs_an_answered_turn_without_a_call() -> None:
    assert is_think_then_stop(_inference("p", 0, reasoning="Recommending 1."))
    assert not is_think_then_stop(_inference("p", 0, reasoning="Recommending 1.", tools=["recommend_product"]))
    assert not is_think_then_stop(_inference("p", 0, reasoning="Recommending 1.", status=502))
    assert not is_think_then_stop(_inference("p", 0, reasoning="Looking at the results."))
    # a call the parser dropped is an attempt, counted under parse notes, not a decision left unmade
    assert not is_think_then_stop(_inference("p", 0, content="<tool_call>{recommend_product", notes=["unclosed"]))


def test_note_kinds_drop_the_particulars() -> None:
    assert note_kind("unknown tool 'x' skipped") == note_kind('unknown tool "y" skipped') == "unknown tool … skipped"
    assert note_kind("3 API tool_calls ignored by the tag protocol") == "N API tool_calls ignored by the tag protocol"


def test_the_summary_carries_the_diagnostics_of_each_model(tmp_path: Path) -> None:
    for label in ("a", "b"):
        _write(tmp_path / "models" / label, runs=RUNS, rollouts=ROLLOUTS, calls=CALLS, scores=SCORES)
    config = EvalConfig(models=[ModelEntry(label="a", uri="policy:expert"), ModelEntry(label="b", uri="policy:x")],
                        n_samples=2, n_resamples=200)
    body = summarise(tmp_path, config, PROBLEMS)
    assert body["models"]["a"]["diagnostics"] == run_diagnostics(tmp_path / "models" / "a", PROBLEMS)
    assert body["models"]["b"]["diagnostics"]["think_then_stop"] == 2
    assert json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8")) == body


def test_think_then_stop_episodes_do_not_grow_with_the_turns_an_episode_gets(tmp_path: Path) -> None:
    """An episode that states its decision without the call again and again until its clock ends counts every
    such turn, so a faster machine gives more turns; it is still one episode with think-then-stop."""
    looping = [_inference("p1", 1, reasoning=f"Recommending G1. Attempt {i}.") for i in range(5)]
    run = _write(tmp_path / "m", runs=RUNS, rollouts=ROLLOUTS, calls=[*CALLS, *looping], scores=SCORES)
    d = run_diagnostics(run, PROBLEMS)
    assert d is not None
    assert d["think_then_stop"] == 7 and d["episodes_think_then_stop"] == 2
    assert run_diagnostics(_write(tmp_path / "none", runs=RUNS, scores=SCORES), PROBLEMS)["episodes_think_then_stop"] is None


def _call(pid: str, sample: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {**_inference(pid, sample), "tool_calls": [{"name": name, "arguments": arguments, "id": "c"}]}


def test_repeated_calls_and_recommending_without_ending(tmp_path: Path) -> None:
    """A call repeats when the same episode already made one with the same name and arguments (the call id does
    not matter); the same call in another episode is not a repeat. An episode that recommended and then ran out
    of time counts as timed out after recommending."""
    calls = [
        _call("p1", 0, "find_product", q="mug", page=1),
        _call("p1", 0, "find_product", page=1, q="mug"),  # the same arguments in another order: a repeat
        _call("p1", 0, "find_product", q="mug", page=2),  # another page: not a repeat
        _call("p1", 0, "recommend_product", product_ids="G1"),
        _call("p1", 1, "find_product", q="mug", page=1),  # another episode: not a repeat
        _call("p1", 1, "recommend_product", product_ids="X"),
        _call("p1", 1, "recommend_product", product_ids="X"),  # a repeat, in the episode that then timed out
        _call("p1", 1, "recommend_product", product_ids="X"),
    ]
    d = run_diagnostics(_write(tmp_path / "m", runs=RUNS, rollouts=ROLLOUTS, calls=calls, scores=SCORES), PROBLEMS)
    assert d is not None
    assert d["repeated_tool_calls"] == 3 and d["episodes_repeating"] == 2
    assert d["timed_out_after_recommending"] == 1  # p1 sample 1; sample 0 recommended and finished
    none = run_diagnostics(_write(tmp_path / "none", runs=RUNS, scores=SCORES), PROBLEMS)
    assert none["repeated_tool_calls"] is None and none["timed_out_after_recommending"] is None
