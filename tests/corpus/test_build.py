"""``shoparena corpus build`` end to end (``docs/corpus-design.md``): store and rollout sources, stage accounting, the rewrite's
growth, the leak-guarded split, exports + manifest, determinism, and the guard failing loudly."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import orjson
import pytest

from shoparena.corpus.build import CorpusConfig, build_corpus
from shoparena.corpus.export import read_jsonl_rows, read_manifest
from shoparena.corpus.normalize import iter_store, to_steps
from shoparena.corpus.split import SplitConfig, SplitManifest
from shoparena.corpus.types import Trajectory
from shoparena.errors import LeakError
from shoparena.store import open_store
from shoparena.store.pg import TempPostgres
from tests.corpus.conftest import CorpusWorld


def _stage(report, name: str) -> dict:
    return next(s for s in report.stages if s["stage"] == name)


def _rows(world: CorpusWorld) -> list[Trajectory]:
    with open_store(world.store_url) as st:
        return [t for t in iter_store(st) if isinstance(t, Trajectory)]


def test_store_build_accounts_for_every_row(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    report = build_corpus(tmp_path / "c", store=corpus_world.store_url, catalog=corpus_world.catalog)
    rows = _rows(corpus_world)
    assert _stage(report, "normalize")["seen"] == len(rows) == 36
    for s in report.stages:  # every stage: seen = kept + Σ rejected
        assert s["seen"] == s["kept"] + sum(s["rejected"].values()), s
    chain = ["judge", "format", "axis", "dedup_rank", "outcome"]
    for prev, nxt in pairwise(chain):
        assert _stage(report, nxt)["seen"] == _stage(report, prev)["kept"]
    # the judge gate reads judge_score >= 0.5; nothing else decides it
    assert _stage(report, "judge")["kept"] == sum(1 for t in rows if t.judge_score is not None and t.judge_score >= 0.5)
    # the rewriter gets every successful axis-B row, whatever its judge score
    successes_b = [t for t in rows if t.axis == "B" and t.success]
    assert successes_b and _stage(report, "rewrite")["seen"] == len(successes_b)
    assert report.rewritten_rows == _stage(report, "rewrite:outcome")["kept"] > 0
    assert report.agentic_rows == _stage(report, "outcome")["kept"]
    assert report.growth == pytest.approx(round(report.rewritten_rows / report.agentic_rows, 4))
    assert report.split["proof"] == "ok"

    out = tmp_path / "c"
    manifest = read_manifest(out)  # verifies every file hash
    assert {"sft_train.jsonl", "sft_eval.parquet", "kto_train.jsonl", "grpo_train.jsonl", "split.json"} <= set(
        manifest["files"])
    split = SplitManifest.load(out / "split.json")
    train = set(split.partitions["train"].problems)
    evals = set(split.partitions["eval"].problems)
    sft_train = read_jsonl_rows(out / "sft_train.jsonl")
    sft_eval = read_jsonl_rows(out / "sft_eval.jsonl")
    assert sft_train and all(r["problem_id"] in train for r in sft_train)
    assert all(r["problem_id"] in evals for r in sft_eval)
    assert len(sft_train) + len(sft_eval) == report.agentic_rows + report.rewritten_rows
    assert any(r["source"] == "rewrite" for r in sft_train + sft_eval)
    # provenance stays outside the rows, one line per exported trajectory, traceable to a stored record
    prov = {p["traj_id"]: p for p in read_jsonl_rows(out / "provenance.jsonl")}
    row_ids = {t.traj_id for t in rows}
    record_ids = {t.provenance["record_id"] for t in rows}
    for r in sft_train + sft_eval:
        p = prov[r["id"]]["provenance"]
        assert p["record_id"] in record_ids
        assert (p["rewritten_from"] if prov[r["id"]]["rewritten"] else r["id"]) in row_ids
    assert all("provenance" not in m and "step_meta" not in m for r in sft_train for m in r["messages"])
    for r in sft_train:  # arguments and tools travel as JSON strings
        assert isinstance(r["tools"], str)
        calls = [c for m in r["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert all(isinstance(c["function"]["arguments"], str) for c in calls)
        names = [c["function"]["name"] for c in calls]
        assert names.count("recommend_product") == 1


def test_build_is_deterministic(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    a = build_corpus(tmp_path / "a", store=corpus_world.store_url, catalog=corpus_world.catalog)
    b = build_corpus(tmp_path / "b", store=corpus_world.store_url, catalog=corpus_world.catalog)
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()
    assert a.stages == b.stages
    other = build_corpus(tmp_path / "c", store=corpus_world.store_url, catalog=corpus_world.catalog,
                         config=CorpusConfig(split=SplitConfig(seed=9, eval_fraction=0.5)))
    assert (tmp_path / "c" / "split.json").read_bytes() != (tmp_path / "a" / "split.json").read_bytes()
    assert other.stages[:6] == a.stages[:6]  # the split seed changes the split, not the filter


def test_rollout_source_is_scored_and_bad_lines_counted(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    rows = [t for t in _rows(corpus_world) if t.provenance.get("agent_id") == "react-expert"]
    path = tmp_path / "rollouts.jsonl"
    with open(path, "wb") as fh:
        for t in rows:
            fh.write(orjson.dumps(to_steps(t)) + b"\n")  # upstream form: a step list, joined by its query
        fh.write(b"{not json\n")
    report = build_corpus(tmp_path / "c", rollouts=path, catalog=corpus_world.catalog,
                          problems=corpus_world.problems_file)
    norm = _stage(report, "normalize")
    assert norm["seen"] == len(rows) + 1 and norm["kept"] == len(rows) and norm["rejected"] == {"bad_json": 1}
    # imported rollouts carry no score: the build scored them strict, and the scores agree with the validator's
    assert _stage(report, "outcome")["seen"] > 0
    sft = read_jsonl_rows(tmp_path / "c" / "sft_train.jsonl") + read_jsonl_rows(tmp_path / "c" / "sft_eval.jsonl")
    assert sft and {r["problem_id"] for r in sft} <= {t.problem_id for t in rows}
    kto = read_jsonl_rows(tmp_path / "c" / "kto_train.jsonl")
    by_problem = {t.problem_id: t.success for t in rows}
    assert all(r["label"] == by_problem[r["problem_id"]] for r in kto)


def test_frozen_split_is_reused_and_an_edited_one_fails_loudly(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    build_corpus(tmp_path / "a", store=corpus_world.store_url, catalog=corpus_world.catalog,
                 config=CorpusConfig(split=SplitConfig(seed=3, eval_fraction=0.4)))
    frozen = tmp_path / "a" / "split.json"
    again = build_corpus(tmp_path / "b", store=corpus_world.store_url, catalog=corpus_world.catalog, split=frozen)
    assert (tmp_path / "b" / "split.json").read_bytes() == frozen.read_bytes()  # another seed would not matter
    assert again.split["proof"] == "ok"

    body = json.loads(frozen.read_text())
    moved = body["partitions"]["eval"]["problems"][0]  # move one eval problem into train, hashes untouched
    body["partitions"]["eval"]["problems"].remove(moved)
    body["partitions"]["train"]["problems"].append(moved)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(body))
    with pytest.raises(LeakError) as exc:
        build_corpus(tmp_path / "c", store=corpus_world.store_url, catalog=corpus_world.catalog, split=edited)
    assert exc.value.violations and not (tmp_path / "c" / "manifest.json").exists()

    # a frozen split that lacks some problems: their rows are counted and never exported
    body = json.loads(frozen.read_text())
    report = build_corpus(tmp_path / "d", store=corpus_world.store_url, catalog=corpus_world.catalog, split=frozen)
    held = {p for part in body["partitions"].values() for p in part["problems"]}
    assert {r["problem_id"] for r in read_jsonl_rows(tmp_path / "d" / "sft_train.jsonl")} <= held
    assert _stage(report, "split")["rejected"].get("unknown_problem", 0) == 0  # the store holds no other problem


def test_cli_json(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "shoparena", "corpus", "build", "--from", corpus_world.store_url,
                           "--catalog", str(corpus_world.catalog), "--out", str(out), "--min-judge-score", "0.0",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    judge = next(s for s in body["stages"] if s["stage"] == "judge")
    assert judge["rejected"] == {} and judge["kept"] == 36  # threshold 0 keeps every judged row
    assert set(body["split"]["sizes"]) == {"train", "eval", "never_touch"}
    assert (out / "manifest.json").is_file()
    bad = subprocess.run([sys.executable, "-m", "shoparena", "corpus", "build", "--out", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "exactly one source" in bad.stderr


def _same_training_files(a: Path, b: Path) -> None:
    """What a trainer reads from a corpus (:data:`shoparena.corpus.export.manifest.TRAINING_FILES`, a file a corpus may lack
    included): two corpora that agree on these train the same checkpoint."""
    from shoparena.corpus.export.manifest import TRAINING_FILES

    for name in TRAINING_FILES:
        assert (a / name).is_file() == (b / name).is_file(), name
        if (a / name).is_file():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "sft_train.jsonl").is_file()


_CLOCK_KEYS = frozenset({"started_at", "finished_at", "timestamp", "duration_ms", "execution_time"})


def _shift_clock(value: object, by: int) -> object:
    """``value`` with every wall-clock reading moved: what a rerun of the same seeded episodes changes."""
    if isinstance(value, dict):
        return {k: (v + by if k in _CLOCK_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
                    else _shift_clock(v, by)) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift_clock(v, by) for v in value]
    return value


def test_same_episodes_at_other_times_build_the_same_rows(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    """A seeded arena run twice stores the same episodes under other record ids (the record hashes its timings);
    the corpus's rows, their order and every choice among tied traces follow the episodes, not the clock."""
    from shoparena.store.types import TrajectoryRecord

    url = f"sqlite:///{tmp_path / 'rerun.db'}"
    with open_store(corpus_world.store_url) as src, open_store(url) as dst:
        bodies = [orjson.loads(b) for b in src.bodies()]
        moved = [TrajectoryRecord.model_validate({**_shift_clock(b, 3_600_000), "record_id": ""}).sealed(
            b["created_at"] + 3_600_000) for b in bodies]
        assert dst.append_many(moved) == len(bodies)
    assert not {b["record_id"] for b in bodies} & {r.record_id for r in moved}  # every record id changed
    a = build_corpus(tmp_path / "a", store=corpus_world.store_url, catalog=corpus_world.catalog)
    b = build_corpus(tmp_path / "b", store=url, catalog=corpus_world.catalog)
    assert a.stages == b.stages and a.split == b.split
    _same_training_files(tmp_path / "a", tmp_path / "b")
    # the link back to the store is the provenance's record id, which names the records of each store
    stores = ((tmp_path / "a", {x["record_id"] for x in bodies}), (tmp_path / "b", {r.record_id for r in moved}))
    for out, ids in stores:
        prov = read_jsonl_rows(out / "provenance.jsonl")
        assert prov and all(p["provenance"]["record_id"] in ids for p in prov)


