"""Query evaluation over a :class:`SearchIndex`: exact top-k BM25 with MaxScore pruning, filters and the cap.

A query is Anserini's bag of words: one clause per distinct analyzed term, boosted by its count. Scores are
Lucene's (see :mod:`shoparena.catalog.bm25`): per-posting float32 term scores, summed per document in double,
cast to float. Ranking is ``(score desc, product id asc)``.

**MaxScore.** Clauses are processed from the largest score upper bound down (the bound of a clause is its
weight times its largest ``tf·normInverse``, stored per term). Each processed clause scatters its postings into a
dense accumulator and so adds candidates. After each clause the k-th best partial score θ among candidates that
pass the filter is a lower bound of the final k-th score; once the bounds of the clauses still to process sum to
less than θ (with a relative margin of 1e-6 that covers the final float rounding), no document outside the
candidates can reach the top k. Candidates whose partial score plus those bounds stays below θ are dropped too,
and the few survivors get their scores completed by binary search in the remaining (long) posting lists. Results are
therefore exactly those of exhaustive evaluation (a test compares the two), only cheaper when some query terms
are rarer than others.

**Shop filters** are selective: when the shop's documents are few compared with the query's postings, they are
scored directly by binary search in each posting list instead.

**The cap.** Upstream filters only the first ``CAPACITY`` unfiltered hits. Every document ranked above the last
result is a candidate with an exact score, so the rule is applied exactly: count the candidates above the last
result; if that reaches the cap, keep only results ranked within the cap. The shop path compares with the
query's capacity-th unfiltered rank key instead (computed once per query text and cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from shoparena.catalog.index import DocFilter, SearchIndex

__all__ = ["MAX_CLAUSES", "Hits", "TooManyClauses", "score_all", "search"]

#: Lucene's ``IndexSearcher.maxClauseCount``: a query with more distinct terms fails upstream.
MAX_CLAUSES = 1024
_ONE = np.float32(1.0)
_MARGIN = 1.0 + 1e-6
_EMPTY_DOCS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORES = np.zeros(0, dtype=np.float32)


class TooManyClauses(Exception):
    """More than :data:`MAX_CLAUSES` distinct query terms (Lucene's ``TooManyClauses``)."""


@dataclass(frozen=True)
class Hits:
    """Ranked documents (doc numbers) and their Lucene scores."""

    docs: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.docs)


@dataclass(frozen=True)
class _Clause:
    start: int
    end: int
    weight: np.float32
    bound: float

    def scores(self, index: SearchIndex, sl: slice | np.ndarray | None = None) -> np.ndarray:
        x = index.post_x[self.start:self.end] if sl is None else index.post_x[self.start:self.end][sl]
        return self.weight - self.weight / (_ONE + x)


def _clauses(index: SearchIndex, terms: Sequence[str]) -> list[_Clause]:
    boosts: dict[str, int] = {}
    for t in terms:
        boosts[t] = boosts.get(t, 0) + 1
    if len(boosts) > MAX_CLAUSES:
        raise TooManyClauses(f"{len(boosts)} distinct query terms (max {MAX_CLAUSES})")
    out = []
    for term, boost in boosts.items():
        tid = index.term_id(term)
        if tid < 0:
            continue
        w = np.float32(np.float32(boost) * index.idf[tid])
        bound = float(w - w / (_ONE + index.term_max_x[tid]))
        out.append(_Clause(int(index.term_offsets[tid]), int(index.term_offsets[tid + 1]), w, bound))
    return out


