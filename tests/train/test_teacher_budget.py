"""The teacher stage at the paper's budget: fresh bank problems drawn only outside the corpus's held-out leak
clusters and its train problems (seeded, stratified, proven), and the ``max_rows`` budget of a learning curve
(a deterministic subsample; ``0`` passes the input checkpoint on). Real banks, corpora, harness runs and the tiny
Qwen3."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import ConfigError, LeakError
from shoparena.llm.compact import CompactConfig
from shoparena.tasks.types import Problem
from shoparena.train.teacher import (
    TeacherConfig,
    draw_bank_problems,
    find_banks,
    held_out_problems,
    prove_fresh,
    subsample_rows,
    train_teacher,
)
from shoparena.train.types import LoraConfig

TRAIN: dict[str, Any] = {"max_steps": 1, "batch_size": 2, "max_length": 1536, "truncation": "keep_start",
                         "compact": CompactConfig(max_items=2, max_chars=300), "lora": LoraConfig(r=4, alpha=8),
                         "concurrency": 2}


@dataclass(frozen=True)
class BankWorld:
    store_url: str
    catalog: Path
    corpus: Path
    """Built from ``banks`` (its split covers every bank problem; train problems without rows are fresh)."""
    banks: Path
    train: list[Problem]
    """The corpus's train problems (its ``grpo_train`` rows), as ``run_recipe`` hands them to the teacher."""
    file_corpus: Path
    """Built from the world's problem file (eval: one of each bucket's two clusters), no bank recorded."""
    twin_banks: Path
    """The world's problems, fresh ones and three twins of one ``file_corpus`` eval problem, clustered laxly."""
    twins: dict[str, str]
    """Twin problem id → how it is linked to the eval problem (``gt``, ``query``, ``given``)."""


@pytest.fixture(scope="module")
def bank_world(tmp_path_factory: pytest.TempPathFactory) -> BankWorld:
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.corpus.build import CorpusConfig, build_corpus
    from shoparena.corpus.export.common import read_jsonl_rows
    from shoparena.corpus.split import SplitConfig, SplitManifest
    from shoparena.corpus.testing import seed_world
    from shoparena.tasks.banks import BankConfig, BankSet
    from shoparena.tasks.clusters import ClusterConfig
    from shoparena.tasks.generator import generate_problems
    from shoparena.train.harness import problems_of_rows

    root = tmp_path_factory.mktemp("bank-world")
    world = seed_world(root, n_problems=12)  # two generator clusters per bucket
    fresh = generate_problems(SearchIndex.open(index_path(world.catalog)), n=30, seed=99, paraphrases=1)
    # open / held_out / reserve all present, so the default draw's partition rule has something to refuse
    BankSet.build([*world.problems, *fresh], seed=0,
                  config=BankConfig(held_out_fraction=0.2, open_fraction=0.6)).save(root / "banks")
    build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog, banks=root / "banks",
                 config=CorpusConfig(split=SplitConfig(seed=0, eval_fraction=0.2, never_touch_fraction=0.15)))
    build_corpus(root / "file-corpus", store=world.store_url, catalog=world.catalog, problems=world.problems_file,
                 config=CorpusConfig(split=SplitConfig(seed=0, eval_fraction=0.5)))
    split = SplitManifest.load(root / "file-corpus" / "split.json")
    by_id = {p.problem_id: p for p in world.problems}
    target = by_id[split.partitions["eval"].problems[0]]
    donors = [p for p in fresh if p.bucket == target.bucket and p.cluster_id != target.cluster_id]
    twins = {
        # the eval problem's GT product under another request
        "twin:gt": target.model_copy(update={"problem_id": "twin:gt", "cluster_id": None,
                                             "query": donors[0].query + " I need it for a gift."}),
        # the eval problem's request with another answer
        "twin:query": donors[1].model_copy(update={"problem_id": "twin:query", "cluster_id": None,
                                                   "query": target.query}),
        # another request and answer, but the eval problem's generator cluster (a paraphrase family member)
        "twin:given": donors[2].model_copy(update={"problem_id": "twin:given", "cluster_id": target.cluster_id,
                                                   "query": donors[2].query + " Thanks a lot."}),
    }
    lax = ClusterConfig(link_given=False, link_gt=False, link_signature=False, paraphrase="off")
    BankSet.build([*world.problems, *fresh, *twins.values()], seed=0,
                  config=BankConfig(held_out_fraction=0.0, open_fraction=1.0, cluster=lax)).save(root / "twins")
    return BankWorld(store_url=world.store_url, catalog=world.catalog, corpus=root / "corpus", banks=root / "banks",
                     train=problems_of_rows(read_jsonl_rows(root / "corpus" / "grpo_train.jsonl")),
                     file_corpus=root / "file-corpus", twin_banks=root / "twins",
                     twins={pid: pid.split(":")[1] for pid in twins})


