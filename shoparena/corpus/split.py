"""The corpus's leak-cluster split: whole leak clusters to ``train`` / ``eval`` / ``never_touch`` (and, when asked,
``validation`` carved from train's clusters), frozen in a hashed manifest, proven disjoint before anything is
exported (``docs/paper.md`` §3, Appendix A.4; ``docs/arena.md`` §12).

Owns :class:`SplitConfig`, :class:`SplitManifest`, :func:`split_problems`, :func:`verify_split` and
:func:`assign_rows`. Clustering is :mod:`shoparena.tasks.clusters`; the disjointness proof is
:func:`shoparena.tasks.guard.prove` — nothing here re-implements either.

Assignment (:func:`split_problems`):

1. every problem gets its leak cluster (the ``clusters`` map given, else :func:`~shoparena.tasks.clusters.build_clusters`
   with ``config.cluster``);
2. a cluster holding a problem of a static suite (``config.static_suites``, matched against ``Problem.suite``) goes
   wholly to ``never_touch`` — the static suites are disjoint from train and eval by construction;
3. the other clusters are stratified by bucket (a cluster's bucket is its members' most common one, ties by
   :data:`~shoparena.tasks.types.BUCKETS` order). Per bucket with ``T`` problems, the clusters are walked in the
   order of ``sha256(f"{seed}:corpus-split:{cluster_id}")``; a cluster goes to ``eval`` while fewer than
   ``round(eval_fraction * T)`` problems sit there, then to ``never_touch`` while fewer than
   ``round(never_touch_fraction * T)`` do, then to ``train``. Whole clusters, so a partition may overshoot its
   target by less than one cluster;
4. with ``validation_fraction`` F > 0, a ``validation`` partition is carved from the **train** clusters only
   (never from eval or never_touch, so those stay exactly what they would be without it): per bucket with ``C``
   train clusters, the first ``round(F * C)`` of them in the order of
   ``sha256(f"{seed}:corpus-validation:{cluster_id}")`` move to ``validation``. When that rounds to no cluster in
   every bucket but train holds two or more clusters, the first train cluster in that order moves; with fewer,
   nothing can be carved without emptying train and :class:`DataError` says so — asking for a validation
   partition never silently yields none. F < 0.5 keeps most of every bucket's train clusters in train.
   F = 0 (the default) writes no ``validation`` partition and no ``validation_fraction`` key: the manifest is
   byte for byte what it was before the partition existed.

The validation partition is for choices made while training (learning rates, row counts, stopping points); eval
and never_touch are reported once per final model (``docs/corpus-design.md``).

The manifest lists every partition's problems and clusters with their hashes (problem ids, cluster ids, GT product
ids), the problem → cluster map and its hash, the config and its hash, and a hash over all of it. Same problems,
clusters and config ⇒ the same manifest bytes. :meth:`SplitManifest.load` re-checks every hash; :func:`verify_split`
re-checks them, runs the guard's proof on the stored cluster map **and** on a fresh clustering, and raises
:class:`~shoparena.errors.LeakError` listing each violation.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from shoparena.corpus.types import Rejection, StageReport, Trajectory
from shoparena.errors import DataError, LeakError
from shoparena.seal import canonical_hash, read_json, seal_errors, to_bytes, write_json
from shoparena.tasks.clusters import GUARD_VERSION, ClusterConfig, build_clusters
from shoparena.tasks.guard import prove
from shoparena.tasks.types import BUCKETS, Problem

__all__ = ["EXPORTABLE", "MAX_VALIDATION_FRACTION", "PARTITIONS", "SPLIT_FORMAT", "VALIDATION", "AssignedRows",
           "PartitionInfo", "SplitConfig", "SplitManifest", "SplitProof", "assign_rows", "fresh_clusters",
           "gt_ids_hash", "split_problems", "verify_split"]

Partition = Literal["train", "eval", "never_touch", "validation"]
#: The partitions every split holds.
PARTITIONS: tuple[str, ...] = ("train", "eval", "never_touch")
#: The partition carved from train's clusters when ``SplitConfig.validation_fraction`` > 0 (absent otherwise).
VALIDATION = "validation"
#: Partitions whose rows may ever be exported (``never_touch`` never is).
EXPORTABLE: tuple[str, ...] = ("train", "eval", VALIDATION)
#: ``validation_fraction`` lies in [0, MAX_VALIDATION_FRACTION).
MAX_VALIDATION_FRACTION = 0.5
SPLIT_FORMAT = "shoparena-corpus-split/1"
ORO_STATIC_SUITES: tuple[str, ...] = ("problem_suite_v1", "problem_suite_v2", "problem_suite_v3")


def _sha(obj: Any) -> str:
    return canonical_hash(obj)


def _order(seed: int | str, cluster_id: str, purpose: str = "corpus-split") -> str:
    return hashlib.sha256(f"{seed}:{purpose}:{cluster_id}".encode()).hexdigest()


class SplitConfig(BaseModel):
    """The split's knobs; saved (and hashed) in the manifest so the split can be re-derived."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int | str = 0
    eval_fraction: float = 0.15
    """Share of each bucket's (non-static) problems put in ``eval``."""
    never_touch_fraction: float = 0.0
    """Share of each bucket's (non-static) problems held back in ``never_touch`` besides the static suites."""
    static_suites: tuple[str, ...] = ORO_STATIC_SUITES
    """``Problem.suite`` names whose clusters always go to ``never_touch``."""
    cluster: ClusterConfig = ClusterConfig()
    """Clustering used when no cluster map is given, and for the fresh re-clustering of :func:`verify_split`."""
    validation_fraction: float = 0.0
    """Share of each bucket's *train* clusters carved into ``validation`` (module docstring, step 4); in
    [0, 0.5). Left out of the serialised config at 0, so a split without validation keeps its bytes and hashes."""

    @model_validator(mode="after")
    def _check(self) -> SplitConfig:
        if not (0 <= self.eval_fraction <= 1 and 0 <= self.never_touch_fraction <= 1
                and self.eval_fraction + self.never_touch_fraction <= 1):
            raise ValueError("eval_fraction and never_touch_fraction must be in [0, 1] and sum to ≤ 1")
        if not 0 <= self.validation_fraction < MAX_VALIDATION_FRACTION:
            raise ValueError(f"validation_fraction must be in [0, {MAX_VALIDATION_FRACTION})")
        return self

    def partitions(self) -> tuple[str, ...]:
        """The partitions a split made with this config holds: train, eval and never_touch, plus validation when
        :attr:`validation_fraction` asks for it."""
        return PARTITIONS + ((VALIDATION,) if self.validation_fraction > 0 else ())

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        body: dict[str, Any] = handler(self)
        if self.validation_fraction == 0:  # the form (and hash) of every split made before validation existed
            body.pop("validation_fraction", None)
        return body

    def config_hash(self) -> str:
        return _sha(self.model_dump(mode="json"))


