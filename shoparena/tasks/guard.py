"""Disjointness proofs for leak-guarded splits (docs/arena.md §12 and §15; paper Appendix A.4).

Shared by the arena's banks (visible / hidden / protected) and the corpus split (train / eval / never-touch):
given named groups of problems and a problem → leak-cluster map, :func:`check_disjoint` lists every pair of
groups that shares a problem id, a cluster id, a GT product id or a canonical query, and :func:`check_whole`
lists every cluster whose members sit in more than one group; :func:`prove` runs both after an optional fresh
re-clustering, so a tampered or stale cluster map cannot hide a leak. An empty list is the proof.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations

from pydantic import BaseModel, ConfigDict

from shoparena.tasks.clusters import ClusterConfig, build_clusters
from shoparena.tasks.signatures import canonical_query
from shoparena.tasks.types import Problem

__all__ = ["GuardViolation", "check_disjoint", "check_whole", "prove"]

_EXAMPLES = 5


class GuardViolation(BaseModel):
    """One counter-example class: which check failed and a readable detail with up to five examples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    check: str
    detail: str


def _examples(items: Iterable[str]) -> str:
    items = sorted(items)
    more = f" (+{len(items) - _EXAMPLES} more)" if len(items) > _EXAMPLES else ""
    return ", ".join(items[:_EXAMPLES]) + more


def check_disjoint(groups: Mapping[str, Sequence[Problem]], clusters: Mapping[str, str]) -> list[GuardViolation]:
    """Violations for every pair of ``groups`` sharing problem ids, clusters (``clusters`` maps problem id →
    cluster id; a problem it lacks is a violation too), GT product ids or canonical queries."""
    out: list[GuardViolation] = []
    missing = sorted(p.problem_id for ps in groups.values() for p in ps if p.problem_id not in clusters)
    if missing:
        out.append(GuardViolation(check="clustered", detail=f"{len(missing)} problems have no cluster: "
                                  f"{_examples(missing)}"))
    keys: dict[str, Callable[[Problem], Iterable[str]]] = {
        "problem_id": lambda p: [p.problem_id],
        "cluster_id": lambda p: [clusters[p.problem_id]] if p.problem_id in clusters else [],
        "gt_product_id": lambda p: p.gt_ids(),
        "canonical_query": lambda p: [canonical_query(p.query)],
    }
    for kind, key in keys.items():
        sets = {name: {k for p in ps for k in key(p)} for name, ps in groups.items()}
        for a, b in combinations(sorted(groups), 2):
            shared = sets[a] & sets[b]
            if shared:
                out.append(GuardViolation(check=f"disjoint_{kind}",
                                          detail=f"{a} and {b} share {len(shared)} {kind}s: {_examples(shared)}"))
    return out


def check_whole(group_of: Mapping[str, str], clusters: Mapping[str, str]) -> list[GuardViolation]:
    """Violations for clusters whose members (``clusters``: problem id → cluster id) are in several groups
    (``group_of``: problem id → group)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for pid, cid in clusters.items():
        if pid in group_of:
            seen[cid].add(group_of[pid])
    split = {cid: parts for cid, parts in seen.items() if len(parts) > 1}
    if not split:
        return []
    detail = _examples(f"{cid[:16]}… in {sorted(parts)}" for cid, parts in split.items())
    return [GuardViolation(check="whole_clusters", detail=f"{len(split)} clusters span partitions: {detail}")]


def prove(problems: Mapping[str, Problem], group_of: Mapping[str, str], clusters: Mapping[str, str], *,
          recluster: ClusterConfig | None = None, categories: Mapping[str, str] | None = None
          ) -> list[GuardViolation]:
    """Every violation of a leak-guarded split. ``group_of`` maps problem id → group (``visible`` / ``hidden`` /
    ``protected`` for banks, ``train`` / ``eval`` / ``never_touch`` for a corpus); ``clusters`` is the stored
    problem → cluster map. With ``recluster`` (a cluster config), the problems are clustered afresh (size
    limit off), problems whose stored cluster differs are reported (``cluster_ids``) and the fresh map is the
    one checked."""
    out: list[GuardViolation] = []
    ungrouped = sorted(set(problems) - set(group_of))
    unknown = sorted(set(group_of) - set(problems))
    for name, ids in (("problems without a group", ungrouped), ("grouped ids that are no problem", unknown)):
        if ids:
            out.append(GuardViolation(check="one_partition", detail=f"{len(ids)} {name}: {_examples(ids)}"))
    if recluster is not None:
        cfg = recluster.model_copy(update={"max_cluster_fraction": 1.0})
        fresh = build_clusters(problems.values(), config=cfg, categories=categories).assignment
        stale = sorted(pid for pid, cid in fresh.items() if clusters.get(pid) != cid)
        if stale:
            out.append(GuardViolation(check="cluster_ids", detail=f"{len(stale)} problems' stored cluster differs "
                                      f"from a fresh clustering: {_examples(stale)}"))
        clusters = fresh
    out += check_whole(group_of, clusters)
    groups: dict[str, list[Problem]] = defaultdict(list)
    for pid in sorted(group_of):
        if pid in problems:
            groups[group_of[pid]].append(problems[pid])
    return out + check_disjoint(groups, clusters)