def _draw(world: BankWorld, n: int, seed: int = 0, **kw: Any) -> Any:
    from shoparena.tasks.banks import BankSet

    split, held = held_out_problems(world.corpus)
    return draw_bank_problems(BankSet.load(world.banks), split, held, {p.problem_id for p in world.train}, n, seed,
                              **kw)


def test_bank_problems_come_only_from_outside_held_out_and_train(bank_world: BankWorld) -> None:
    from shoparena.tasks.banks import BankSet

    bank = BankSet.load(bank_world.banks)
    split, held = held_out_problems(bank_world.corpus)
    assert set(held) == {pid for name, info in split.partitions.items() if name != "train" for pid in info.problems}
    assert {split.partition(pid) for pid in held} == {"eval", "never_touch"}
    draw = _draw(bank_world, 10_000)
    chosen = {p.problem_id for p in draw.problems}
    assert chosen and len(chosen) == draw.pool  # a draw larger than the pool takes the whole pool
    held_clusters = {cid for name, info in split.partitions.items() if name != "train" for cid in info.clusters}
    held_gt = {g for p in held.values() for g in p.gt_ids()}
    train_ids = {p.problem_id for p in bank_world.train}
    for p in draw.problems:
        assert bank.partition_of(p.problem_id) in ("open", "retired")
        assert split.partition(p.problem_id) in (None, "train")
        assert p.problem_id not in train_ids and p.problem_id not in held
        assert bank.cluster_of(p.problem_id) not in held_clusters
        assert not held_gt.intersection(p.gt_ids())
    # every bank problem is either in the pool or refused for a reason, and each rule refused something here
    assert draw.pool + sum(draw.refused.values()) == len(bank.all_problems())
    assert {"bank_partition", "train_problem", "held_out_problem"} <= set(draw.refused)
    assert "whole_clusters" in draw.checks and "fresh_disjoint" in draw.checks
    # the hidden partitions are drawn only when asked for, and still never a held-out problem
    hidden = _draw(bank_world, 10_000, partitions=("held_out", "reserve"))
    assert hidden.problems and all(bank.partition_of(p.problem_id) in ("held_out", "reserve")
                                   and p.problem_id not in held for p in hidden.problems)
    with pytest.raises(ConfigError, match="static"):
        _draw(bank_world, 3, partitions=("open", "static"))


def test_bank_problems_stay_out_of_a_validation_partition(bank_world: BankWorld, tmp_path: Path) -> None:
    from shoparena.corpus.build import CorpusConfig, build_corpus
    from shoparena.corpus.split import SplitConfig
    from shoparena.tasks.banks import BankSet

    if "validation_fraction" not in SplitConfig.model_fields:
        pytest.skip("this build's corpus split has no validation partition")
    split_cfg = SplitConfig(seed=0, eval_fraction=0.2, validation_fraction=0.3)
    build_corpus(tmp_path / "corpus", store=bank_world.store_url, catalog=bank_world.catalog,
                 banks=bank_world.banks, config=CorpusConfig(split=split_cfg))
    split, held = held_out_problems(tmp_path / "corpus")
    validation = set(split.partitions["validation"].problems)
    assert validation and validation <= set(held)
    bank = BankSet.load(bank_world.banks)
    draw = draw_bank_problems(bank, split, held, set(), 10_000, 0)
    assert draw.problems and not {p.problem_id for p in draw.problems} & validation
    open_validation = {pid for pid in validation if bank.partition_of(pid) in ("open", "retired")}
    assert open_validation and open_validation <= set(draw.refused_ids["held_out_problem"])


