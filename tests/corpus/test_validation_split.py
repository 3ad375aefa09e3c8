"""The corpus's validation partition (``docs/corpus-design.md``, "The validation partition"): carved from the train
partition's leak clusters only, stratified by bucket, seeded, frozen in ``split.json``; its rows reach no train
export and ``evaluate --split DIR:validation`` resolves its problems; ``--validation 0`` (the default) is byte for
byte the corpus of a build without the flag. And an empty corpus is refused (exit 3), never a finished-looking
directory with no train row."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.corpus.build import CorpusConfig, build_corpus
from shoparena.corpus.export import read_jsonl_rows, read_manifest
from shoparena.corpus.split import (
    PARTITIONS,
    VALIDATION,
    SplitConfig,
    SplitManifest,
    assign_rows,
    split_problems,
    verify_split,
)
from shoparena.corpus.types import Trajectory
from shoparena.errors import ConfigError, DataError, LeakError
from shoparena.evaluate import split_problems as resolve_split
from shoparena.store import open_store
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.types import Problem
from tests.corpus.conftest import CorpusWorld

USAGE, DATA_ERROR = 2, 3


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from shoparena.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hint:" in err and "Traceback" not in err, err
    return errors[0]


# ───────────────────────────────────────────────────────────────────────── the split itself

@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> list[Problem]:
    """60 generated problems: 20 per bucket, 30 generator clusters of two (base + paraphrase)."""
    index = create_catalog(generate_catalog(600, seed=31), tmp_path_factory.mktemp("vsplit") / "cat")
    return generate_problems(index, n=60, seed=7, paraphrases=1)


def _bucket_clusters(m: SplitManifest, problems: list[Problem], partition: str) -> dict[str, set[str]]:
    bucket = {p.problem_id: p.bucket for p in problems}
    out: dict[str, set[str]] = defaultdict(set)
    for pid in m.partitions[partition].problems:
        out[bucket[pid]].add(m.clusters[pid])
    return out


@pytest.mark.parametrize("seed", [0, 5, "abc"])
def test_validation_is_carved_from_train_clusters_only(problems: list[Problem], seed: int | str) -> None:
    base = SplitConfig(seed=seed, eval_fraction=0.2, never_touch_fraction=0.1)
    before = split_problems(problems, config=base)
    after = split_problems(problems, config=base.model_copy(update={"validation_fraction": 0.3}))
    assert set(after.partitions) == {*PARTITIONS, VALIDATION}
    # eval and never_touch are exactly what they are without a validation partition
    for name in ("eval", "never_touch"):
        assert after.partitions[name] == before.partitions[name]
    train0, train, val = (set(before.partitions["train"].clusters), set(after.partitions["train"].clusters),
                          set(after.partitions[VALIDATION].clusters))
    assert val and train and not val & train and val | train == train0
    held = set(after.partitions["eval"].clusters) | set(after.partitions["never_touch"].clusters)
    assert not val & held
    # stratified: each bucket gives round(0.3 × its train clusters)
    per_bucket = _bucket_clusters(before, problems, "train")
    carved = _bucket_clusters(after, problems, VALIDATION)
    assert {b: len(c) for b, c in carved.items()} == {b: round(0.3 * len(c)) for b, c in per_bucket.items()}
    assert verify_split(after, problems).ok  # the guard proves validation disjoint from every other partition
    # deterministic in the seed and the problems, whatever their order
    again = split_problems(list(reversed(problems)), config=after.config)
    assert again.to_bytes() == after.to_bytes()


def test_another_seed_carves_other_clusters(problems: list[Problem]) -> None:
    picks = {seed: split_problems(problems, config=SplitConfig(seed=seed, validation_fraction=0.3))
             .partitions[VALIDATION].clusters for seed in (1, 2, 3)}
    assert len({tuple(v) for v in picks.values()}) > 1


def test_a_fraction_too_small_for_any_bucket_still_carves_one_cluster(problems: list[Problem]) -> None:
    m = split_problems(problems, config=SplitConfig(seed=1, validation_fraction=0.01))
    assert len(m.partitions[VALIDATION].clusters) == 1
    one = problems[:2]  # a problem and its paraphrase: one cluster, in train, which cannot give it up
    assert len(split_problems(one, config=SplitConfig(eval_fraction=0.0)).partitions["train"].clusters) == 1
    with pytest.raises(DataError, match="leave train empty"):
        split_problems(one, config=SplitConfig(eval_fraction=0.0, validation_fraction=0.2))


def test_zero_is_the_split_of_before(problems: list[Problem], tmp_path: Path) -> None:
    plain = split_problems(problems, config=SplitConfig(seed=4))
    zero = split_problems(problems, config=SplitConfig(seed=4, validation_fraction=0.0))
    assert zero.to_bytes() == plain.to_bytes() and b"validation" not in plain.to_bytes()
    assert set(plain.partitions) == set(PARTITIONS)
    assert "validation_fraction" not in SplitConfig().model_dump(mode="json")
    # the stored form reads back to the same config (an old split.json has no validation key)
    SplitManifest.load(plain.save(tmp_path / "split.json"))


@pytest.mark.parametrize("bad", [-0.1, 0.5, 0.7, 1.0])
def test_a_fraction_outside_zero_to_a_half_is_refused(bad: float) -> None:
    with pytest.raises(ValidationError, match="validation_fraction"):
        SplitConfig(validation_fraction=bad)


def test_a_split_with_validation_reads_back_and_refuses_edits(problems: list[Problem], tmp_path: Path) -> None:
    m = split_problems(problems, config=SplitConfig(seed=2, validation_fraction=0.25))
    path = m.save(tmp_path / "split.json")
    assert SplitManifest.load(path) == m
    body = json.loads(path.read_text(encoding="utf-8"))
    moved = body["partitions"][VALIDATION]["problems"].pop()  # a validation problem slipped into train
    body["partitions"]["train"]["problems"].append(moved)
    path.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(LeakError):
        SplitManifest.load(path)
    body = json.loads(m.to_bytes())
    del body["partitions"][VALIDATION]  # a validation partition dropped: its clusters would sit nowhere
    path.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(LeakError):
        SplitManifest.load(path)


def test_rows_of_validation_problems_never_reach_train(problems: list[Problem]) -> None:
    m = split_problems(problems, config=SplitConfig(seed=3, validation_fraction=0.3))
    rows = [Trajectory(traj_id=f"t{i}", source="store", messages=[], tools=[], problem_id=p.problem_id)
            for i, p in enumerate(problems)]
    routed = assign_rows(rows, m)
    assert set(routed) == {"train", "eval", VALIDATION}
    group = m.group_of()
    for name, got in routed.items():
        assert got and all(group[t.problem_id] == name for t in got)  # type: ignore[index]
    assert routed.report.notes == {name: len(routed[name]) for name in ("train", "eval", VALIDATION)}


# ───────────────────────────────────────────────────────────────────────── a built corpus

@pytest.fixture(scope="module")
def built(corpus_world: CorpusWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("validation") / "corpus"
    report = build_corpus(out, store=corpus_world.store_url, catalog=corpus_world.catalog,
                          problems=corpus_world.problems_file,
                          config=CorpusConfig(split=SplitConfig(validation_fraction=0.2)))
    assert report.split["proof"] == "ok" and VALIDATION in report.split["sizes"]
    return out


def test_validation_problems_reach_no_train_export(built: Path) -> None:
    manifest = read_manifest(built)  # verifies every file
    split = SplitManifest.load(built / "split.json")
    val = set(split.partitions[VALIDATION].problems)
    val_clusters = set(split.partitions[VALIDATION].clusters)
    assert val and val_clusters
    for name in PARTITIONS:
        assert not val_clusters & set(split.partitions[name].clusters)
        assert not val & set(split.partitions[name].problems)
    for name in ("sft_train", "kto_train", "grpo_train"):
        rows = read_jsonl_rows(built / f"{name}.jsonl")
        assert rows and not {r["problem_id"] for r in rows} & val, name
    sft_val = read_jsonl_rows(built / "sft_validation.jsonl")
    assert sft_val and {r["problem_id"] for r in sft_val} <= val
    assert manifest["exports"]["sft_validation"]["rows"] == len(sft_val)
    # recorded in the manifest's settings and its split section
    assert manifest["filter_config"]["split"]["validation_fraction"] == 0.2
    assert manifest["split"]["partitions"][VALIDATION]["problems"] == len(val)


def test_a_reused_split_keeps_its_validation(built: Path, corpus_world: CorpusWorld, tmp_path: Path) -> None:
    again = tmp_path / "again"
    build_corpus(again, store=corpus_world.store_url, catalog=corpus_world.catalog,
                 problems=corpus_world.problems_file, split=built / "split.json")
    assert (again / "split.json").read_bytes() == (built / "split.json").read_bytes()
    for name in ("sft_validation.jsonl", "sft_train.jsonl", "grpo_train.jsonl"):
        assert (again / name).read_bytes() == (built / name).read_bytes(), name


def test_evaluate_split_resolves_the_validation_problems(built: Path, corpus_world: CorpusWorld,
                                                         tmp_path: Path) -> None:
    split = SplitManifest.load(built / "split.json")
    got = resolve_split(f"{built}:validation")
    assert [p.problem_id for p in got] == split.partitions[VALIDATION].problems
    assert {p.problem_id for p in resolve_split(f"{built}:eval")} == set(split.partitions["eval"].problems)
    with pytest.raises(ConfigError, match="not held out"):
        resolve_split(f"{built}:train")
    plain = tmp_path / "plain"  # a corpus built without --validation has none to give
    build_corpus(plain, store=corpus_world.store_url, catalog=corpus_world.catalog,
                 problems=corpus_world.problems_file)
    with pytest.raises(ConfigError, match="without a validation partition"):
        resolve_split(f"{plain}:validation")


def test_evaluate_split_joins_held_out_partitions_for_one_paired_test(built: Path) -> None:
    split = SplitManifest.load(built / "split.json")
    held = [name for name in ("eval", VALIDATION, "never_touch") if split.partitions[name].problems]
    assert len(held) >= 2  # the fixture's corpus has two non-empty held-out partitions to join
    a, b = held[:2]
    both = resolve_split(f"{built}:{a}+{b}")
    ids = [p.problem_id for p in both]
    assert ids == sorted(split.partitions[a].problems + split.partitions[b].problems)
    assert len(set(ids)) == len(ids)
    assert [p.problem_id for p in resolve_split(f"{built}:{b}+{a}")] == ids  # the order named is no matter
    with pytest.raises(ConfigError, match="not held out"):
        resolve_split(f"{built}:{a}+train")  # a train problem never joins a held-out set
    with pytest.raises(ConfigError, match="named twice"):
        resolve_split(f"{built}:{a}+{a}")
    with pytest.raises(ConfigError, match="not held out"):
        resolve_split(f"{built}:{a}+")


# ───────────────────────────────────────────────────────────────────────── the CLI

def test_cli_validation_zero_is_byte_identical_to_no_flag(corpus_world: CorpusWorld, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    common = ["corpus", "build", "--from", corpus_world.store_url, "--catalog", str(corpus_world.catalog), "--json"]
    code, _, err = _cli(capsys, *common, "--out", str(tmp_path / "a"))
    assert code == 0, err
    code, _, err = _cli(capsys, *common, "--out", str(tmp_path / "b"), "--validation", "0")
    assert code == 0, err
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert b"validation" not in (tmp_path / "a" / "manifest.json").read_bytes()
    code, out, err = _cli(capsys, *common, "--out", str(tmp_path / "c"), "--validation", "0.2", "--problems",
                          str(corpus_world.problems_file))
    assert code == 0, err
    assert json.loads(out)["split"]["sizes"][VALIDATION]["clusters"] >= 1
    assert (tmp_path / "c" / "sft_validation.jsonl").is_file()
    # the problems as the records describe them cluster coarser: train keeps one cluster, none can be carved
    code, _, err = _cli(capsys, *common, "--out", str(tmp_path / "d"), "--validation", "0.2")
    assert code == DATA_ERROR and "leave train empty" in _one_error(err)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("bad", ["0.5", "0.9", "-0.1", "nan"])
def test_cli_refuses_a_fraction_outside_zero_to_a_half(bad: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c"
    code, _, err = _cli(capsys, "corpus", "build", "--from", f"sqlite:///{tmp_path / 'none.db'}", "--out", str(out),
                        f"--validation={bad}")
    assert code == USAGE, err
    assert "--validation" in _one_error(err) and not out.exists()


def test_cli_refuses_validation_with_a_reused_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "split.json").write_text("{}", encoding="utf-8")
    code, _, err = _cli(capsys, "corpus", "build", "--from", f"sqlite:///{tmp_path / 'none.db'}", "--out",
                        str(tmp_path / "c"), "--split", str(tmp_path / "split.json"), "--validation", "0.2")
    assert code == USAGE and "--split" in _one_error(err)
    assert not (tmp_path / "c").exists()


# ───────────────────────────────────────────────────────────────────────── an empty corpus is refused

def test_a_store_of_empty_traces_is_refused(corpus_world: CorpusWorld, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Agents that failed in the sandbox leave records without steps: the build names that and exits 3."""
    from shoparena.store.types import TrajectoryRecord

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    with open_store(corpus_world.store_url) as src, open_store(url) as dst:
        bodies = [orjson.loads(b) for b in src.bodies()]
        emptied = [TrajectoryRecord.model_validate({**b, "steps": [], "messages": []}).sealed(b["created_at"])
                   for b in bodies]
        assert dst.append_many(emptied) == len(bodies)
    out = tmp_path / "c"
    code, _, err = _cli(capsys, "corpus", "build", "--from", url, "--catalog", str(corpus_world.catalog), "--out",
                        str(out))
    assert code == DATA_ERROR, err
    line = _one_error(err)
    assert "empty_trace" in line and f"{len(bodies)} of {len(bodies)}" in line, line
    assert not out.exists()  # nothing that looks like a corpus (fresh_out removes the empty directory)


def test_a_build_with_no_train_row_is_refused(corpus_world: CorpusWorld, tmp_path: Path) -> None:
    out = tmp_path / "c"
    with pytest.raises(DataError, match="no SFT train row") as exc:  # every cluster in eval: nothing to train on
        build_corpus(out, store=corpus_world.store_url, catalog=corpus_world.catalog,
                     config=CorpusConfig(split=SplitConfig(eval_fraction=1.0)))
    assert "split in_eval" in exc.value.message and exc.value.hint
    assert not (out / "split.json").exists() and not (out / "manifest.json").exists()
