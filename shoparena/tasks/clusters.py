"""Leak clusters (docs/arena.md §12 design): problems that would leak each other's answer across a split share one
cluster, and splits always move whole clusters.

Two problems are linked — and union-find puts them in one cluster — when any of these holds (the kinds, in the
order they are applied):

1. ``given``: they carry the same non-null ``Problem.cluster_id`` (the generator's paraphrase / reorder /
   substitution clusters stay whole);
2. ``query``: the same :func:`~shoparena.tasks.signatures.canonical_query` (whitespace / case / punctuation
   variants, an ORO suite problem and its upstream twin);
3. ``gt``: a shared ground-truth ``product_id`` (the 31 GT ids upstream reuses across problems);
4. ``signature``: the same *strong* constraint signature (attribute reorders, retailer substitutions);
5. ``title``: the same *weak* signature and GT-title word-set Jaccard ≥ ``title_similarity``, so a weak
   signature such as only ``greater than [1, null]`` never merges unrelated problems by itself;
6. ``paraphrase``: request texts (voucher block removed) whose word-3-gram Jaccard is ≥ ``paraphrase_jaccard``;
   candidates come from MinHash LSH, every candidate is verified exactly.

``cluster_id`` = ``sha256`` (hex) of the lexicographically smallest canonical query among the members: the same
set of problems in any order gives the same ids. Ids are stable under reordering, not under growth: adding a
problem with a smaller key to a cluster renames it. A cluster holding more than ``max_cluster_fraction`` of the
problems, and more than ``min_cluster_limit`` problems (checked from ``min_problems_for_check`` problems on),
raises :class:`~shoparena.errors.DataError` that names it: such a cluster almost always means a broken input (GT
products reused everywhere), never a real paraphrase family or a few of them joined by a genuine link.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shoparena.errors import DataError
from shoparena.tasks.minhash import MinHasher, candidate_pairs, jaccard
from shoparena.tasks.signatures import canonical_query, constraint_signature, gt_title_text, request_text
from shoparena.tasks.types import Problem

__all__ = ["LINK_KINDS", "ClusterConfig", "ClusterInfo", "ClusterReport", "Clustering", "build_clusters",
           "cluster_problems"]

GUARD_VERSION = "leak-guard/1"
LinkKind = Literal["given", "query", "gt", "signature", "title", "paraphrase"]
LINK_KINDS: tuple[str, ...] = ("given", "query", "gt", "signature", "title", "paraphrase")


class ClusterConfig(BaseModel):
    """Thresholds of the guard; saved with every bank and export so a split can be re-derived."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = GUARD_VERSION
    link_given: bool = True
    """Link problems sharing a non-null ``Problem.cluster_id`` (generator clusters)."""
    link_gt: bool = True
    link_signature: bool = True
    min_signature_constraints: int = 2
    """A signature links by itself only when every item has this many informative constraints."""
    title_similarity: float = 0.8
    """Weak signatures also need GT-title word-set Jaccard ≥ this."""
    paraphrase: Literal["minhash", "off"] = "minhash"
    paraphrase_jaccard: float = 0.8
    shingle_words: int = 3
    num_perm: int = 128
    bands: int = 32
    seed: int = 0
    """MinHash permutation seed (fixed: changing it can only change which borderline pairs LSH misses)."""
    max_cluster_fraction: float = 0.01
    min_cluster_limit: int = Field(10, ge=1)
    """The size bound is ``max(max_cluster_fraction × problems, min_cluster_limit)``: a few generator families
    (base + paraphrases, 3 problems by default) joined by a genuine shared signature or GT product are a real
    cluster at any bank size — 1 % of a 540-problem bank (5.4) is less than two such families."""
    min_problems_for_check: int = 500
    """Below this many problems the size check is skipped (1 % of 50 problems is no cluster at all)."""

    @model_validator(mode="after")
    def _consistent(self) -> ClusterConfig:
        if self.num_perm % self.bands:
            raise ValueError(f"num_perm {self.num_perm} is not a multiple of bands {self.bands}")
        if not 0 < self.max_cluster_fraction <= 1:
            raise ValueError("max_cluster_fraction must be in (0, 1]")
        for name in ("title_similarity", "paraphrase_jaccard"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1]")
        return self