def test_bank_draw_is_seeded_and_stratified(bank_world: BankWorld) -> None:
    a, b = _draw(bank_world, 8, seed=1), _draw(bank_world, 8, seed=1)
    assert [p.problem_id for p in a.problems] == [p.problem_id for p in b.problems]
    others = {tuple(p.problem_id for p in _draw(bank_world, 8, seed=s).problems) for s in (2, 3, 4)}
    assert any(set(o) != {p.problem_id for p in a.problems} for o in others)
    counts = Counter(p.bucket for p in a.problems)
    assert sum(counts.values()) == 8
    for bucket, size in a.pool_by_bucket.items():  # each bucket's share of the pool, to within one problem
        assert abs(counts.get(bucket, 0) - 8 * size / a.pool) < 1
    assert a.summary()["by_bucket"] == dict(sorted(counts.items()))
    assert _draw(bank_world, 0).problems == []


def test_twins_of_a_held_out_problem_are_refused(bank_world: BankWorld) -> None:
    from shoparena.tasks.banks import BankSet

    split, held = held_out_problems(bank_world.file_corpus, banks=bank_world.twin_banks)
    bank = BankSet.load(bank_world.twin_banks)
    draw = draw_bank_problems(bank, split, held, set(), 10_000, 0)
    chosen = {p.problem_id for p in draw.problems}
    assert chosen and not chosen & set(bank_world.twins) and not chosen & set(held)
    # the lax bank clustering links none of the twins to the eval problem except by its query; the GT check and
    # the fresh clustering (the split's config) catch the others
    assert "twin:gt" in draw.refused_ids["held_out_gt_product"]
    assert "twin:query" in draw.refused_ids["held_out_cluster"]
    assert "twin:given" in draw.refused_ids["fresh_cluster"]
    twin = bank.problem("twin:gt")
    with pytest.raises(LeakError) as err:
        prove_fresh([*draw.problems[:2], twin], held, split)
    assert any("gt_product_id" in v for v in err.value.violations)
    with pytest.raises(LeakError):
        prove_fresh([next(iter(held.values()))], held, split)
    given = bank.problem("twin:given")
    with pytest.raises(LeakError) as err:
        prove_fresh([given], held, split)
    assert any(v.startswith("fresh clustering") for v in err.value.violations)


def test_find_banks(bank_world: BankWorld, tiny_model: Path, tmp_path: Path) -> None:
    assert find_banks(TeacherConfig(bank_problems=2), bank_world.corpus).resolve() == bank_world.banks.resolve()
    with pytest.raises(ConfigError, match="not built from a bank set") as err:
        find_banks(TeacherConfig(bank_problems=2), bank_world.file_corpus)
    assert "teacher.banks" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="no saved bank set"):
        find_banks(TeacherConfig(bank_problems=2, banks=str(tmp_path)), bank_world.corpus)
    given = TeacherConfig(bank_problems=2, banks=str(bank_world.twin_banks))
    assert find_banks(given, bank_world.file_corpus) == bank_world.twin_banks
    # the stage refuses before it samples anything
    with pytest.raises(ConfigError, match="not built from a bank set"):
        train_teacher(tiny_model, bank_world.train, [], TeacherConfig(bank_problems=2, **TRAIN), tmp_path / "t",
                      catalog_dir=bank_world.catalog, corpus_dir=bank_world.file_corpus)
    assert not (tmp_path / "t" / "samples").exists()
    with pytest.raises(ConfigError, match="no corpus"):
        train_teacher(tiny_model, bank_world.train, [], TeacherConfig(bank_problems=2, **TRAIN), tmp_path / "u",
                      catalog_dir=bank_world.catalog)