class PartitionInfo(BaseModel):
    """One partition: its sorted problem ids and cluster ids, per-bucket problem counts, and content hashes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    problems: list[str]
    clusters: list[str]
    by_bucket: dict[str, int]
    static_clusters: int = 0
    """Clusters here because they hold a static-suite problem (``never_touch`` only)."""
    problems_hash: str
    clusters_hash: str
    gt_ids_hash: str
    """sha256 of the sorted GT product ids of the partition's problems."""


def _partition_info(pids: Sequence[str], clusters: Mapping[str, str], problems: Mapping[str, Problem],
                    static_clusters: int) -> PartitionInfo:
    ids = sorted(pids)
    cids = sorted({clusters[p] for p in ids})
    return PartitionInfo(problems=ids, clusters=cids,
                         by_bucket=dict(sorted(Counter(problems[p].bucket for p in ids).items())),
                         static_clusters=static_clusters, problems_hash=_sha(ids), clusters_hash=_sha(cids),
                         gt_ids_hash=_gt_hash(problems[p] for p in ids))


def _gt_hash(problems: Iterable[Problem]) -> str:
    return _sha(sorted({g for p in problems for g in p.gt_ids()}))


def gt_ids_hash(problems: Iterable[Problem]) -> str:
    """The hash a partition freezes of its problems' GT product ids (:attr:`PartitionInfo.gt_ids_hash`): a
    reader checks the problems it found are those the split was built on."""
    return _gt_hash(problems)