def score_all(index: SearchIndex, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every document matching any of ``terms`` and its float32 score (exhaustive; no particular order)."""
    clauses = _clauses(index, terms)
    if not clauses:
        return _EMPTY_DOCS, _EMPTY_SCORES
    acc = index.accumulator()
    chunks = []
    for cl in clauses:
        docs = index.post_docs[cl.start:cl.end]
        prev = acc[docs]
        fresh = docs[prev == 0.0]
        if len(fresh):
            chunks.append(fresh)
        acc[docs] = prev + cl.scores(index)
    cands = np.concatenate(chunks)
    scores = acc[cands].astype(np.float32)
    acc[cands] = 0.0
    return cands, scores


def _kth_largest(values: np.ndarray, k: int) -> float:
    return float(np.partition(values, len(values) - k)[len(values) - k])


def search(index: SearchIndex, terms: Sequence[str], *, k: int = 50, flt: DocFilter | None = None,
           capacity: int | None = None, prune: bool = True) -> Hits:
    """The top ``k`` documents for analyzed ``terms`` passing ``flt`` (see the module docstring)."""
    clauses = _clauses(index, terms)
    active = flt is not None and flt.active()
    if not clauses or (active and flt.shop == -1):  # type: ignore[union-attr]
        return Hits(_EMPTY_DOCS, _EMPTY_SCORES)
    if active and prune and flt.shop is not None:  # type: ignore[union-attr]
        members = index.shop_members(flt.shop)  # type: ignore[union-attr]
        total_df = sum(c.end - c.start for c in clauses)
        if len(members) * len(clauses) * 4 < total_df:  # scoring the shop's own documents is cheaper
            return _search_members(index, terms, clauses, members, k, flt, capacity, total_df)  # type: ignore[arg-type]
    clauses.sort(key=lambda c: -c.bound)
    tails = [*np.cumsum([c.bound for c in reversed(clauses)])[::-1].tolist(), 0.0]
    acc = index.accumulator()
    chunks: list[np.ndarray] = []
    done = 0
    theta = 0.0
    # Phase 1: scatter clauses (largest bound first) into the accumulator until the rest cannot add a
    # document to the top k.
    for j, cl in enumerate(clauses):
        docs = index.post_docs[cl.start:cl.end]
        if j == 0:
            chunks.append(docs)
            partial = cl.scores(index)
            acc[docs] = partial
        else:
            prev = np.take(acc, docs)
            fresh = docs[prev == 0.0]
            if len(fresh):
                chunks.append(fresh)
            acc[docs] = prev + cl.scores(index)
        done = j + 1
        if prune and done < len(clauses):
            if j > 0:
                if len(chunks) > 1:
                    chunks = [np.concatenate(chunks)]
                partial = np.take(acc, chunks[0])
            if active:
                partial = partial[index.filter_mask(chunks[0], flt)]  # type: ignore[arg-type]
            strong = partial[partial > tails[done] * _MARGIN]  # only these can make theta beat the tail
            if len(strong) >= k:
                theta = _kth_largest(strong, k)
                break
    cands = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    partial = np.take(acc, cands)
    acc[cands] = 0.0
    passing = index.filter_mask(cands, flt) if active else None  # type: ignore[arg-type]
    # Phase 2: the remaining (long, low-bound) clauses only complete candidates' scores. Before each, drop the
    # candidates that cannot reach theta even with every clause left; after each, raise theta. Candidates are
    # sorted first: binary searches with increasing needles are several times faster.
    if done < len(clauses):
        keep = (partial + tails[done]) * _MARGIN >= theta
        order = np.flatnonzero(keep)
        order = order[np.argsort(cands[order], kind="stable")]
        cands, partial = cands[order], partial[order]
        passing = passing[order] if passing is not None else None
    for i in range(done, len(clauses)):
        keep = (partial + tails[i]) * _MARGIN >= theta
        if not keep.all():
            cands, partial = cands[keep], partial[keep]
            passing = passing[keep] if passing is not None else None
        cl = clauses[i]
        docs = index.post_docs[cl.start:cl.end]
        if len(docs) < 8 * len(cands):  # walk the list through a dense doc -> candidate slot map
            slot = index.slots()
            slot[cands] = np.arange(1, len(cands) + 1, dtype=np.int32)
            where = np.take(slot, docs)
            slot[cands] = 0
            found = np.flatnonzero(where)
            partial[where[found] - 1] += cl.scores(index, found)
        else:  # binary-search the candidates in the list
            pos = np.minimum(np.searchsorted(docs, cands), len(docs) - 1)
            hit = np.take(docs, pos) == cands
            partial[hit] += cl.scores(index, pos[hit])
        scored = partial if passing is None else partial[passing]
        strong = scored[scored > theta]
        if len(strong) >= k:
            theta = _kth_largest(strong, k)
    all_scores = partial.astype(np.float32)
    docs, scores = cands, all_scores
    if passing is not None:
        docs, scores = cands[passing], all_scores[passing]
    top = _top(index, docs, scores, k)
    if active and capacity is not None and len(cands) > capacity and len(top):
        top = _apply_capacity(index, cands, all_scores, docs[top], scores[top], capacity, top)
    return Hits(docs[top].astype(np.int64), scores[top])


def _search_members(index: SearchIndex, terms: Sequence[str], clauses: list[_Clause], members: np.ndarray, k: int,
                    flt: DocFilter, capacity: int | None, total_df: int) -> Hits:
    """Shop-filtered search: score the shop's documents directly (binary search in each posting list), then
    apply the cap with the query's cached capacity-th unfiltered rank key."""
    cands = members[index.filter_mask(members, flt)]
    partial = np.zeros(len(cands), dtype=np.float64)
    matched = np.zeros(len(cands), dtype=bool)
    for cl in clauses:
        docs = index.post_docs[cl.start:cl.end]
        pos = np.minimum(np.searchsorted(docs, cands), len(docs) - 1)
        hit = np.take(docs, pos) == cands
        partial[hit] += cl.scores(index, pos[hit])
        matched |= hit
    docs, scores = cands[matched], partial[matched].astype(np.float32)
    top = _top(index, docs, scores, k)
    if capacity is not None and total_df > capacity and len(top) and _may_pass_cap(clauses, scores[top[-1]], capacity):
        cut = index.capacity_key(tuple(sorted(terms)), capacity)
        if cut:
            top = top[index.rank_keys(docs[top], scores[top]) >= np.uint64(cut)]
    return Hits(docs[top].astype(np.int64), scores[top])


def _may_pass_cap(clauses: list[_Clause], last: float, capacity: int) -> bool:
    """Whether more than ``capacity`` documents could score at least ``last``. A document that does must hold one
    of the clauses whose bounds, summed with all weaker clauses, still reach ``last``; the posting lists of those
    clauses bound the count."""
    ordered = sorted(clauses, key=lambda c: -c.bound)
    tail = sum(c.bound for c in ordered)
    count = 0
    for cl in ordered:
        if tail * _MARGIN < last:
            break
        count += cl.end - cl.start
        tail -= cl.bound
    return count > capacity


def _top(index: SearchIndex, docs: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top ``k`` by (score desc, product id asc), in rank order."""
    n = len(scores)
    if n > k:
        kth = _kth_largest(scores, k)
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)
        need = k - len(above)
        if len(ties) > need:
            ties = ties[np.argsort(index.tiebreak[docs[ties]], kind="stable")[:need]]
        sel = np.concatenate([above, ties])
    else:
        sel = np.arange(n)
    order = np.lexsort((index.tiebreak[docs[sel]], -scores[sel]))
    return sel[order]


def _apply_capacity(index: SearchIndex, cands: np.ndarray, cand_scores: np.ndarray, res_docs: np.ndarray,
                    res_scores: np.ndarray, capacity: int, top: np.ndarray) -> np.ndarray:
    keys = index.rank_keys(cands, cand_scores)
    res_keys = index.rank_keys(res_docs, res_scores)
    if int(np.count_nonzero(keys > res_keys[-1])) < capacity:
        return top
    cut = np.partition(keys, len(keys) - capacity)[len(keys) - capacity]
    return top[res_keys >= cut]
