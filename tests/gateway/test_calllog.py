"""The call log on disk: JSONL round trip, ordering, content hash."""

from __future__ import annotations

from shoparena.env.types import Usage
from shoparena.llm.gateway import (
    CallLogWriter,
    CallRecord,
    EmittedCall,
    log_sha256,
    read_call_log,
    write_call_log,
)


def _record(run_id: str, seq: int, **kw) -> CallRecord:
    base = {"run_id": run_id, "seq": seq, "kind": "search", "path": "/search/find_product", "params": {"q": "x"},
            "started_at": 1_767_225_600_000 + seq, "duration_ms": 0.4, "status": 200}
    return CallRecord(**{**base, **kw})


def test_jsonl_round_trip_keeps_every_field(tmp_path) -> None:
    records = [
        _record("b", 1, result_product_ids=["1", "2"], axis="A", via="check_product_match", attributed_to=0),
        _record("a", 0, kind="inference", path="/inference/chat/completions", model="policy:expert",
                usage=Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5), content="<think>t</think>",
                tool_calls=[EmittedCall(name="find_product", arguments={"q": "x"}, id="6MtnW7sD")]),
        _record("b", 0, status=429, error="rate limit"),
    ]
    path = tmp_path / "out" / "calls.jsonl"
    assert write_call_log(path, records) == 3
    back = read_call_log(path)
    assert [(r.run_id, r.seq) for r in back] == [("a", 0), ("b", 0), ("b", 1)]
    assert sorted(back, key=lambda r: (r.run_id, r.seq)) == sorted(records, key=lambda r: (r.run_id, r.seq))


def test_writer_appends_and_hash_is_stable(tmp_path) -> None:
    path = tmp_path / "calls.jsonl"
    with CallLogWriter(path) as w:
        w.write([_record("r", 0)])
        w.write([_record("r", 1), _record("r", 2)])
        assert w.count == 3
    log = read_call_log(path)
    assert len(log) == 3 and log_sha256(log) == log_sha256([_record("r", i) for i in range(3)])
    assert log_sha256(log) != log_sha256(log[:2])
    assert path.read_bytes().count(b"\n") == 3 and b'"axis":null' in path.read_bytes()
