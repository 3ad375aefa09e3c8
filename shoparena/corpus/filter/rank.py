"""Dedup and structural ranking (``docs/paper.md`` §3, Appendix A.3): per problem, drop exact duplicates, score every
row on its structure, keep the best ``per_problem`` (1–2), breaking ties towards different tool-call shapes.

Per row (:func:`features`), over its assistant tool calls in order:

- ``depth``: assistant turns that carry both a think (``reasoning_content`` or a ``<think>`` block) and at least
  one tool call;
- ``reformulations``: distinct normalised search queries (``q`` — or ``query`` — of ``find_product`` calls,
  lower-cased, non-alphanumerics collapsed);
- ``verified``: a ``check_product_match``, or a ``view_product_information`` that follows a ``find_product``,
  before the first ``recommend_product``;
- ``repeat_penalty``: over maximal runs of *identical* consecutive calls (same name, same arguments apart from
  ``page``), the sum of ``run length − 2`` — one repeat is fine, paging the same query three times is a loop.

Score (higher ranks first)::

    score = min(depth, 12) + 2·min(reformulations, 6) + 4·verified − 2·repeat_penalty

The caps stop a long crawl from outranking a focused trace on length alone. Rows of a problem are ordered by
score; the first pick among rows tied at the top score (or the only top row) is the smallest trajectory id; the
second pick, among the rows tied at the best remaining score, is the one whose tool-call shape (the sequence of
tool names) has the largest edit distance to the first pick's, then the smallest trajectory id. When two or more
rows tie for the top score, the first two picks are the pair of tied rows with the most different shapes.
Every choice depends on content and ids only, never on input order.

Exact duplicates: same tool calls (names + canonical arguments, ``page`` included) and same final answer (the last
assistant content); the smallest trajectory id of a duplicate set stays. Rows without a ``problem_id`` are grouped
by their first user message. Groups are emitted in sorted key order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from shoparena.corpus.filter.base import Stage, call_args, call_name, has_think, norm_query
from shoparena.corpus.filter.config import FilterConfig
from shoparena.corpus.types import Rejection, Trajectory
from shoparena.env.tools import COMPOSITE_TOOLS, VERIFY_TOOLS

__all__ = ["DEPTH_CAP", "REFORMULATION_CAP", "DedupRank", "Features", "edit_distance", "features", "score"]

DEPTH_CAP = 12
REFORMULATION_CAP = 6
W_DEPTH, W_REFORM, W_VERIFY, W_REPEAT = 1, 2, 4, 2
_SORTED = orjson.OPT_SORT_KEYS


@dataclass(slots=True, frozen=True)
class Features:
    depth: int
    reformulations: int
    verified: bool
    repeat_penalty: int
    shape: tuple[str, ...]
    """Tool names in call order."""
    signature: bytes
    """Exact-duplicate key: canonical calls + final answer."""

    @property
    def score(self) -> int:
        return score(self.depth, self.reformulations, self.verified, self.repeat_penalty)


def score(depth: int, reformulations: int, verified: bool, repeat_penalty: int) -> int:
    """The ranking score (module docstring)."""
    return (W_DEPTH * min(depth, DEPTH_CAP) + W_REFORM * min(reformulations, REFORMULATION_CAP)
            + W_VERIFY * int(verified) - W_REPEAT * repeat_penalty)


def _canon(args: dict[str, Any] | None, call: Any) -> bytes:
    if args is None:  # unparseable: the raw text is the identity
        fn = call.get("function") if isinstance(call, dict) else None
        return repr(fn.get("arguments") if isinstance(fn, dict) else call).encode()
    try:
        return orjson.dumps(args, option=_SORTED)
    except TypeError:  # pragma: no cover - parsed JSON always serialises
        return repr(args).encode()


def features(t: Trajectory) -> Features:
    """The structural features of one row (module docstring)."""
    depth = 0
    queries: set[str] = set()
    verified = False
    recommended = False
    searched = False
    penalty = 0
    run_key: bytes | None = None
    run_len = 0
    shape: list[str] = []
    canon: list[bytes] = []
    answer: Any = None
    for m in t.messages:
        if m.get("role") != "assistant":
            continue
        answer = m.get("content")
        calls = m.get("tool_calls")
        if not calls:
            continue
        if has_think(m):
            depth += 1
        for c in calls:
            name = call_name(c)
            args = call_args(c)
            shape.append(name)
            full = _canon(args, c)
            canon.append(name.encode() + b"\x00" + full)
            if args is not None and "page" in args:
                key = name.encode() + b"\x00" + _canon({k: v for k, v in args.items() if k != "page"}, c)
            else:
                key = canon[-1]
            if key == run_key:
                run_len += 1
            else:
                penalty += max(0, run_len - 2)
                run_key, run_len = key, 1
            if name == "find_product":
                searched = True
                if args is not None:
                    q = args.get("q", args.get("query"))
                    if q is not None:
                        nq = norm_query(q)
                        if nq:
                            queries.add(nq)
            elif not recommended:
                if name == "recommend_product":
                    recommended = True
                elif name in VERIFY_TOOLS and (searched or name in COMPOSITE_TOOLS):  # a view verifies a find
                    verified = True
    penalty += max(0, run_len - 2)
    final = answer if isinstance(answer, str) else orjson.dumps(answer)
    signature = b"\x01".join(canon) + b"\x02" + (final.encode() if isinstance(final, str) else final)
    return Features(depth, len(queries), verified, penalty, tuple(shape), signature)


def edit_distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Levenshtein distance between two tool-name sequences."""
    if a == b:
        return 0
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _group_key(t: Trajectory) -> str:
    if t.problem_id is not None:
        return "p:" + str(t.problem_id)
    for m in t.messages:
        if m.get("role") == "user":
            c = m.get("content")
            return "q:" + (c if isinstance(c, str) else orjson.dumps(c).decode())
    return "t:" + t.traj_id  # no problem and no query: a group of its own


