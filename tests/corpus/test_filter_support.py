"""Builders shared by the filter tests (no tests here): hand-built canonical trajectories, a store-body →
Trajectory stand-in for ``corpus.normalize.from_record`` and the counts-add-up check."""

from __future__ import annotations

import json
from typing import Any

from shoparena.corpus.filter.run import FilterResult
from shoparena.corpus.types import Trajectory

KNOWN = frozenset({"111", "222", "333"})


def known(pid: str) -> bool:
    return pid in KNOWN


class Trace:
    """A small builder: ``Trace().call("find_product", q="x").call("recommend_product", product_ids="111")``."""

    def __init__(self, query: str = "a violin bow under 500") -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": query}]
        self.n = 0

    def turn(self, *calls: tuple[str, dict[str, Any]], think: str = "thinking", answer: bool = True,
             content: str = "") -> Trace:
        ids = []
        tool_calls = []
        for name, args in calls:
            self.n += 1
            ids.append(f"c{self.n}")
            tool_calls.append({"id": f"c{self.n}", "type": "function",
                               "function": {"name": name, "arguments": json.dumps(args)}})
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if think:
            msg["reasoning_content"] = think
        if tool_calls:
            msg["tool_calls"] = tool_calls
        self.messages.append(msg)
        if answer:
            for i in ids:
                self.messages.append({"role": "tool", "tool_call_id": i, "content": "ok"})
        return self

    def call(self, name: str, think: str = "thinking", **args: Any) -> Trace:
        return self.turn((name, args), think=think)

    def finish(self, ids: str = "111", think: str = "thinking") -> Trace:
        return self.call("recommend_product", think=think, product_ids=ids).call("terminate", think=think,
                                                                                  status="success")

    def row(self, traj_id: str = "t1", *, problem_id: str | None = "p1", axis: str | None = "A",
            success: bool | None = True, judge_score: float | None = 0.7, **kw: Any) -> Trajectory:
        return Trajectory(traj_id=traj_id, source="store", messages=[dict(m) for m in self.messages], tools=[],
                          problem_id=problem_id, success=success, judge_score=judge_score, axis=axis,  # type: ignore[arg-type]
                          axis_source="call_log" if axis else None, **kw)


def good(traj_id: str = "t1", q: str = "violin bow", **kw: Any) -> Trajectory:
    """find → view → recommend → terminate, every turn thinking, every call answered."""
    return (Trace().call("find_product", q=q).call("view_product_information", product_ids="111,222")
            .finish().row(traj_id, **kw))


def store_row(body: dict[str, Any]) -> Trajectory:
    """A store record body → Trajectory (stand-in for ``corpus.normalize.from_record``): messages as stored
    minus ``step_meta``, axis from the record's call-log attribution."""
    msgs = [{k: v for k, v in m.items() if k != "step_meta"} for m in body["messages"]]
    return Trajectory(traj_id=body["record_id"], source="store", messages=msgs, tools=[],
                      problem_id=body["problem_id"], bucket=body.get("bucket"), cluster_id=body.get("cluster_id"),
                      suite=body.get("suite"), success=body.get("success"), judge_score=body.get("judge_score"),
                      coefficient=body.get("coefficient"), axis=body.get("axis"), axis_source="call_log",
                      call_log=body.get("call_log"), outcome=body.get("outcome"),
                      provenance={"record_id": body["record_id"], "agent_id": body.get("agent_id")})


def assert_counts(result: FilterResult, n_in: int) -> None:
    """seen = kept + Σ rejected per stage; each stage sees what the one before kept; rejections match."""
    prev = n_in
    for r in result.reports:
        assert r.seen == prev, (r.stage, r.seen, prev)
        assert r.seen == r.kept + sum(r.rejected.values()), r.to_dict()
        assert sum(1 for x in result.rejections if x.stage == r.stage) == sum(r.rejected.values())
        prev = r.kept
    assert len(result.kept) == prev
