"""The corpus split: whole leak clusters per partition, per-bucket stratification, static suites never touched,
frozen hashed manifests that refuse tampering, determinism, and row routing (``docs/paper.md`` §3 / Appendix A.4)."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.corpus.split import (
    PARTITIONS,
    SplitConfig,
    SplitManifest,
    assign_rows,
    split_problems,
    verify_split,
)
from shoparena.corpus.types import Trajectory
from shoparena.errors import DataError, LeakError, NotFoundError
from shoparena.tasks.clusters import build_clusters
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.types import Problem


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> list[Problem]:
    """60 generated problems: 20 per bucket, 30 generator clusters of two (base + paraphrase)."""
    index = create_catalog(generate_catalog(600, seed=31), tmp_path_factory.mktemp("split") / "cat")
    return generate_problems(index, n=60, seed=7, paraphrases=1)


def _cluster_parts(manifest: SplitManifest) -> dict[str, set[str]]:
    group = manifest.group_of()
    parts: dict[str, set[str]] = defaultdict(set)
    for pid, cid in manifest.clusters.items():
        parts[cid].add(group[pid])
    return parts


def test_world_shape(problems: list[Problem]) -> None:
    clustering = build_clusters(problems)
    sizes = sorted(len(m) for m in clustering.members().values())
    assert len(problems) == 60 and sizes == [2] * 30


@pytest.mark.parametrize("seed", [0, 1, 2, "abc"])
def test_whole_clusters_never_straddle(problems: list[Problem], seed: int | str) -> None:
    m = split_problems(problems, config=SplitConfig(seed=seed, eval_fraction=0.3, never_touch_fraction=0.2))
    assert all(len(parts) == 1 for parts in _cluster_parts(m).values())
    assert sorted(pid for info in m.partitions.values() for pid in info.problems) == sorted(
        p.problem_id for p in problems)
    proof = verify_split(m, problems)
    assert proof.ok and "fresh_whole_clusters" in proof.checks


def test_stratified_per_bucket_by_hand(problems: list[Problem]) -> None:
    # Per bucket: T = 20 problems in 10 clusters of 2. eval target round(0.25·20) = 5 → clusters are taken while
    # fewer than 5 sit in eval: 0 → 2 → 4 → 6, i.e. the first 3 clusters of the hash order (6 problems);
    # never_touch target round(0.1·20) = 2 → the 4th cluster (2 problems); train the other 6 clusters (12).
    seed = 5
    m = split_problems(problems, config=SplitConfig(seed=seed, eval_fraction=0.25, never_touch_fraction=0.1))
    for bucket in ("product", "shop", "voucher"):
        assert m.partitions["eval"].by_bucket[bucket] == 6
        assert m.partitions["never_touch"].by_bucket[bucket] == 2
        assert m.partitions["train"].by_bucket[bucket] == 12
        cids = sorted({m.clusters[p.problem_id] for p in problems if p.bucket == bucket},
                      key=lambda c: hashlib.sha256(f"{seed}:corpus-split:{c}".encode()).hexdigest())
        assert [m.partition_of[c] for c in cids] == ["eval"] * 3 + ["never_touch"] + ["train"] * 6
    assert m.sizes() == {"train": {"problems": 36, "clusters": 18}, "eval": {"problems": 18, "clusters": 9},
                         "never_touch": {"problems": 6, "clusters": 3}}


def test_uneven_clusters_overshoot_by_less_than_one_cluster(problems: list[Problem]) -> None:
    # A given map: product problems in clusters of 4 (two generator clusters each), others as generated.
    base = build_clusters(problems).assignment
    product_cids = sorted({base[p.problem_id] for p in problems if p.bucket == "product"})
    merged = {c: product_cids[i - i % 2] for i, c in enumerate(product_cids)}
    clusters = {pid: merged.get(cid, cid) for pid, cid in base.items()}
    m = split_problems(problems, clusters=clusters, config=SplitConfig(seed=3, eval_fraction=0.3))
    assert m.clusters_source == "given"
    # product: T = 20, target 6; clusters of 4 → 0, 4, 8: eval holds 8 (overshoot 2 < 4); never_touch none.
    assert m.partitions["eval"].by_bucket["product"] == 8
    assert m.partitions["train"].by_bucket["product"] == 12
    assert all(len(parts) == 1 for parts in _cluster_parts(m).values())
    verify_split(m, problems)  # the coarser given map still proves disjoint against a fresh clustering


def test_static_suites_always_never_touch(problems: list[Problem]) -> None:
    # Mark one member of two clusters as a static-suite problem: its whole cluster (the synthetic twin too) goes
    # to never_touch, even with eval_fraction = 1.
    by_cluster = build_clusters(problems).members()
    chosen = [members[0] for members in sorted(by_cluster.values())[:2]]
    marked = [p.model_copy(update={"suite": "problem_suite_v2"}) if p.problem_id in chosen else p for p in problems]
    m = split_problems(marked, config=SplitConfig(eval_fraction=1.0))
    nt = set(m.partitions["never_touch"].problems)
    for members in sorted(by_cluster.values())[:2]:
        assert set(members) <= nt
    assert len(nt) == 4 and m.partitions["never_touch"].static_clusters == 2
    assert not m.partitions["train"].problems
    verify_split(m, marked)
    custom = split_problems(marked, config=SplitConfig(static_suites=("synthetic",)))
    assert len(custom.partitions["never_touch"].problems) == 60


def test_same_seed_same_bytes_other_seed_differs(problems: list[Problem], tmp_path: Path) -> None:
    cfg = SplitConfig(seed=11, eval_fraction=0.2, never_touch_fraction=0.1)
    a = split_problems(problems, config=cfg)
    shuffled = list(problems)
    random.Random(0).shuffle(shuffled)
    b = split_problems(shuffled, config=cfg)
    assert a.to_bytes() == b.to_bytes()
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    c = split_problems(problems, config=cfg.model_copy(update={"seed": 12}))
    assert c.to_bytes() != a.to_bytes()
    assert c.partitions["eval"].problems_hash != a.partitions["eval"].problems_hash
    assert c.config_hash != a.config_hash


def test_save_load_roundtrip_and_hashes(problems: list[Problem], tmp_path: Path) -> None:
    m = split_problems(problems, config=SplitConfig(seed=1, eval_fraction=0.2))
    path = m.save(tmp_path / "split.json")
    loaded = SplitManifest.load(path)
    assert loaded == m and loaded.integrity_errors() == []
    h = loaded.hashes()
    assert set(h["partitions"]) == set(PARTITIONS)
    assert all(len(v) == 64 for v in (h["config_hash"], h["cluster_map_hash"], h["manifest_hash"]))


def _edit(path: Path, fn) -> None:  # type: ignore[no-untyped-def]
    body = orjson.loads(path.read_bytes())
    fn(body)
    path.write_bytes(orjson.dumps(body))


def test_tampered_manifest_file_fails_to_load(problems: list[Problem], tmp_path: Path) -> None:
    m = split_problems(problems, config=SplitConfig(seed=1, eval_fraction=0.2))
    moved = m.partitions["eval"].problems[0]

    def move(body: dict) -> None:  # type: ignore[type-arg]
        body["partitions"]["eval"]["problems"].remove(moved)
        body["partitions"]["train"]["problems"].append(moved)

    def recluster(body: dict) -> None:  # type: ignore[type-arg]
        body["clusters"][moved] = "0" * 64

    for i, edit in enumerate((move, recluster)):
        path = m.save(tmp_path / f"split{i}.json")
        _edit(path, edit)
        with pytest.raises(LeakError) as exc:
            SplitManifest.load(path)
        assert "edited after it was frozen" in str(exc.value) and exc.value.violations


def test_moved_problem_with_resealed_hashes_fails_verification(problems: list[Problem]) -> None:
    m = split_problems(problems, config=SplitConfig(seed=1, eval_fraction=0.2))
    moved = m.partitions["eval"].problems[0]

    def sha(obj: object) -> str:
        return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()

    ev = sorted(set(m.partitions["eval"].problems) - {moved})
    tr = sorted([*m.partitions["train"].problems, moved])
    parts = dict(m.partitions)
    parts["eval"] = parts["eval"].model_copy(update={"problems": ev, "problems_hash": sha(ev)})
    parts["train"] = parts["train"].model_copy(update={"problems": tr, "problems_hash": sha(tr)})
    forged = m.model_copy(update={"partitions": parts}).sealed()
    with pytest.raises(LeakError) as exc:
        verify_split(forged, problems)
    text = "\n".join(exc.value.violations)
    assert "whole_clusters" in text and "disjoint_gt_product_id" in text


def test_split_cluster_map_is_caught_by_fresh_clustering(problems: list[Problem]) -> None:
    # A map that makes every problem its own cluster is internally consistent, yet splits real clusters.
    singletons = {p.problem_id: hashlib.sha256(p.problem_id.encode()).hexdigest() for p in problems}
    m = split_problems(problems, clusters=singletons, config=SplitConfig(seed=2, eval_fraction=0.5))
    assert m.integrity_errors() == []
    with pytest.raises(LeakError) as exc:
        verify_split(m, problems)
    text = "\n".join(exc.value.violations)
    assert "fresh clustering: whole_clusters" in text
    assert "disjoint_gt_product_id" in text  # the stored map's own proof sees shared GT ids too


def test_changed_problems_fail_verification(problems: list[Problem]) -> None:
    m = split_problems(problems, config=SplitConfig(seed=1, eval_fraction=0.2))
    with pytest.raises(LeakError, match=r"does not know|not given"):
        verify_split(m, problems[:-1])
    pid = m.partitions["eval"].problems[0]
    other = [p.model_copy(update={"reward": [p.reward[0].model_copy(update={"product_id": "999"}), *p.reward[1:]]})
             if p.problem_id == pid else p for p in problems]
    with pytest.raises(LeakError, match="gt_ids_hashes"):
        verify_split(m, other)


def test_bad_inputs_are_clear_errors(problems: list[Problem], tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        SplitConfig(eval_fraction=0.8, never_touch_fraction=0.3)
    with pytest.raises(DataError, match="no leak cluster"):
        split_problems(problems, clusters={})
    dup = [problems[0], problems[1].model_copy(update={"problem_id": problems[0].problem_id})]
    with pytest.raises(DataError, match="share the id"):
        split_problems(dup)
    with pytest.raises(NotFoundError):
        SplitManifest.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not a split manifest"):
        SplitManifest.load(tmp_path / "bad.json")


def test_assign_rows_counts_every_left_out_row(problems: list[Problem]) -> None:
    m = split_problems(problems, config=SplitConfig(seed=4, eval_fraction=0.2, never_touch_fraction=0.2))

    def row(i: int, pid: str | None) -> Trajectory:
        return Trajectory(traj_id=f"t{i}", source="rollout", messages=[{"role": "user", "content": "q"}], tools=[],
                          problem_id=pid)

    tr, ev, nt = (m.partitions[n].problems[0] for n in PARTITIONS)
    rows = [row(0, tr), row(1, ev), row(2, nt), row(3, "unknown:problem"), row(4, None), row(5, tr)]
    out = assign_rows(rows, m)
    assert set(out) == {"train", "eval"}
    assert [t.traj_id for t in out["train"]] == ["t0", "t5"] and [t.traj_id for t in out["eval"]] == ["t1"]
    assert dict(out.report.rejected) == {"never_touch": 1, "unknown_problem": 1, "no_problem_id": 1}
    assert out.report.seen == 6 and out.report.kept == 3
    assert {r.traj_id for r in out.rejections} == {"t2", "t3", "t4"}