def test_subsample_rows_is_seeded_nested_and_respected() -> None:
    rows = [{"id": i} for i in range(40)]
    five = subsample_rows(rows, 5, seed=3)
    assert len(five) == 5 and five == subsample_rows(rows, 5, seed=3)
    assert [r["id"] for r in five] == sorted(r["id"] for r in five)  # input order kept
    assert five != subsample_rows(rows, 5, seed=4)
    twenty = subsample_rows(rows, 20, seed=3)
    assert all(r in twenty for r in five)  # a smaller budget's rows are part of a larger one's
    assert subsample_rows(rows, None, 3) == rows and subsample_rows(rows, 99, 3) == rows
    assert subsample_rows(rows, 0, 3) == []


@pytest.mark.parametrize(("section", "needle"), [
    ("bank_problems: -1", "bank_problems"),
    ("max_rows: -5", "max_rows"),
    ("max_rows: '250'", "max_rows"),
    ("bank_partitions: [open, static]", "bank_partitions"),
    ("bank_partitions: []", "bank_partitions"),
    ("bank_partitions: [open, open]", "bank_partitions"),
    ("banks: ''", "banks"),
    ("bank_problem: 3", "bank_problems"),
])
def test_bad_budget_values_are_refused_at_recipe_load(section: str, needle: str) -> None:
    from shoparena.train.recipe import parse_recipe

    with pytest.raises(ConfigError) as err:
        parse_recipe(f"name: t\nteacher:\n  {section}\n")
    assert needle in err.value.message
    ok = parse_recipe("name: t\nteacher:\n  bank_problems: 200\n  max_rows: 0\n  banks: arena/banks\n")
    assert (ok.teacher.bank_problems, ok.teacher.max_rows, ok.teacher.banks) == (200, 0, "arena/banks")
    default = parse_recipe("name: t\n").teacher
    assert (default.bank_problems, default.max_rows, default.bank_partitions) == (0, None, ("open", "retired"))


def _runs(stage: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (stage / "samples" / "runs.jsonl").read_text().splitlines()]


def test_default_rows_unchanged_and_max_rows_above_them_is_the_same_training(
        bank_world: BankWorld, tiny_model: Path, tmp_path: Path) -> None:
    default = train_teacher(tiny_model, bank_world.train, [], TeacherConfig(**TRAIN), tmp_path / "a",
                            catalog_dir=bank_world.catalog, corpus_dir=bank_world.corpus)
    m = default.metrics
    assert not (tmp_path / "a" / "bank_problems.json").exists() and "bank_problems" not in m
    assert m["problems"] == len(bank_world.train)
    assert {r["problem_id"] for r in _runs(tmp_path / "a")} == {p.problem_id for p in bank_world.train}
    assert m["teacher_rows_used"] == m["teacher_rows_available"] == sum(m["rows_by_bucket_upsampled"].values())
    assert m["train_counts"]["rows"] == m["teacher_rows_used"]
    big = train_teacher(tiny_model, bank_world.train, [], TeacherConfig(max_rows=10_000, **TRAIN), tmp_path / "b",
                        catalog_dir=bank_world.catalog, corpus_dir=bank_world.corpus)
    # the budget counts the rows the trainer keeps: a budget above them trains exactly what the default trains
    assert big.metrics["teacher_rows_used"] == big.metrics["train_counts"]["kept"] == m["train_counts"]["kept"]
    assert big.metrics["train_counts"]["rows"] == big.metrics["teacher_rows_used"]
    assert big.metrics["fit_counts"]["rows"] == m["kept"]
    assert big.checkpoint_sha256 == default.checkpoint_sha256  # same rows, same seed: the same weights