def test_postgres_store_builds_the_same_corpus(corpus_world: CorpusWorld, pg_server: TempPostgres,
                                               tmp_path: Path) -> None:
    from shoparena.store.types import TrajectoryRecord

    url = pg_server.create_schema("corpus")
    with open_store(corpus_world.store_url) as src, open_store(url) as dst:
        bodies = [orjson.loads(b) for b in src.bodies()]
        assert dst.append_many(TrajectoryRecord.model_validate(b) for b in bodies) == len(bodies)
        created = sorted(b["created_at"] for b in bodies)
    a = build_corpus(tmp_path / "sqlite", store=corpus_world.store_url, catalog=corpus_world.catalog)
    b = build_corpus(tmp_path / "pg", store=url, catalog=corpus_world.catalog)
    assert a.stages == b.stages and a.split == b.split
    _same_training_files(tmp_path / "sqlite", tmp_path / "pg")
    assert "***" in b.source["url"] or "@" not in b.source["url"]  # never a password in the manifest
    # --since selects by record time (CLI): a bound after the last record selects nothing, and an empty corpus is
    # refused (exit 3, one error line), never written as a finished corpus
    out = tmp_path / "late"
    proc = subprocess.run([sys.executable, "-m", "shoparena", "corpus", "build", "--from", corpus_world.store_url,
                           "--out", str(out), "--since", str(created[-1] + 1), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "0 records read" in proc.stderr and "hint:" in proc.stderr and not (out / "manifest.json").exists()


def test_show_verifies_every_file(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    out = tmp_path / "c"
    report = build_corpus(out, store=corpus_world.store_url, catalog=corpus_world.catalog)
    run = lambda *a: subprocess.run([sys.executable, "-m", "shoparena", "corpus", "show", str(out), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    ok = run("--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["exports"]["sft_train"]["rows"] == report.exports["sft_train"]["rows"]
    with open(out / "sft_eval.jsonl", "a", encoding="utf-8") as fh:
        fh.write("{}\n")  # one row slipped into the eval set after the build
    bad = run()
    assert bad.returncode == 3 and "sft_eval.jsonl changed" in bad.stderr