def select(cands: list[tuple[int, str, tuple[str, ...], Trajectory]], k: int
           ) -> list[tuple[int, str, tuple[str, ...], Trajectory]]:
    """Pick ``k`` of ``(score, traj_id, shape, row)`` candidates (module docstring); the order picked."""
    rest = sorted(cands, key=lambda c: (-c[0], c[1]))
    picked: list[tuple[int, str, tuple[str, ...], Trajectory]] = []
    while rest and len(picked) < k:
        top = rest[0][0]
        tied = [c for c in rest if c[0] == top]
        if not picked and k - len(picked) >= 2 and len(tied) >= 2:
            # the most different pair among the rows tied at the top; per shape the smallest id represents it
            reps: dict[tuple[str, ...], tuple[int, str, tuple[str, ...], Trajectory]] = {}
            for c in tied:
                reps.setdefault(c[2], c)
            if len(reps) == 1:
                pair = tied[:2]
            else:
                shapes = sorted(reps)
                best = max(((edit_distance(a, b), a, b) for i, a in enumerate(shapes) for b in shapes[i + 1:]),
                           key=lambda d: d[0])  # max keeps the first of equals: sorted shapes → deterministic
                pair = sorted((reps[best[1]], reps[best[2]]), key=lambda c: c[1])
            picked.extend(pair)
            rest = [c for c in rest if c[3] is not pair[0][3] and c[3] is not pair[1][3]]
            continue
        if picked:
            # tied is in id order and max keeps the first of equals: the smallest id wins a distance tie
            choice = max(tied, key=lambda c: min(edit_distance(c[2], p[2]) for p in picked))
        else:
            choice = tied[0]
        picked.append(choice)
        rest = [c for c in rest if c[3] is not choice[3]]
    return picked


class DedupRank(Stage):
    """Per problem: drop exact duplicates (``duplicate``), rank by structure and keep ``per_problem`` rows
    (``ranked_out`` for the rest). Needs every row of a problem before it decides, so it collects its input and
    emits once the input ends, groups in sorted key order, rows in pick order. ``notes`` carry the number of
    groups and the score of every kept row (``scores``: traj_id → score)."""

    name = "dedup_rank"

    def __init__(self, config: FilterConfig, sink: list[Rejection] | None = None) -> None:
        super().__init__(sink)
        self.per_problem = config.per_problem
        self.scores: dict[str, int] = {}
        self.report.notes.update(per_problem=self.per_problem)

    def run(self, rows: Iterable[Trajectory]) -> Iterator[Trajectory]:
        report = self.report
        groups: dict[str, dict[bytes, tuple[int, str, tuple[str, ...], Trajectory]]] = {}
        for t in rows:
            report.seen += 1
            try:
                f = features(t)
            except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
                self.reject(t, "malformed", f"{type(exc).__name__}: {exc}")
                continue
            group = groups.setdefault(_group_key(t), {})
            cand = (f.score, t.traj_id, f.shape, t)
            prev = group.get(f.signature)
            if prev is None:
                group[f.signature] = cand
            elif t.traj_id < prev[1]:
                group[f.signature] = cand
                self.reject(prev[3], "duplicate", f"same tool calls and answer as {t.traj_id}")
            else:
                self.reject(t, "duplicate", f"same tool calls and answer as {prev[1]}")
        report.notes["groups"] = len(groups)
        for key in sorted(groups):
            cands = list(groups[key].values())
            picked = select(cands, self.per_problem)
            chosen = {id(c[3]) for c in picked}
            for c in sorted(cands, key=lambda c: c[1]):
                if id(c[3]) not in chosen:
                    self.reject(c[3], "ranked_out", f"score {c[0]} not among the best {self.per_problem} of "
                                                    f"{key[2:]!r}")
            for c in picked:
                report.kept += 1
                self.scores[c[1]] = c[0]
                yield c[3]
        report.notes["scores"] = self.scores
