"""Corpus exports on real trajectories (the ``corpus_world`` store: react → axis A, pipeline → axis B): SFT / KTO
/ GRPO rows shaped as TRL expects (``docs/training.md`` §2, §4.3, §4.4), JSONL = Parquet (= ``datasets``) round trips
with JSON-string arguments and tools, determinism, counted bad rows, the split guard and the export manifest."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from shoparena.corpus.export import (
    datasets_available,
    kto_label,
    read_dataset_rows,
    read_jsonl_rows,
    read_manifest,
    read_parquet_rows,
    write_grpo,
    write_kto,
    write_manifest,
    write_sft,
)
from shoparena.corpus.split import SplitConfig, assign_rows, split_problems
from shoparena.corpus.types import StageReport, Trajectory
from shoparena.env.tools import get_toolset, normalize_tool_specs
from shoparena.errors import ConfigError, DataError, LeakError
from shoparena.store import open_store
from shoparena.tasks.loader import problem_row
from shoparena.tasks.types import Problem

TOOLS = normalize_tool_specs(get_toolset("upstream4").specs())
NESTED_ARGS = '{"q": "violin bow", "filters": {"price": [1, null], "attrs": [{"color": "red"}, {"size": "4/4"}]}}'


def _traj(body: dict[str, Any]) -> Trajectory:
    """A stored record as a corpus row (what normalisation produces: messages without ``step_meta``)."""
    msgs = [{k: v for k, v in m.items() if k != "step_meta"} for m in body["messages"]]
    return Trajectory(traj_id=body["record_id"], source="store", messages=msgs, tools=TOOLS,
                      problem_id=body["problem_id"], bucket=body["bucket"], cluster_id=body["cluster_id"],
                      suite=body["suite"], success=body["success"], judge_score=body["judge_score"],
                      coefficient=body["coefficient"], axis=body["axis"], outcome=body["outcome"],
                      provenance={"record_id": body["record_id"], "agent_id": body["agent_id"]})


@pytest.fixture(scope="module")
def rows(corpus_world: Any) -> list[Trajectory]:
    with open_store(corpus_world.store_url) as store:
        return [_traj(orjson.loads(b)) for b in store.bodies()]


def _nested_row() -> Trajectory:
    """A row whose tool calls carry nested JSON arguments of different shapes (Arrow would unify them)."""
    return Trajectory(
        traj_id="nested-1", source="oro_sft", tools=TOOLS, problem_id="zz:nested", bucket="product", success=True,
        judge_score=0.9, axis="A",
        messages=[{"role": "system", "content": "You are a shopping agent."},
                  {"role": "user", "content": "a violin bow"},
                  {"role": "assistant", "content": None, "reasoning_content": "search",
                   "tool_calls": [{"id": "c1", "type": "function",
                                   "function": {"name": "find_product", "arguments": NESTED_ARGS}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "[]"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"id": "c2", "type": "function",
                                   "function": {"name": "recommend_product",
                                                "arguments": {"product_ids": "1,2"}}}]},
                  {"role": "tool", "tool_call_id": "c2", "content": {"ok": True}}])


def test_world_rows(rows: list[Trajectory]) -> None:
    assert len(rows) == 36
    assert {t.axis for t in rows} == {"A", "B"}
    assert any(t.success for t in rows) and not all(t.success for t in rows)


def test_sft_roundtrip_jsonl_parquet(rows: list[Trajectory], tmp_path: Path) -> None:
    res = write_sft([*rows, _nested_row()], tmp_path, name="sft")
    assert res.rows == 37 and res.report.kept == 37 and not res.rejections
    jl, pq_rows = read_jsonl_rows(tmp_path / "sft.jsonl"), read_parquet_rows(tmp_path / "sft.parquet")
    assert jl == pq_rows
    assert [r["problem_id"] for r in jl] == sorted(r["problem_id"] for r in jl)
    by_id = {r["id"]: r for r in jl}
    for t in rows:
        r = by_id[t.traj_id]
        assert r["messages"] == [{k: v for k, v in m.items() if v is not None} for m in t.messages]
        assert isinstance(r["tools"], str) and orjson.loads(r["tools"]) == TOOLS
        for m in r["messages"]:
            for c in m.get("tool_calls", []):
                assert isinstance(c["function"]["arguments"], str)
    nested = by_id["nested-1"]["messages"]
    assert nested[2]["tool_calls"][0]["function"]["arguments"] == NESTED_ARGS  # byte for byte
    assert "content" not in nested[2]  # null-valued keys are not exported
    assert nested[4]["tool_calls"][0]["function"]["arguments"] == '{"product_ids":"1,2"}'  # a dict, encoded once
    assert nested[5]["content"] == '{"ok":true}'  # tool content is always a string
    assert set(res.files) >= {"sft.jsonl", "sft.parquet"}


def test_parquet_has_no_struct_columns(rows: list[Trajectory], probs: dict[str, Problem], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for kind, writer in (("sft", write_sft), ("kto", write_kto)):
        writer(rows, tmp_path, name=kind)
        schema = pq.ParquetFile(tmp_path / f"{kind}.parquet").schema_arrow
        assert all(not str(f.type).startswith(("struct", "list")) for f in schema), schema
    write_grpo(rows, probs, tmp_path, name="grpo")
    schema = pq.ParquetFile(tmp_path / "grpo.parquet").schema_arrow
    assert schema.metadata[b"shoparena.json_fields"] == b"prompt,gt_ids,reference_steps"


@pytest.fixture(scope="module")
def probs(corpus_world: Any) -> dict[str, Problem]:
    return {p.problem_id: p for p in corpus_world.problems}


def test_same_input_same_bytes(rows: list[Trajectory], probs: dict[str, Problem], tmp_path: Path) -> None:
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    for kind, writer in (("sft", write_sft), ("kto", write_kto)):
        writer(rows, tmp_path / "a", name=kind)
        writer(shuffled, tmp_path / "b", name=kind)
        for ext in ("jsonl", "parquet"):
            assert (tmp_path / "a" / f"{kind}.{ext}").read_bytes() == (tmp_path / "b" / f"{kind}.{ext}").read_bytes()
    write_grpo(rows, probs, tmp_path / "a")
    write_grpo(shuffled, dict(reversed(list(probs.items()))), tmp_path / "b")
    for ext in ("jsonl", "parquet"):
        assert (tmp_path / "a" / f"grpo.{ext}").read_bytes() == (tmp_path / "b" / f"grpo.{ext}").read_bytes()


def test_bad_rows_are_counted_not_raised(rows: list[Trajectory], tmp_path: Path) -> None:
    base = _nested_row()
    bad_args = Trajectory(traj_id="bad-args", source="oro_sft", tools=TOOLS, messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "find_product", "arguments": "{q: oops"}}]}])
    no_asst = Trajectory(traj_id="no-asst", source="oro_sft", tools=TOOLS, messages=[{"role": "user", "content": "q"}])
    bad_msg = Trajectory(traj_id="bad-msg", source="oro_sft", tools=TOOLS, messages=[{"role": "robot"}, "x"])  # type: ignore[list-item]
    empty = Trajectory(traj_id="empty", source="oro_sft", tools=TOOLS, messages=[])
    no_name = Trajectory(traj_id="no-name", source="oro_sft", tools=TOOLS, messages=[
        {"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])
    bad_tools = Trajectory(traj_id="bad-tools", source="oro_sft", tools=[3], messages=base.messages)  # type: ignore[list-item]
    res = write_sft([rows[0], base, base, bad_args, no_asst, bad_msg, empty, no_name, bad_tools], tmp_path)
    assert res.rows == 2
    assert dict(res.report.rejected) == {"duplicate": 1, "bad_arguments": 1, "no_assistant": 1, "bad_message": 1,
                                         "no_messages": 1, "bad_tool_call": 1, "bad_tools": 1}
    assert {r.traj_id for r in res.rejections} == {"nested-1", "bad-args", "no-asst", "bad-msg", "empty", "no-name",
                                                   "bad-tools"}


def test_kto_rows_shaped_for_trl(rows: list[Trajectory], tmp_path: Path) -> None:
    res = write_kto(rows, tmp_path)
    out = read_jsonl_rows(tmp_path / "kto.jsonl")
    assert out == read_parquet_rows(tmp_path / "kto.parquet") and len(out) == res.rows > 0
    by_traj = {t.traj_id: t for t in rows}
    for r in out:
        assert {"prompt", "completion", "label", "tools"} <= set(r) and isinstance(r["label"], bool)
        assert len(r["completion"]) == 1 and r["completion"][0]["role"] == "assistant"
        assert r["turn"] > 0 and r["prompt"][-1]["role"] in ("user", "tool")  # the turn answers a user / tool
        t = by_traj[r["traj_id"]]
        msgs = [{k: v for k, v in m.items() if v is not None} for m in t.messages]
        assert r["prompt"] == msgs[:r["turn"]] and r["completion"] == [msgs[r["turn"]]]
        assert isinstance(r["tools"], str) and orjson.loads(r["tools"])[0]["type"] == "function"
        assert r["label"] == kto_label(t)[0]
    # every assistant turn of a labelled trace is one row
    labelled = [t for t in rows if kto_label(t)[0] is not None]
    assert res.rows == sum(len(t.assistant_messages()) for t in labelled)
    # axis-B (pipeline) and failed traces are undesirable; react successes judged ≥ 0.7 desirable
    assert all(not r["label"] for r in out if by_traj[r["traj_id"]].axis == "B")
    assert all(not r["label"] for r in out if by_traj[r["traj_id"]].success is False)
    assert res.report.notes["desirable"] == sum(r["label"] for r in out)
    assert res.report.notes["desirable"] > 0 and res.report.notes["undesirable"] > 0
    last = write_kto(rows, tmp_path, name="kto_last", turns="last")
    assert last.rows == len(labelled)


def test_kto_label_rules() -> None:
    t = _nested_row()
    assert kto_label(t) == (True, "success")
    t.judge_score = 0.5
    assert kto_label(t) == (None, "judge_below_min")
    t.judge_score, t.coefficient = None, None
    assert kto_label(t) == (True, "success_unjudged")
    t.success = None
    assert kto_label(t) == (None, "unscored")
    t.success, t.axis = True, "B"
    assert kto_label(t) == (False, "sub_task")
    t.axis, t.success = "A", False
    assert kto_label(t) == (False, "failed")


def test_kto_unlabelled_rows_are_counted(tmp_path: Path) -> None:
    t = _nested_row()
    t.success = None
    res = write_kto([t], tmp_path)
    assert res.rows == 0 and dict(res.report.rejected) == {"unscored": 1}
    assert read_jsonl_rows(tmp_path / "kto.jsonl") == [] and read_parquet_rows(tmp_path / "kto.parquet") == []


def test_grpo_rows_carry_prompt_gt_and_teacher_steps(rows: list[Trajectory], probs: dict[str, Problem],
                                                     tmp_path: Path) -> None:
    res = write_grpo([*rows, _nested_row()], probs, tmp_path)
    out = read_jsonl_rows(tmp_path / "grpo.jsonl")
    assert out == read_parquet_rows(tmp_path / "grpo.parquet")
    solved = {t.problem_id for t in rows if t.success}
    assert [r["problem_id"] for r in out] == sorted(solved)
    assert res.report.rejected["no_reference"] == len(probs) - len(solved)
    assert res.report.rejected["unknown_problem"] == 1  # the nested row's problem is not in the set
    assert res.report.rejected["not_success"] == sum(1 for t in rows if not t.success)
    by_traj = {t.traj_id: t for t in rows}
    for r in out:
        p = probs[r["problem_id"]]
        assert r["gt_ids"] == p.gt_ids() and r["bucket"] == p.bucket
        assert orjson.loads(r["problem"]) == orjson.loads(orjson.dumps(problem_row(p)))
        ref = by_traj[r["reference_id"]]
        assert ref.success and ref.problem_id == p.problem_id
        assert [m["role"] for m in r["prompt"]][-1] == "user" and r["prompt"][-1]["content"] == p.query
        assert all(m["role"] in ("system", "user") for m in r["prompt"])
        assert len(r["reference_steps"]) == len(ref.assistant_messages())
        calls = [c for step in r["reference_steps"] for c in step]
        assert calls == [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                         for c in ref.tool_calls()]
        assert "recommend_product" in [c["name"] for c in calls]
        # the best reference: highest judge value among the problem's successes
        best = max((t for t in rows if t.problem_id == p.problem_id and t.success),
                   key=lambda t: t.judge_score if t.judge_score is not None else -1)
        assert (ref.judge_score or -1) == (best.judge_score or -1)


def test_datasets_roundtrip_or_clear_note(rows: list[Trajectory], tmp_path: Path) -> None:
    res = write_sft([*rows, _nested_row()], tmp_path)
    if not datasets_available():
        assert not (tmp_path / "sft_dataset").exists()
        assert any("datasets is not installed" in n for n in res.notes)
        with pytest.raises(ConfigError, match="datasets"):
            read_dataset_rows(tmp_path / "sft_dataset")
        pytest.skip("datasets is not installed here (the 'train' extra); the JSONL/Parquet round trips ran")
    assert read_dataset_rows(tmp_path / "sft_dataset") == read_jsonl_rows(tmp_path / "sft.jsonl")
    write_kto(rows, tmp_path)
    assert read_dataset_rows(tmp_path / "kto_dataset") == read_jsonl_rows(tmp_path / "kto.jsonl")


def test_split_guard_on_export(corpus_world: Any, rows: list[Trajectory], tmp_path: Path) -> None:
    manifest = split_problems(corpus_world.problems, config=SplitConfig(seed=1, eval_fraction=0.25))
    parts = assign_rows(rows, manifest)
    assert parts["train"] and parts["eval"]
    res = write_sft(parts["train"], tmp_path, name="sft_train", manifest=manifest, partition="train")
    assert res.rows == len(parts["train"])
    write_sft(parts["eval"], tmp_path, name="sft_eval", manifest=manifest, partition="eval")
    with pytest.raises(LeakError, match="outside the train partition"):
        write_sft(parts["train"] + parts["eval"][:1], tmp_path, name="x", manifest=manifest, partition="train")
    with pytest.raises(LeakError, match="unassigned"):
        write_kto([_nested_row()], tmp_path, name="x", manifest=manifest, partition="train")
    eval_problems = {p.problem_id: p for p in corpus_world.problems if manifest.partition(p.problem_id) == "eval"}
    with pytest.raises(LeakError):
        write_grpo(rows, eval_problems, tmp_path, name="x", manifest=manifest, partition="train")
    with pytest.raises(ConfigError):
        write_sft(parts["train"], tmp_path, name="x", manifest=manifest, partition="never_touch")
    assert not (tmp_path / "x.jsonl").exists()


def test_manifest_records_everything_and_detects_tampering(corpus_world: Any, rows: list[Trajectory],
                                                          tmp_path: Path) -> None:
    def build(out: Path) -> Path:
        manifest = split_problems(corpus_world.problems, config=SplitConfig(seed=1, eval_fraction=0.25))
        manifest.save(out / "split.json")
        parts = assign_rows(rows, manifest)
        exports = [write_sft(parts["train"], out, name="sft_train", manifest=manifest),
                   write_sft(parts["eval"], out, name="sft_eval", manifest=manifest, partition="eval"),
                   write_kto(parts["train"], out, name="kto_train", manifest=manifest)]
        normalize = StageReport(stage="normalize", seen=36, kept=36)
        return write_manifest(out, sources=[{"kind": "store", "url": "sqlite:///store.db", "records": 36}],
                              filter_config={"min_judge_score": 0.5}, reports=[normalize, parts.report],
                              split=manifest, exports=exports, guard={"note": "test"})

    path = build(tmp_path / "a")
    assert build(tmp_path / "b").read_bytes() == path.read_bytes()
    body = read_manifest(tmp_path / "a")
    assert body["format"].startswith("shoparena-corpus-export/")
    assert body["versions"]["pyarrow"] and body["versions"]["shoparena"]
    assert body["sources"][0]["records"] == 36 and body["filter_config"] == {"min_judge_score": 0.5}
    assert [c["stage"] for c in body["counts"]] == ["normalize", "split"]
    assert body["split"]["partitions"]["eval"]["problems_hash"]
    assert set(body["exports"]) == {"sft_train", "sft_eval", "kto_train"}
    assert {"sft_train.jsonl", "sft_train.parquet", "kto_train.parquet", "split.json"} <= set(body["files"])
    assert body["exports"]["sft_train"]["files"]["sft_train.parquet"] == body["files"]["sft_train.parquet"]["sha256"]
    assert body["guard"] == {"note": "test"}
    target = tmp_path / "a" / "sft_train.jsonl"
    target.write_bytes(target.read_bytes().replace(b"recommend_product", b"recommend_produce", 1))
    with pytest.raises(DataError, match="changed since the manifest"):
        read_manifest(tmp_path / "a")
    (tmp_path / "b" / "extra.txt").write_text("x")
    with pytest.raises(DataError, match="not in the manifest"):
        read_manifest(tmp_path / "b")
    (tmp_path / "b" / "kto_train.jsonl").unlink()
    with pytest.raises(DataError) as info:  # every problem is named, not only the first
        read_manifest(tmp_path / "b")
    assert "2 problems" in info.value.message and "extra.txt is not in the manifest" in info.value.message
    assert "kto_train.jsonl is missing" in info.value.message
    (tmp_path / "b" / "manifest.json").write_text("[1]")
    with pytest.raises(DataError, match="not an export manifest"):
        read_manifest(tmp_path / "b", verify=False)


def test_grpo_writes_no_problem_without_its_whole_ground_truth(rows: list[Trajectory], probs: dict[str, Problem],
                                                               tmp_path: Path) -> None:
    """A voucher problem without its voucher (what a problem rebuilt from store records is) would stop training;
    problems rebuilt from records (``ground_truth=False``) give no row at all."""
    solved = sorted({t.problem_id for t in rows if t.success})
    broken = dict(probs)
    broken[solved[0]] = probs[solved[0]].model_copy(update={"bucket": "voucher", "voucher": None})
    res = write_grpo(rows, broken, tmp_path / "a")
    assert res.report.rejected["unreadable_problem"] == 1
    assert [r["problem_id"] for r in read_jsonl_rows(tmp_path / "a" / "grpo.jsonl")] == solved[1:]
    views = write_grpo(rows, probs, tmp_path / "b", ground_truth=False)
    assert views.rows == 0 and views.report.rejected["no_ground_truth"] == len(solved)