def test_max_rows_zero_passes_the_input_checkpoint_on(bank_world: BankWorld, tiny_model: Path,
                                                      tmp_path: Path) -> None:
    from shoparena.train.checkpoint import checkpoint_sha256

    res = train_teacher(tiny_model, bank_world.train, [], TeacherConfig(max_rows=0, bank_problems=5, **TRAIN),
                        tmp_path / "t", catalog_dir=bank_world.catalog, corpus_dir=bank_world.corpus)
    assert res.checkpoint_sha256 == checkpoint_sha256(tiny_model) and res.steps == 0
    stage = json.loads((tmp_path / "t" / "stage.json").read_text())
    assert "passed on unchanged" in stage["metrics"]["note"] and stage["metrics"]["teacher_rows_used"] == 0
    assert not (tmp_path / "t" / "samples").exists()


def test_recipe_run_samples_bank_problems_and_keeps_the_budget(bank_world: BankWorld, tiny_model: Path,
                                                               tmp_path: Path) -> None:
    from shoparena.train.recipe import Recipe, run_recipe

    cfg = TeacherConfig(bank_problems=6, max_rows=4, seed=5, **TRAIN)
    recipe = Recipe(name="budget", base=f"hf:{tiny_model}", stages=("teacher",), teacher=cfg)
    # run_recipe hands the stage no corpus: the stage finds it (and its banks) through the run's manifest
    manifest = run_recipe(recipe, bank_world.corpus, tmp_path / "run", catalog_dir=bank_world.catalog)
    m = manifest.stages[0].metrics
    drawn = json.loads((tmp_path / "run" / "teacher" / "bank_problems.json").read_text())
    assert m["bank_problems"]["drawn"] == len(drawn["problem_ids"]) == 6
    assert drawn["problem_ids"] == [p.problem_id for p in _draw(bank_world, 6, seed=5).problems]
    _, held = held_out_problems(bank_world.corpus)
    assert not set(drawn["problem_ids"]) & set(held)
    sampled = {r["problem_id"] for r in _runs(tmp_path / "run" / "teacher")}
    assert sampled == {p.problem_id for p in bank_world.train} | set(drawn["problem_ids"])
    assert m["problems"] == len(sampled) and m["kept_from_bank_problems"] > 0
    assert m["teacher_rows_available"] > 4 and m["teacher_rows_used"] == 4
    assert m["train_counts"]["rows"] == m["train_counts"]["kept"] == 4 and sum(m["rows_by_bucket_used"].values()) == 4


def test_fresh_problems_script_writes_a_seeded_disjoint_problem_file(bank_world: BankWorld, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.corpus.split import SplitManifest
    from shoparena.tasks.loader import load_problems
    from tests.scripts import load_script

    script = load_script("fresh_problems")
    args = ["--corpus", str(bank_world.corpus), "--catalog", str(bank_world.catalog), "-n", "5", "--seed", "1"]
    assert script.main([*args, "--out", str(tmp_path / "a.jsonl")]) == 0
    assert script.main([*args, "--out", str(tmp_path / "b.jsonl")]) == 0
    a, b = (load_problems(tmp_path / f) for f in ("a.jsonl", "b.jsonl"))
    assert [p.problem_id for p in a] == [p.problem_id for p in b] and 0 < len(a) <= 5  # seeded
    split = SplitManifest.load(bank_world.corpus / "split.json")
    held = {pid for name, info in split.partitions.items() if name != "train" for pid in info.problems}
    train = {p.problem_id for p in bank_world.train}
    assert not ({p.problem_id for p in a} & (held | train))
    capsys.readouterr()
    assert script.main([*args, "--out", str(tmp_path / "a.jsonl")]) == 2  # never overwritten
    assert "error:" in capsys.readouterr().err
    assert script.main(["--corpus", str(tmp_path / "none"), "--catalog", str(bank_world.catalog), "-n", "2",
                        "--out", str(tmp_path / "c.jsonl")]) == 4