class ClusterInfo(BaseModel):
    """One cluster as reported: id, size, buckets and which link kinds built it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_id: str
    size: int
    members: list[str]
    """Up to 20 member problem ids, sorted."""
    buckets: dict[str, int]
    kinds: list[str]


class ClusterReport(BaseModel):
    """What clustering found: size histogram, largest cluster, links by kind, config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    problems: int
    clusters: int
    singletons: int
    sizes: dict[int, int]
    """Cluster size → number of clusters of that size."""
    largest: ClusterInfo | None
    links: dict[str, int]
    """Links found per kind: for key kinds, group size − 1 summed over groups; for similarity kinds, verified
    pairs."""
    merges: dict[str, int]
    """Unions that joined two different clusters, per kind, applied in :data:`LINK_KINDS` order."""
    candidates: dict[str, int]
    """LSH candidate pairs checked per similarity kind."""
    config: ClusterConfig


class Clustering(BaseModel):
    """``assignment`` (problem id → cluster id) and its :class:`ClusterReport`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    assignment: dict[str, str]
    report: ClusterReport
    canonical: dict[str, str] = Field(default_factory=dict, repr=False)
    """Problem id → canonical query (to join trajectories by query text)."""

    def members(self) -> dict[str, list[str]]:
        """Cluster id → sorted member ids."""
        out: dict[str, list[str]] = defaultdict(list)
        for pid in sorted(self.assignment):
            out[self.assignment[pid]].append(pid)
        return dict(out)


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.kinds: list[set[str]] = [set() for _ in range(n)]

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int, kind: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.kinds[ra] |= self.kinds[rb] | {kind}
        self.kinds[rb] = set()
        return True


def _link_groups(uf: _UnionFind, keys: Iterable[tuple[str, int]], kind: str, links: Counter[str],
                 merges: Counter[str]) -> None:
    groups: dict[str, list[int]] = defaultdict(list)
    for key, i in keys:
        groups[key].append(i)
    for key in sorted(groups):
        members = groups[key]
        links[kind] += len(members) - 1
        for j in members[1:]:
            merges[kind] += uf.union(members[0], j, kind)


def _link_similar(uf: _UnionFind, texts: Sequence[str | None], groups: Sequence[str] | None, *, k: int,
                  threshold: float, hasher: MinHasher, bands: int, kind: str, counters: tuple[Counter[str], ...]
                  ) -> None:
    """Link pairs of ``texts`` with word-k-gram Jaccard ≥ threshold (identical texts first, then LSH)."""
    links, merges, cands = counters
    by_text: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, text in enumerate(texts):
        if text:
            by_text[(groups[i] if groups else "", text)].append(i)
    reps = sorted(by_text)
    for key in reps:  # identical texts: Jaccard 1
        members = by_text[key]
        links[kind] += len(members) - 1
        for j in members[1:]:
            merges[kind] += uf.union(members[0], j, kind)
    hashes = [hasher.shingle_hashes(text, k) for _, text in reps]
    sigs = [hasher.signature(h) for h in hashes]
    pairs = candidate_pairs(sigs, bands=bands, groups=[g for g, _ in reps] if groups else None)
    cands[kind] += len(pairs)
    for x, y in pairs:
        if jaccard(hashes[x], hashes[y]) >= threshold:
            links[kind] += 1
            merges[kind] += uf.union(by_text[reps[x]][0], by_text[reps[y]][0], kind)


def build_clusters(problems: Iterable[Problem], *, config: ClusterConfig | None = None,
                   categories: Mapping[str, str] | None = None) -> Clustering:
    """Cluster ``problems`` (see the module docstring). ``categories`` (GT product id → catalog category) adds
    the category to constraint signatures. Raises :class:`DataError` on a repeated problem id or when one
    cluster exceeds the size limit."""
    cfg = config or ClusterConfig()
    by_id: dict[str, Problem] = {}
    for p in problems:
        if p.problem_id in by_id and by_id[p.problem_id] != p:
            raise DataError(f"two different problems share the id {p.problem_id!r}",
                            hint="problem ids must be unique across every file given to the guard")
        by_id[p.problem_id] = p
    ids = sorted(by_id)
    probs = [by_id[i] for i in ids]
    canon = [canonical_query(p.query) for p in probs]
    uf = _UnionFind(len(probs))
    links: Counter[str] = Counter()
    merges: Counter[str] = Counter()
    cands: Counter[str] = Counter()
    if cfg.link_given:
        _link_groups(uf, ((p.cluster_id, i) for i, p in enumerate(probs) if p.cluster_id), "given", links, merges)
    _link_groups(uf, ((c, i) for i, c in enumerate(canon)), "query", links, merges)
    if cfg.link_gt:
        _link_groups(uf, ((g, i) for i, p in enumerate(probs) for g in set(p.gt_ids())), "gt", links, merges)
    hasher = MinHasher(cfg.num_perm, cfg.seed)
    if cfg.link_signature:
        sigs = [constraint_signature(p, categories=categories, min_constraints=cfg.min_signature_constraints)
                for p in probs]
        _link_groups(uf, ((s.key, i) for i, s in enumerate(sigs) if s and s.strong), "signature", links, merges)
        weak = [s is not None and not s.strong for s in sigs]
        titles = [gt_title_text(p) if w else None for p, w in zip(probs, weak, strict=True)]
        _link_similar(uf, titles, [s.key if s else "" for s in sigs], k=1, threshold=cfg.title_similarity,
                      hasher=hasher, bands=cfg.bands, kind="title", counters=(links, merges, cands))
    if cfg.paraphrase == "minhash":
        _link_similar(uf, [request_text(p.query) for p in probs], None, k=cfg.shingle_words,
                      threshold=cfg.paraphrase_jaccard, hasher=hasher, bands=cfg.bands, kind="paraphrase",
                      counters=(links, merges, cands))
    return _finish(ids, probs, canon, uf, cfg, links, merges, cands)


def _finish(ids: list[str], probs: list[Problem], canon: list[str], uf: _UnionFind, cfg: ClusterConfig,
            links: Counter[str], merges: Counter[str], cands: Counter[str]) -> Clustering:
    roots = [uf.find(i) for i in range(len(ids))]
    best: dict[int, str] = {}
    size: Counter[int] = Counter(roots)
    for i, r in enumerate(roots):
        if r not in best or canon[i] < best[r]:
            best[r] = canon[i]
    cid = {r: hashlib.sha256(key.encode("utf-8")).hexdigest() for r, key in best.items()}
    assignment = {ids[i]: cid[r] for i, r in enumerate(roots)}
    largest = None
    if size:
        root = min(size, key=lambda r: (-size[r], cid[r]))
        members = [ids[i] for i, r in enumerate(roots) if r == root]
        largest = ClusterInfo(
            cluster_id=cid[root], size=size[root], members=members[:20],
            buckets=dict(Counter(probs[i].bucket for i, r in enumerate(roots) if r == root)),
            kinds=sorted(uf.kinds[root], key=LINK_KINDS.index),
        )
    report = ClusterReport(
        problems=len(ids), clusters=len(size), singletons=sum(1 for s in size.values() if s == 1),
        sizes=dict(sorted(Counter(size.values()).items())), largest=largest,
        links={k: links[k] for k in LINK_KINDS}, merges={k: merges[k] for k in LINK_KINDS},
        candidates={k: cands[k] for k in ("title", "paraphrase")}, config=cfg,
    )
    limit = max(cfg.max_cluster_fraction * len(ids), cfg.min_cluster_limit)
    if largest is not None and len(ids) >= cfg.min_problems_for_check and largest.size > limit:
        raise DataError(
            f"leak cluster {largest.cluster_id[:16]}… holds {largest.size} of {len(ids)} problems "
            f"({100 * largest.size / len(ids):.2f} %; the bound is the larger of "
            f"{100 * cfg.max_cluster_fraction:g} % and {cfg.min_cluster_limit} problems), linked by "
            f"{', '.join(largest.kinds)}; members include {', '.join(largest.members[:8])}",
            hint="a cluster this large usually means GT products reused across many problems or a weak link; "
            "inspect it, or raise ClusterConfig.max_cluster_fraction if it is genuine",
        )
    return Clustering(assignment=assignment, report=report, canonical=dict(zip(ids, canon, strict=True)))


def cluster_problems(problems: Iterable[Problem], *, config: ClusterConfig | None = None,
                     categories: Mapping[str, str] | None = None) -> dict[str, str]:
    """Problem id → leak-cluster id (see :func:`build_clusters` for the report and the errors)."""
    return dict(build_clusters(problems, config=config, categories=categories).assignment)

