"""Problem banks with the leak-cluster guard (docs/arena.md §12; paper Appendix A.4).

Every problem the arena knows sits in exactly one partition, and every leak cluster
(:mod:`shoparena.tasks.clusters`) sits wholly in one partition:

- ``static``: the frozen ORO suites (content-hash pinned) **and every problem clustered with one** (an upstream
  twin of a suite problem is as protected as the suite problem itself); never rotated, never drawn for races,
  never exported for training;
- ``reserve``: never shown to anyone yet; the source of fresh race problems;
- ``held_out``: the hidden race bank; race draws come from here;
- ``open``: train-visible (qualifying draws, the training corpus);
- ``retired``: train-visible, no longer drawn.

Groups: ``open`` + ``retired`` are *visible*, ``reserve`` + ``held_out`` *hidden*, ``static`` *protected*. The
guard's claim — checked by :meth:`BankSet.verify`, which re-clusters from scratch — is that the three groups share
no cluster, problem id, GT product id or canonical query.

Rotation (:meth:`BankSet.rotate`, at most once per ``rotation_days``; a late call does one rotation, not one per
missed period), always whole clusters, in this order:
1. open clusters that have been open ``open_ttl_days`` retire;
2. held-out clusters that were used in a race (:meth:`BankSet.mark_used`), or held out ``held_out_ttl_days``
   when that is set, move to open;
3. the held-out bank is refilled per bucket up to its build-time size from the reserve, in an order seeded by
   ``(seed, day)``. A dry reserve leaves it short (reported); nothing ever moves back from visible to hidden.

Growth (:meth:`BankSet.extend`) re-clusters everything; a cluster that now spans partitions goes wholly to the
first of static, open, retired, held_out, reserve it touches (protection first, then exposure: a hidden problem
linked to a visible one is no longer hidden).

Persistence: ``manifest.json`` (config, cluster config, seed, state, suite pins, partition hashes, file hashes
and a hash of the manifest itself) plus a content-addressed ``problems-<sha>.jsonl``; the manifest is replaced
last and atomically. :meth:`BankSet.load` re-checks every hash and runs :meth:`BankSet.verify`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shoparena._io import atomic_write
from shoparena.clock import Clock
from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.seal import (
    file_errors,
    seal,
    seal_errors,
    sha256_bytes,
    sha256_file,
    write_json,
)
from shoparena.tasks.clusters import ClusterConfig, ClusterReport, build_clusters
from shoparena.tasks.guard import GuardViolation, prove
from shoparena.tasks.loader import load_problems, problem_row
from shoparena.tasks.signatures import canonical_query
from shoparena.tasks.types import BUCKETS, Problem

__all__ = ["GROUPS", "PARTITIONS", "BankConfig", "BankSet", "BankState", "ClusterState", "GuardReport",
           "GuardViolation", "RotationReport", "suite_hash"]

Partition = Literal["static", "reserve", "held_out", "open", "retired"]
PARTITIONS: tuple[str, ...] = ("static", "reserve", "held_out", "open", "retired")
GROUPS: dict[str, str] = {"static": "protected", "reserve": "hidden", "held_out": "hidden", "open": "visible",
                          "retired": "visible"}
_PRECEDENCE: tuple[str, ...] = ("static", "open", "retired", "held_out", "reserve")
FORMAT = "shoparena-banks/1"
DAY_S = 86_400.0


class BankConfig(BaseModel):
    """Partition sizes and the rotation schedule (saved in the manifest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    held_out_fraction: float = 0.2
    """Share of the non-static problems put in the held-out race bank at build (per bucket)."""
    open_fraction: float = 0.3
    """Share of the non-static problems open at build; the rest is the reserve."""
    rotation_days: int = 1
    open_ttl_days: int = 7
    held_out_ttl_days: int | None = None
    """Unused held-out clusters also move to open after this many days; None: only used ones move."""
    cluster: ClusterConfig = ClusterConfig()

    @model_validator(mode="after")
    def _check(self) -> BankConfig:
        if not (0 <= self.held_out_fraction and 0 <= self.open_fraction
                and self.held_out_fraction + self.open_fraction <= 1):
            raise ValueError("held_out_fraction and open_fraction must be ≥ 0 and sum to ≤ 1")
        if self.rotation_days < 1 or self.open_ttl_days < 1 or (self.held_out_ttl_days or 1) < 1:
            raise ValueError("rotation_days and the ttls must be ≥ 1")
        return self


class ClusterState(BaseModel):
    """Where one leak cluster is and since when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: Partition
    bucket: str
    """The members' most common bucket (stratifies draws into the held-out bank)."""
    since_day: int
    used: bool = False
    members: list[str]


class RotationReport(BaseModel):
    """What one :meth:`BankSet.rotate` call did (cluster counts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    day: int
    rotated: bool
    retired: int = 0
    released: int = 0
    """Held-out clusters moved to open."""
    drawn: int = 0
    """Reserve clusters drawn into the held-out bank."""
    held_out_problems: int = 0
    short: int = 0
    """Problems the held-out bank is below its target because the reserve ran dry."""
    reserve_clusters: int = 0


class BankState(BaseModel):
    """Everything that changes over a bank's life; with the problems it fully determines a :class:`BankSet`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int | str
    epoch: float = 0.0
    """Unix time of day 0 (:meth:`BankSet.rotate_at`)."""
    day: int = 0
    """Day of the last rotation (or of the build)."""
    held_out_target: dict[str, int] = Field(default_factory=dict)
    clusters: dict[str, ClusterState]
    history: list[RotationReport] = Field(default_factory=list)


class GuardReport(BaseModel):
    """The verifier's proof (``ok``) or its counter-examples, plus partition sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    checks: list[str]
    violations: list[GuardViolation]
    sizes: dict[str, dict[str, int]]
    """Partition → ``{problems, clusters}``."""
    reclustered: bool
    guard_version: str


def suite_hash(problems: Sequence[Problem]) -> str:
    """sha256 of a suite's problems in order (our JSONL rows with sorted keys): the suite's pin."""
    h = hashlib.sha256()
    for p in problems:
        h.update(orjson.dumps(problem_row(p), option=orjson.OPT_SORT_KEYS))
        h.update(b"\n")
    return h.hexdigest()


def _order(seed: int | str, salt: str, key: str) -> str:
    return hashlib.sha256(f"{seed}:{salt}:{key}".encode()).hexdigest()


def _bucket_of(members: Iterable[Problem]) -> str:
    counts = Counter(p.bucket for p in members)
    return min(counts, key=lambda b: (-counts[b], BUCKETS.index(b)))


def _merge_problems(*groups: Iterable[Problem]) -> dict[str, Problem]:
    out: dict[str, Problem] = {}
    for group in groups:
        for p in group:
            if out.setdefault(p.problem_id, p) != p:
                raise DataError(f"two different problems share the id {p.problem_id!r}",
                                hint="problem ids must be unique across the bank's files")
    return out


class BankSet:
    """The partitions, their rotation, draws, the verifier and persistence (see the module docstring)."""

    def __init__(self, problems: Mapping[str, Problem], *, static: Mapping[str, Sequence[str]],
                 static_hashes: Mapping[str, str], state: BankState, config: BankConfig,
                 cluster_report: ClusterReport | None = None, categories: Mapping[str, str] | None = None) -> None:
        self._problems = dict(problems)
        self._canon = {pid: canonical_query(p.query) for pid, p in self._problems.items()}
        self._categories = dict(sorted((categories or {}).items()))
        self._static = {name: list(ids) for name, ids in static.items()}
        self._static_hashes = dict(static_hashes)
        self.config = config
        self.cluster_report = cluster_report
        self._set_state(state)

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, problems: Iterable[Problem], *, static: Mapping[str, Sequence[Problem]] | None = None,
              seed: int | str = 0, config: BankConfig | None = None, held_out_fraction: float | None = None,
              epoch: float = 0.0, categories: Mapping[str, str] | None = None) -> BankSet:
        """Cluster ``problems`` plus the ``static`` suites (name → problems in suite order), put static clusters
        in ``static`` and split the rest per bucket into held-out / open / reserve by whole clusters in an order
        seeded by ``seed``. ``categories`` (GT product id → category) sharpens constraint signatures."""
        cfg = config or BankConfig()
        if held_out_fraction is not None:
            cfg = BankConfig.model_validate({**cfg.model_dump(), "held_out_fraction": held_out_fraction})
        static = static or {}
        by_id = _merge_problems(problems, *static.values())
        clustering = build_clusters(by_id.values(), config=cfg.cluster, categories=categories)
        static_ids = {p.problem_id for suite in static.values() for p in suite}
        pool: dict[str, list[tuple[str, list[str]]]] = {}
        clusters: dict[str, ClusterState] = {}
        for cid, members in clustering.members().items():
            bucket = _bucket_of(by_id[m] for m in members)
            if static_ids.intersection(members):
                clusters[cid] = ClusterState(partition="static", bucket=bucket, since_day=0, members=members)
            else:
                pool.setdefault(bucket, []).append((cid, members))
        targets: dict[str, int] = {}
        for bucket, items in sorted(pool.items()):
            total = sum(len(m) for _, m in items)
            targets[bucket] = round(cfg.held_out_fraction * total)
            open_target = round(cfg.open_fraction * total)
            filled = {"held_out": 0, "open": 0}
            for cid, members in sorted(items, key=lambda it: _order(seed, "build", it[0])):
                part = ("held_out" if filled["held_out"] < targets[bucket]
                        else "open" if filled["open"] < open_target else "reserve")
                filled[part] = filled.get(part, 0) + len(members)
                clusters[cid] = ClusterState(partition=part, bucket=bucket, since_day=0,  # type: ignore[arg-type]
                                             members=members)
        state = BankState(seed=seed, epoch=epoch, held_out_target=targets, clusters=dict(sorted(clusters.items())))
        gt_ids = {g for p in by_id.values() for g in p.gt_ids()}
        return cls(by_id, static={n: [p.problem_id for p in s] for n, s in static.items()},
                   static_hashes={n: suite_hash(s) for n, s in static.items()}, state=state, config=cfg,
                   cluster_report=clustering.report,
                   categories={g: c for g, c in (categories or {}).items() if g in gt_ids})

    def _set_state(self, state: BankState) -> None:
        self._state = state
        self._cluster_of = {pid: cid for cid, c in state.clusters.items() for pid in c.members}
        self._by_query = {self._canon[pid]: cid for pid, cid in self._cluster_of.items() if pid in self._canon}

    # --------------------------------------------------------------- reading
    @property
    def state(self) -> BankState:
        return self._state

    @property
    def static_hashes(self) -> dict[str, str]:
        return dict(self._static_hashes)

    def problem(self, problem_id: str) -> Problem:
        try:
            return self._problems[problem_id]
        except KeyError:
            raise NotFoundError(f"no problem {problem_id!r} in the bank") from None

    def cluster_of(self, problem_id: str) -> str:
        self.problem(problem_id)
        return self._cluster_of[problem_id]

    def partition_of(self, problem_id: str) -> str:
        return self._state.clusters[self.cluster_of(problem_id)].partition

    def cluster_for_query(self, query: str) -> str | None:
        """The cluster of the bank problem with this canonical query (joining trajectories without an id)."""
        return self._by_query.get(canonical_query(query))

    def problems(self, partition: str) -> list[Problem]:
        """The problems of one partition, sorted by id."""
        if partition not in PARTITIONS:
            raise ConfigError(f"unknown partition {partition!r}", hint=f"use one of {PARTITIONS}")
        return [self._problems[pid] for pid in sorted(pid for c in self._state.clusters.values()
                                                      if c.partition == partition for pid in c.members)]

    def all_problems(self) -> list[Problem]:
        """Every problem of every partition, sorted by id (e.g. for the submission gate's phrase index)."""
        return [self._problems[pid] for pid in sorted(self._problems)]

    def open_problems(self) -> list[Problem]:
        return self.problems("open")

    def held_out_problems(self) -> list[Problem]:
        return self.problems("held_out")

    def retired_problems(self) -> list[Problem]:
        return self.problems("retired")

    def static_suites(self) -> dict[str, list[Problem]]:
        """Suite name → its problems in suite order (without the linked problems of the static partition)."""
        return {name: [self._problems[pid] for pid in ids] for name, ids in self._static.items()}

    def partition_map(self) -> dict[str, str]:
        """Problem id → partition, for every problem."""
        return {pid: self._state.clusters[cid].partition for pid, cid in sorted(self._cluster_of.items())}

    def cluster_map(self) -> dict[str, str]:
        """Problem id → leak-cluster id, for every problem."""
        return dict(sorted(self._cluster_of.items()))

    def sizes(self) -> dict[str, dict[str, int]]:
        out = {p: {"problems": 0, "clusters": 0} for p in PARTITIONS}
        for c in self._state.clusters.values():
            out[c.partition]["problems"] += len(c.members)
            out[c.partition]["clusters"] += 1
        return out

    def draw(self, partition: str, n: int, seed: int | str, *, unit: Literal["problems", "clusters"] = "problems",
             bucket: str | None = None) -> list[Problem]:
        """A deterministic draw of ``n`` problems (or of ``n`` whole clusters, members sorted) from a partition,
        ordered by ``sha256(seed, id)``; fewer when the partition is smaller. Same state and seed ⇒ same draw."""
        if n < 0:
            raise ConfigError(f"cannot draw {n} problems")
        pool = [p for p in self.problems(partition) if bucket is None or p.bucket == bucket]
        if unit == "problems":
            return sorted(pool, key=lambda p: _order(seed, "draw", p.problem_id))[:n]
        cids = sorted({self._cluster_of[p.problem_id] for p in pool}, key=lambda c: _order(seed, "draw", c))[:n]
        return [self._problems[pid] for cid in cids for pid in self._state.clusters[cid].members]

    # -------------------------------------------------------------- changing
    def mark_used(self, problem_ids: Iterable[str]) -> int:
        """Mark the held-out clusters of these problems as used in a race (they move to open at the next
        rotation). Problems in other partitions are ignored; returns how many clusters were newly marked."""
        clusters = dict(self._state.clusters)
        marked = 0
        for pid in problem_ids:
            cid = self.cluster_of(pid)
            c = clusters[cid]
            if c.partition == "held_out" and not c.used:
                clusters[cid] = c.model_copy(update={"used": True})
                marked += 1
        self._set_state(self._state.model_copy(update={"clusters": clusters}))
        return marked

    def rotate_at(self, clock: Clock) -> RotationReport:
        """:meth:`rotate` for the bank day of ``clock.now()`` (days since ``state.epoch``)."""
        return self.rotate(int((clock.now() - self._state.epoch) // DAY_S))

    def rotate(self, day: int) -> RotationReport:
        """One rotation at ``day`` if one is due (``day ≥ state.day + rotation_days``), else a no-op report."""
        st, cfg = self._state, self.config
        if day < st.day + cfg.rotation_days:
            return RotationReport(day=day, rotated=False)
        clusters = dict(st.clusters)
        retired = released = drawn = 0
        for cid, c in st.clusters.items():
            if c.partition == "open" and day - c.since_day >= cfg.open_ttl_days:
                clusters[cid] = c.model_copy(update={"partition": "retired", "since_day": day})
                retired += 1
            elif c.partition == "held_out" and (c.used or (cfg.held_out_ttl_days is not None
                                                           and day - c.since_day >= cfg.held_out_ttl_days)):
                clusters[cid] = c.model_copy(update={"partition": "open", "since_day": day, "used": False})
                released += 1
        short = 0
        for bucket, target in sorted(st.held_out_target.items()):
            have = sum(len(c.members) for c in clusters.values() if c.partition == "held_out" and c.bucket == bucket)
            reserve = sorted((cid for cid, c in clusters.items() if c.partition == "reserve" and c.bucket == bucket),
                             key=lambda cid: _order(st.seed, f"rotate:{day}", cid))
            for cid in reserve:
                if have >= target:
                    break
                clusters[cid] = clusters[cid].model_copy(update={"partition": "held_out", "since_day": day})
                have += len(clusters[cid].members)
                drawn += 1
            short += max(0, target - have)
        report = RotationReport(
            day=day, rotated=True, retired=retired, released=released, drawn=drawn, short=short,
            held_out_problems=sum(len(c.members) for c in clusters.values() if c.partition == "held_out"),
            reserve_clusters=sum(1 for c in clusters.values() if c.partition == "reserve"),
        )
        self._set_state(st.model_copy(update={"day": day, "clusters": clusters, "history": [*st.history, report]}))
        return report

    def extend(self, problems: Iterable[Problem], *, day: int | None = None,
               categories: Mapping[str, str] | None = None) -> dict[str, int]:
        """Add problems (fresh ones go to the reserve) and re-cluster; a cluster that now spans partitions goes
        wholly to the first partition of static, open, retired, held_out, reserve that it touches. Returns
        counts: ``added``, ``exposed`` (hidden → visible), ``retracted`` (visible → static), ``clusters``."""
        day = self._state.day if day is None else day
        by_id = _merge_problems(self._problems.values(), problems)
        cats = {**self._categories, **(categories or {})}
        clustering = build_clusters(by_id.values(), config=self.config.cluster, categories=cats)
        old = self.partition_map()
        counts = Counter(added=len(by_id) - len(self._problems))
        clusters: dict[str, ClusterState] = {}
        for cid, members in clustering.members().items():
            was = {self._cluster_of[m]: self._state.clusters[self._cluster_of[m]] for m in members if m in old}
            part = next((p for p in _PRECEDENCE if any(c.partition == p for c in was.values())), "reserve")
            same = [c for c in was.values() if c.partition == part]
            for m in members:
                if m in old and old[m] != part:
                    counts["exposed"] += GROUPS[old[m]] == "hidden" and GROUPS[part] == "visible"
                    counts["retracted"] += GROUPS[old[m]] == "visible" and part == "static"
            clusters[cid] = ClusterState(
                partition=part, bucket=_bucket_of(by_id[m] for m in members),  # type: ignore[arg-type]
                since_day=max((c.since_day for c in same), default=day),
                used=any(c.used for c in same), members=members)
        counts["clusters"] = len(clusters)
        targets = dict(self._state.held_out_target)
        pool = Counter(c.bucket for c in clusters.values() if c.partition != "static" for _ in c.members)
        for bucket, n in pool.items():  # a bucket first seen now gets a held-out target like the build's
            targets.setdefault(bucket, round(self.config.held_out_fraction * n))
        gt_ids = {g for p in by_id.values() for g in p.gt_ids()}
        self._categories = dict(sorted((k, v) for k, v in cats.items() if k in gt_ids))
        self._problems = by_id
        self._canon = {pid: clustering.canonical[pid] for pid in by_id}
        self.cluster_report = clustering.report
        self._set_state(self._state.model_copy(update={"clusters": dict(sorted(clusters.items())),
                                                       "held_out_target": dict(sorted(targets.items()))}))
        return dict(counts)

    # -------------------------------------------------------------- verifying
    def verify(self, *, recluster: bool = True) -> GuardReport:
        """Prove the guard: every problem in exactly one partition; whole clusters — re-clustered from scratch
        unless ``recluster=False``, so a tampered cluster map cannot hide a leak; visible / hidden / protected
        disjoint in cluster ids, problem ids, GT product ids and canonical queries; suites matching their pins."""
        out: list[GuardViolation] = []
        st = self._state
        placed = Counter(pid for c in st.clusters.values() for pid in c.members)
        twice = sorted(pid for pid, n in placed.items() if n > 1)
        if twice:
            out.append(GuardViolation(check="one_partition", detail=f"{len(twice)} placed twice: {twice[:5]}"))
        part = self.partition_map()
        out += prove(self._problems, {pid: GROUPS[p] for pid, p in part.items()}, self.cluster_map(),
                     recluster=self.config.cluster if recluster else None, categories=self._categories)
        for name, ids in self._static.items():
            missing = [pid for pid in ids if pid not in self._problems]
            if missing:
                out.append(GuardViolation(check="static_pinned", detail=f"suite {name}: missing {missing[:5]}"))
                continue
            if suite_hash([self._problems[pid] for pid in ids]) != self._static_hashes.get(name):
                out.append(GuardViolation(check="static_pinned", detail=f"suite {name}: content hash changed"))
            moved = [pid for pid in ids if part.get(pid) != "static"]
            if moved:
                out.append(GuardViolation(check="static_pinned", detail=f"suite {name}: not static: {moved[:5]}"))
        checks = ["one_partition", *(["cluster_ids"] if recluster else []), "whole_clusters", "disjoint",
                  "static_pinned"]
        return GuardReport(ok=not out, checks=checks, violations=out, sizes=self.sizes(), reclustered=recluster,
                           guard_version=self.config.cluster.version)

    def stats(self) -> dict[str, object]:
        """Sizes per partition and bucket, the rotation state, the suite pins and the cluster-size report."""
        by_bucket: dict[str, Counter[str]] = {p: Counter() for p in PARTITIONS}
        for c in self._state.clusters.values():
            by_bucket[c.partition].update(self._problems[m].bucket for m in c.members if m in self._problems)
        report = self.cluster_report
        return {
            "problems": len(self._problems), "sizes": self.sizes(),
            "buckets": {p: dict(sorted(c.items())) for p, c in by_bucket.items()},
            "day": self._state.day, "rotations": sum(r.rotated for r in self._state.history),
            "held_out_target": self._state.held_out_target,
            "static_suites": {n: {"problems": len(ids), "sha256": self._static_hashes[n]}
                              for n, ids in self._static.items()},
            "clusters": report.model_dump(mode="json", exclude={"config"}) if report else None,
            "config": self.config.model_dump(mode="json"),
        }

    # ------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> Path:
        """Write ``problems-<sha>.jsonl`` then, atomically, ``manifest.json``; returns the manifest path."""
        d = Path(directory)
        rows = b"".join(orjson.dumps(problem_row(self._problems[pid])) + b"\n" for pid in sorted(self._problems))
        digest = sha256_bytes(rows)
        name = f"problems-{digest[:16]}.jsonl"
        with atomic_write(d / name, "wb") as fh:
            fh.write(rows)
        part = self.partition_map()
        body = {
            "format": FORMAT, "config": self.config.model_dump(mode="json"),
            "state": self._state.model_dump(mode="json"),
            "static": {n: {"sha256": self._static_hashes[n], "problem_ids": ids} for n, ids in self._static.items()},
            "categories": self._categories,
            "partitions": {p: _ids_hash(pid for pid, q in part.items() if q == p) for p in PARTITIONS},
            "files": {"problems": {"name": name, "sha256": digest, "rows": len(self._problems)}},
            "cluster_report": self.cluster_report.model_dump(mode="json") if self.cluster_report else None,
        }
        write_json(d / "manifest.json", seal(body, "manifest_sha256"))
        for old in d.glob("problems-*.jsonl"):
            if old.name != name:
                old.unlink(missing_ok=True)
        return d / "manifest.json"

    @classmethod
    def load(cls, directory: str | Path, *, verify: bool = True, recluster: bool = True) -> BankSet:
        """Read a saved bank; any hash mismatch (manifest, problems file, partitions, suite pins) or, with
        ``verify``, any guard violation raises :class:`DataError`."""
        d = Path(directory)
        path = d / "manifest.json"
        if not path.is_file():
            raise NotFoundError(f"no bank manifest at {path}", hint="build one with `shoparena arena banks build`")
        try:
            manifest = orjson.loads(path.read_bytes())
            if not isinstance(manifest, dict):
                raise TypeError(f"the manifest is a JSON {type(manifest).__name__}, not an object")
            body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
            if manifest.get("format") != FORMAT:
                raise DataError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}",
                                hint="pass a bank set written by `shoparena arena banks build`")
            if seal_errors(manifest, "manifest_sha256"):
                raise DataError(f"{path}: manifest hash mismatch (edited after it was written)", hint=_EDITED)
            info = body["files"]["problems"]
            if not isinstance(info["name"], str) or Path(info["name"]).name != info["name"]:
                raise ValueError(f"problems file name {info['name']!r} is not a plain file name")
            actual = {info["name"]: sha256_file(d / info["name"])} if (d / info["name"]).is_file() else {}
            mismatch = file_errors({info["name"]: info["sha256"]}, actual)
            if mismatch:
                raise DataError(f"{d}: content hash mismatch (problems changed after the save): {mismatch[0]}",
                                hint=_EDITED)
            problems = {p.problem_id: p for p in load_problems(d / info["name"])}
            banks = cls(problems, static={n: s["problem_ids"] for n, s in body["static"].items()},
                        static_hashes={n: s["sha256"] for n, s in body["static"].items()},
                        state=BankState.model_validate(body["state"]), config=BankConfig.model_validate(body["config"]),
                        cluster_report=ClusterReport.model_validate(body["cluster_report"])
                        if body.get("cluster_report") else None, categories=body.get("categories") or {})
        except (KeyError, TypeError, ValueError, OSError) as exc:
            if isinstance(exc, DataError):
                raise
            raise DataError(f"{path}: unreadable bank ({type(exc).__name__}: {exc})",
                            hint="rebuild the bank; never edit its files by hand") from None
        part = banks.partition_map()
        for p in PARTITIONS:
            if _ids_hash(pid for pid, q in part.items() if q == p) != body["partitions"].get(p):
                raise DataError(f"{path}: partition {p} does not match its recorded hash", hint=_EDITED)
        if verify:
            report = banks.verify(recluster=recluster)
            if not report.ok:
                raise DataError(f"{path}: the leak guard fails: " + "; ".join(v.detail for v in report.violations),
                                hint="rebuild the bank set (`shoparena arena banks build`); never edit its files")
        return banks


_EDITED = "a bank set is sealed: rebuild it (`shoparena arena banks build`) or restore it from a copy; " \
    "`shoparena arena banks verify DIR` names every mismatch"


def _ids_hash(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()