class SplitManifest(BaseModel):
    """The frozen split (see the module docstring). Build with :func:`split_problems`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = SPLIT_FORMAT
    guard_version: str = GUARD_VERSION
    config: SplitConfig
    config_hash: str
    clusters_source: Literal["given", "built"]
    clusters: dict[str, str]
    """Problem id → leak-cluster id, sorted by problem id."""
    cluster_map_hash: str
    partition_of: dict[str, Partition]
    """Cluster id → partition, sorted by cluster id."""
    partitions: dict[str, PartitionInfo]
    manifest_hash: str = ""
    """sha256 of everything above (canonical JSON, sorted keys)."""

    # ------------------------------------------------------------------ reading
    def expected_partitions(self) -> tuple[str, ...]:
        """The partitions this split holds (:meth:`SplitConfig.partitions` of its config)."""
        return self.config.partitions()

    def group_of(self) -> dict[str, str]:
        """Problem id → partition."""
        return {pid: name for name, info in self.partitions.items() for pid in info.problems}

    def partition(self, problem_id: str) -> str | None:
        """The partition of ``problem_id``, or None when the manifest does not know it."""
        cid = self.clusters.get(problem_id)
        return None if cid is None else self.partition_of.get(cid)

    def sizes(self) -> dict[str, dict[str, int]]:
        return {name: {"problems": len(i.problems), "clusters": len(i.clusters)} for name, i in self.partitions.items()}

    def hashes(self) -> dict[str, Any]:
        """Every content hash (for an export manifest)."""
        return {"format": self.format, "guard_version": self.guard_version, "config_hash": self.config_hash,
                "cluster_map_hash": self.cluster_map_hash, "manifest_hash": self.manifest_hash,
                "partitions": {name: {"problems": len(i.problems), "clusters": len(i.clusters),
                                      "problems_hash": i.problems_hash, "clusters_hash": i.clusters_hash,
                                      "gt_ids_hash": i.gt_ids_hash, "by_bucket": i.by_bucket}
                               for name, i in self.partitions.items()}}

    # --------------------------------------------------------------- integrity
    def _body(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"manifest_hash"})

    def sealed(self) -> SplitManifest:
        """This manifest with :attr:`manifest_hash` filled (:func:`shoparena.seal.canonical_hash` of the rest)."""
        return self.model_copy(update={"manifest_hash": canonical_hash(self._body())})

    def integrity_errors(self) -> list[str]:
        """Every stored hash or cross-reference that does not match the content (empty: intact)."""
        out: list[str] = []
        if self.format != SPLIT_FORMAT:
            out.append(f"format {self.format!r} is not {SPLIT_FORMAT!r}")
        if self.config.config_hash() != self.config_hash:
            out.append("config_hash does not match the config")
        if _sha(self.clusters) != self.cluster_map_hash:
            out.append("cluster_map_hash does not match the problem → cluster map")
        expected = self.expected_partitions()
        if set(self.partitions) != set(expected):
            out.append(f"partitions are {sorted(self.partitions)}, expected {list(expected)}")
        seen: dict[str, str] = {}
        for name, info in sorted(self.partitions.items()):
            if _sha(info.problems) != info.problems_hash:
                out.append(f"{name}: problems_hash does not match its problem list")
            if _sha(info.clusters) != info.clusters_hash:
                out.append(f"{name}: clusters_hash does not match its cluster list")
            for pid in info.problems:
                if pid in seen:
                    out.append(f"problem {pid} is listed in {seen[pid]} and {name}")
                seen[pid] = name
                cid = self.clusters.get(pid)
                if cid is None:
                    out.append(f"{name}: problem {pid} has no cluster in the cluster map")
                elif self.partition_of.get(cid) != name:
                    out.append(f"{name}: problem {pid} sits in {name} but its cluster {cid[:16]}… is assigned to "
                               f"{self.partition_of.get(cid)}")
            for cid in info.clusters:
                if self.partition_of.get(cid) != name:
                    out.append(f"{name}: cluster {cid[:16]}… is listed here but assigned to "
                               f"{self.partition_of.get(cid)}")
        missing = sorted(set(self.clusters) - set(seen))
        if missing:
            out.append(f"{len(missing)} clustered problems sit in no partition: {', '.join(missing[:5])}")
        out += seal_errors(self.model_dump(mode="json"), "manifest_hash")
        return out

    # ------------------------------------------------------------ persistence
    def to_bytes(self) -> bytes:
        return to_bytes(self.model_dump(mode="json"))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Atomically write the manifest (sorted-key JSON); returns ``path``."""
        errors = self.integrity_errors()
        if errors:
            raise LeakError("refusing to save a split manifest whose hashes do not match its content",
                            hint="build it with split_problems()", violations=errors)
        return write_json(path, self.model_dump(mode="json"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SplitManifest:
        """Read a manifest and re-check every hash: an edited manifest raises :class:`LeakError`."""
        p = Path(path)
        try:
            manifest = cls.model_validate(read_json(p, what="split manifest",
                                                    hint="write one with SplitManifest.save()"))
        except DataError:
            raise DataError(f"{p}: not a split manifest (not readable JSON)",
                            hint="regenerate it with split_problems()") from None
        except ValidationError as exc:
            raise DataError(f"{p}: not a split manifest: {str(exc).splitlines()[0]}",
                            hint="regenerate it with split_problems()") from exc
        errors = manifest.integrity_errors()
        if errors:
            raise LeakError(f"{p}: split manifest was edited after it was frozen ({len(errors)} mismatches): "
                            f"{errors[0]}", hint="re-derive the split instead of editing its manifest",
                            violations=errors)
        return manifest


def _bucket_of(members: Iterable[Problem]) -> str:
    counts = Counter(p.bucket for p in members)
    rank = {b: i for i, b in enumerate(BUCKETS)}
    return min(counts, key=lambda b: (-counts[b], rank.get(b, len(rank)), b))


def _index(problems: Iterable[Problem]) -> dict[str, Problem]:
    out: dict[str, Problem] = {}
    for p in problems:
        if out.setdefault(p.problem_id, p) != p:
            raise DataError(f"two different problems share the id {p.problem_id!r}", hint="problem ids must be unique")
    return out


def split_problems(problems: Iterable[Problem], *, clusters: Mapping[str, str] | None = None,
                   config: SplitConfig | None = None, categories: Mapping[str, str] | None = None) -> SplitManifest:
    """Assign whole leak clusters of ``problems`` to train / eval / never_touch (module docstring) and freeze the
    result. ``clusters`` maps problem id → leak-cluster id (e.g. a bank's); None clusters afresh with
    ``config.cluster`` (``categories``, GT product id → category, sharpens signatures). A given map that misses a
    problem raises :class:`DataError`."""
    cfg = config or SplitConfig()
    by_id = _index(problems)
    if clusters is None:
        assignment = build_clusters(by_id.values(), config=cfg.cluster, categories=categories).assignment
        source: Literal["given", "built"] = "built"
    else:
        missing = sorted(set(by_id) - set(clusters))
        if missing:
            raise DataError(f"{len(missing)} problems have no leak cluster in the given map: "
                            f"{', '.join(missing[:5])}", hint="pass clusters=None to cluster them afresh")
        assignment = {pid: clusters[pid] for pid in by_id}
        source = "given"
    members: dict[str, list[str]] = {}
    for pid in sorted(assignment):
        members.setdefault(assignment[pid], []).append(pid)
    static = set(cfg.static_suites)
    partition_of: dict[str, Partition] = {}
    pool: dict[str, list[str]] = {}
    static_clusters = 0
    for cid, mids in members.items():
        if any(by_id[m].suite in static for m in mids):
            partition_of[cid] = "never_touch"
            static_clusters += 1
        else:
            pool.setdefault(_bucket_of(by_id[m] for m in mids), []).append(cid)
    for _bucket, cids in sorted(pool.items()):
        total = sum(len(members[c]) for c in cids)
        targets = {"eval": round(cfg.eval_fraction * total), "never_touch": round(cfg.never_touch_fraction * total)}
        filled = {"eval": 0, "never_touch": 0}
        for cid in sorted(cids, key=lambda c: (_order(cfg.seed, c), c)):
            part: Partition = ("eval" if filled["eval"] < targets["eval"]
                               else "never_touch" if filled["never_touch"] < targets["never_touch"] else "train")
            if part != "train":
                filled[part] += len(members[cid])
            partition_of[cid] = part
    names = cfg.partitions()
    if VALIDATION in names:
        _carve_validation(cfg, pool, partition_of)
    by_part: dict[str, list[str]] = {name: [] for name in names}
    for cid, mids in members.items():
        by_part[partition_of[cid]].extend(mids)
    assignment = dict(sorted(assignment.items()))
    manifest = SplitManifest(
        config=cfg, config_hash=cfg.config_hash(), clusters_source=source, clusters=assignment,
        cluster_map_hash=_sha(assignment), partition_of=dict(sorted(partition_of.items())),
        partitions={name: _partition_info(by_part[name], assignment, by_id,
                                          static_clusters if name == "never_touch" else 0) for name in names})
    return manifest.sealed()


def _carve_validation(cfg: SplitConfig, pool: Mapping[str, list[str]], partition_of: dict[str, Partition]) -> None:
    """Move ``cfg.validation_fraction`` of each bucket's train clusters to ``validation`` (module docstring, step
    4). ``pool`` holds every non-static cluster by bucket; only those already in ``train`` are candidates."""
    def order(cid: str) -> tuple[str, str]:
        return _order(cfg.seed, cid, "corpus-validation"), cid

    carved = 0
    candidates: list[str] = []
    for _bucket, cids in sorted(pool.items()):
        train = sorted((c for c in cids if partition_of[c] == "train"), key=order)
        candidates += train
        for cid in train[:round(cfg.validation_fraction * len(train))]:
            partition_of[cid] = VALIDATION
            carved += 1
    if not carved:
        if len(candidates) < 2:
            raise DataError(f"validation_fraction {cfg.validation_fraction:g} asks for a validation partition, but "
                            f"the train partition holds {len(candidates)} leak cluster(s): carving one would leave "
                            "train empty", hint="build from more problems, lower --eval-fraction, or drop "
                            "--validation")
        partition_of[min(candidates, key=order)] = VALIDATION


def fresh_clusters(problems: Iterable[Problem], config: ClusterConfig, *, categories: Any = None) -> dict[str, str]:
    """A fresh leak clustering (problem → cluster) under a split's cluster ``config`` with the size limit off: the
    re-clustering the guard proves a split, or any set chosen against one, disjoint on."""
    cfg = config.model_copy(update={"max_cluster_fraction": 1.0})
    return build_clusters(problems, config=cfg, categories=categories).assignment


class SplitProof(BaseModel):
    """What :func:`verify_split` proved: the checks run and the partition sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    checks: list[str]
    sizes: dict[str, dict[str, int]]
    guard_version: str
    manifest_hash: str


_CHECKS = ["manifest_hashes", "same_problems", "gt_ids_hashes", "one_partition", "whole_clusters",
           "disjoint_problem_id", "disjoint_cluster_id", "disjoint_gt_product_id", "disjoint_canonical_query",
           "fresh_whole_clusters", "fresh_disjoint"]


def verify_split(manifest: SplitManifest, problems: Iterable[Problem] | Mapping[str, Problem], *,
                 recluster: bool = True, categories: Mapping[str, str] | None = None) -> SplitProof:
    """Prove ``manifest`` leak-free over ``problems`` (the problems it was built from) or raise
    :class:`LeakError` naming every violation: hash mismatches, problems added / removed / with changed GT ids,
    and every failure of :func:`shoparena.tasks.guard.prove` — problem ids, clusters, GT product ids and canonical
    queries shared between partitions, clusters spanning partitions — on the stored cluster map and, with
    ``recluster``, on a fresh clustering with the manifest's cluster config (so a tampered or stale map cannot
    hide a leak; fresh cluster *ids* may differ from a given map's, only whole-ness and disjointness count)."""
    by_id = dict(problems) if isinstance(problems, Mapping) else _index(problems)
    violations = list(manifest.integrity_errors())
    group_of = manifest.group_of()
    extra, gone = sorted(set(by_id) - set(group_of)), sorted(set(group_of) - set(by_id))
    if extra or gone:
        violations.append(f"same_problems: {len(extra)} problems the manifest does not know ({', '.join(extra[:5])}), "
                          f"{len(gone)} manifest problems not given ({', '.join(gone[:5])})")
    for name, info in manifest.partitions.items():
        if not gone and _gt_hash(by_id[p] for p in info.problems) != info.gt_ids_hash:
            violations.append(f"gt_ids_hashes: {name}'s GT product ids differ from those frozen in the manifest")
    violations += [f"{v.check}: {v.detail}" for v in prove(by_id, group_of, manifest.clusters)]
    if recluster:
        fresh = fresh_clusters(by_id.values(), manifest.config.cluster, categories=categories)
        violations += [f"fresh clustering: {v.check}: {v.detail}" for v in prove(by_id, group_of, fresh)
                       if v.check != "one_partition"]
    if violations:
        raise LeakError(f"the corpus split crosses the leak-cluster guard ({len(violations)} violations): "
                        f"{violations[0]}", hint="re-derive the split with split_problems(); never edit one",
                        violations=violations)
    return SplitProof(ok=True, checks=_CHECKS if recluster else _CHECKS[:-2], sizes=manifest.sizes(),
                      guard_version=manifest.guard_version, manifest_hash=manifest.manifest_hash)


class AssignedRows(dict[str, list[Trajectory]]):
    """``{"train": [...], "eval": [...]}`` (plus ``"validation"`` when the split has it; input order kept) and
    what was left out: :attr:`report` (stage ``split``; reasons ``no_problem_id``, ``unknown_problem``,
    ``never_touch``) and :attr:`rejections`."""

    def __init__(self, partitions: Sequence[str] = ("train", "eval")) -> None:
        super().__init__({name: [] for name in partitions})
        self.report = StageReport(stage="split")
        self.rejections: list[Rejection] = []

    def _reject(self, t: Trajectory, reason: str, message: str) -> None:
        self.report.reject(reason, t.traj_id)
        self.rejections.append(Rejection(stage="split", reason=reason, message=message, where=t.traj_id,
                                         traj_id=t.traj_id))


def assign_rows(rows: Iterable[Trajectory], manifest: SplitManifest) -> AssignedRows:
    """Route each row to its problem's partition. Rows without a problem id or whose problem the manifest does
    not know, and rows of ``never_touch`` problems, are left out — each counted under its reason in
    ``result.report`` and listed in ``result.rejections``, never silently dropped. Rows of ``validation``
    problems go to ``result["validation"]``, never to ``train``."""
    parts = tuple(name for name in EXPORTABLE if name in manifest.partitions)
    out = AssignedRows(parts)
    for t in rows:
        out.report.seen += 1
        if t.problem_id is None:
            out._reject(t, "no_problem_id", "row has no problem id; it cannot be placed in a leak-guarded split")
            continue
        part = manifest.partition(t.problem_id)
        if part is None:
            out._reject(t, "unknown_problem", f"problem {t.problem_id} is not in the split manifest")
        elif part not in EXPORTABLE:
            out._reject(t, "never_touch", f"problem {t.problem_id} is in never_touch; its rows are never exported")
        else:
            out[part].append(t)
            out.report.kept += 1
    out.report.notes = {name: len(out[name]) for name in parts}
    return out
