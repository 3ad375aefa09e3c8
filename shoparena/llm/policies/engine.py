"""The episode context the strategies share: the request, tools, skill, sampler, knowledge and candidate pools.

A strategy is a generator: it yields an :class:`~shoparena.llm.policies.render.Action` and receives the
recorded :class:`~shoparena.llm.policies.state.Turn` (the calls that were really made and their observations).
``yield from ctx.act(think, calls)`` does that round trip and merges the observations into the
:class:`~shoparena.llm.policies.knowledge.Knowledge`. Every random choice goes through ``ctx.dec`` in a fixed
order, so a replay of the same conversation with the same sampling reproduces the episode exactly.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from shoparena.env.tools import LISTING_TOOLS
from shoparena.llm.policies.decide import Decider
from shoparena.llm.policies.knowledge import Cand, Knowledge, Match, match, prior
from shoparena.llm.policies.levels import Skill
from shoparena.llm.policies.parse import Request
from shoparena.llm.policies.phrases import norm_words
from shoparena.llm.policies.render import Action
from shoparena.llm.policies.state import Turn

__all__ = ["MAX_STEPS", "Ctx", "Flow", "Pick", "choose_all", "item_label", "join_words"]

Flow = Generator[Action, Turn, Any]
Pick = tuple[Cand, Match] | None
MAX_STEPS = 25
"""The ORO step limit (upstream allows 30): every strategy finishes within it."""
_STOP = frozenset({"a", "an", "the", "and", "of", "for", "with", "in", "to", "me", "my", "i"})


def join_words(*parts: str, limit: int = 12) -> str:
    """Distinct words of ``parts`` (stop words dropped), at most ``limit``."""
    seen: list[str] = []
    for part in parts:
        for w in part.split():
            lw = w.lower().strip(",.;:!?()'\"")
            if lw and lw not in _STOP and lw not in seen:
                seen.append(lw)
    return " ".join(seen[:limit])


def item_label(req: Request, i: int) -> str:
    return f"item {i + 1} ('{req.items[i].noun}')" if len(req.items) > 1 else f"'{req.items[i].noun}'"


class Ctx:
    """One episode's working memory (module docstring)."""

    def __init__(self, req: Request, tools: frozenset[str], skill: Skill, dec: Decider,
                 max_steps: int = MAX_STEPS) -> None:
        self.req, self.tools, self.skill, self.dec = req, tools, skill, dec
        self.kb = Knowledge()
        self.step = 0
        self.max_steps = max_steps
        self.pools: list[dict[str, Cand]] = [{} for _ in req.items]
        self.note = ""
        """Extra words for the recommendation's think (e.g. the voucher arithmetic)."""
        self._filters: dict[int, tuple[bool, bool]] = {}
        self._queries: dict[int, list[str]] = {}
        self.nouns: list[list[list[str]]] = []
        """Per item: the noun's words, then (levels with the vocabulary) those of its other names."""
        for item in req.items:
            names = [norm_words(item.noun)]
            if skill.vocabulary:
                from shoparena.llm.policies.vocab import siblings

                names += [norm_words(s) for s in siblings(item.noun)]
            self.nouns.append(names)
        self._grades: dict[tuple[Any, ...], Match] = {}
        self.seen_pages: set[str] = set()
        """``query\x00page`` of every search made (so a page is never fetched twice)."""

    # ── bookkeeping ──
    def has(self, tool: str) -> bool:
        """Whether ``tool`` is offered and this level uses ORO's helper tools."""
        return tool in self.tools and self.skill.oro_tools

    def left(self) -> int:
        return self.max_steps - self.step

    def can_explore(self, steps: int = 1) -> bool:
        """Whether ``steps`` more exploring steps leave room for recommend + terminate."""
        return self.left() - steps >= 2

    def act(self, think: str, calls: list[tuple[str, dict[str, Any]]]) -> Flow:
        """Yield one step; return per requested call its observation (searches as candidate lists)."""
        turn = yield Action(think, calls)
        self.step += 1
        seen: list[Any] = []
        for i, (name, params) in enumerate(turn.calls):
            res = turn.results[i] if i < len(turn.results) else None
            listed = self.kb.add(name, params if isinstance(params, dict) else {}, res)
            if name == "find_product" and isinstance(params, dict):
                self.seen_pages.add(f"{params.get('q')}\x00{params.get('page')}")
            seen.append(listed if name in LISTING_TOOLS else res)
        return [seen[i] if i < len(turn.calls) and turn.calls[i][0] == name else None
                for i, (name, _) in enumerate(calls)]

    # ── query planning ──
    def filters(self, i: int) -> tuple[bool, bool]:
        """Whether item ``i``'s searches pass its price range / services as filters (decided once)."""
        if i not in self._filters:
            item = self.req.items[i]
            self._filters[i] = (item.price is not None and self.dec.chance(self.skill.price_filter),
                                bool(item.services) and self.dec.chance(self.skill.service_filter))
        return self._filters[i]

    def params(self, i: int, q: str, page: int = 1, shop: str | None = None) -> dict[str, Any]:
        item = self.req.items[i]
        p: dict[str, Any] = {"q": q, "page": page}
        if shop:
            p["shop_id"] = shop
        use_price, use_service = self.filters(i)
        if use_price and item.price is not None:
            p["price"] = item.price.filter()
        if use_service and item.services:
            p["service"] = ",".join(item.services)
        return p

    def queries(self, i: int) -> list[str]:
        """Search wordings for item ``i``, the one to try first at the front (decided once per item)."""
        if i in self._queries:
            return self._queries[i]
        item, sk = self.req.items[i], self.skill
        if sk.query == "raw":
            options = [self.req.text if len(self.req.items) == 1 else item.text]
        else:
            typed = [r.value for r in item.reqs if r.kind not in ("generic", "kv")]
            every = item.value_words()
            noun_typed = join_words(item.noun, *typed)
            full = join_words(item.noun, *every)
            if sk.query == "noun":
                options = [noun_typed, join_words(item.noun)]
            else:
                others: list[str] = []
                if sk.vocabulary:
                    from shoparena.llm.policies.vocab import siblings

                    others = [join_words(s, *every) for s in siblings(item.noun)[:2]]
                first = self.dec.choose([full, noun_typed, *others[:1]], [0.0, -0.8, -1.5][:2 + len(others[:1])])
                options = [first, full, join_words(*every), *others, join_words(item.noun), noun_typed]
        self._queries[i] = [q for q in dict.fromkeys(options) if q] or [item.noun or item.text]
        return self._queries[i]

    # ── candidates ──
    def add_pool(self, i: int, cands: Any) -> list[Cand]:
        listed = cands if isinstance(cands, list) and all(isinstance(c, Cand) for c in cands) else []
        for c in listed:
            self.pools[i].setdefault(c.pid, c)
        return listed

    def pool(self, i: int, shop: str | None = None) -> list[Cand]:
        return [c for c in self.pools[i].values() if shop is None or c.shop == shop]

    def grade(self, i: int, c: Cand) -> Match:
        """``match`` of candidate ``c`` against item ``i``, memoised until the candidate is viewed or checked."""
        key = (i, c.pid, c.viewed, c.check is not None, c.price, c.service_known)
        m = self._grades.get(key)
        if m is None:
            m = self._grades[key] = match(self.req.items[i], c, use_check=not self.skill.exact, nouns=self.nouns[i])
        return m

    def plausible(self, i: int, cands: list[Cand], *, noun: float = 0.5) -> list[Cand]:
        """Candidates not ruled out by price or services, naming the item (or with a stated value confirmed)."""
        return [c for c in cands if not (m := self.grade(i, c)).bad and (m.noun >= noun or m.vals > 0)]

    def resolved(self, i: int, shop: str | None = None) -> bool:
        """Whether item ``i`` has a candidate meeting every stated constraint (``Match.strong``)."""
        return any(self.grade(i, c).strong for c in self.pool(i, shop))

    def rank_score(self, i: int, c: Cand, m: Match) -> float:
        s = m.score() - 0.04 * min(c.rank, 60)
        if self.skill.prior:
            s += prior(self.req.items[i], c, m)
        return s

    def ranked(self, i: int, cands: list[Cand] | None = None) -> list[tuple[float, Cand, Match]]:
        """``(score, candidate, match)`` best first; weaker levels judge with noise."""
        out = []
        for c in self.pools[i].values() if cands is None else cands:
            m = self.grade(i, c)
            out.append((self.rank_score(i, c, m) + self.dec.noise(self.skill.noise), c, m))
        out.sort(key=lambda t: -t[0])
        return out

    def choose(self, i: int, cands: list[Cand] | None = None, exclude: set[str] | None = None) -> Pick:
        """The pick for item ``i`` (never one of ``exclude``): uniform (random level), the first full match in
        search order (levels without the value prior, usually), or a softmax over the match scores."""
        ranked = [t for t in self.ranked(i, cands) if not exclude or t[1].pid not in exclude]
        if not ranked:
            return None
        if self.skill.uniform:
            _, c, m = ranked[self.dec.rng.randrange(len(ranked))]
            return c, m
        if not self.skill.prior:
            full = sorted((t for t in ranked if t[2].strong), key=lambda t: t[1].rank)
            if full and self.dec.chance(0.85):
                return full[0][1], full[0][2]
        k = self.dec.pick([t[0] * self.skill.decisive for t in ranked])
        return ranked[k][1], ranked[k][2]


def choose_all(ctx: Ctx, items: list[int], pools: dict[int, list[Cand]] | None = None) -> list[Pick]:
    """One distinct pick per item, in order (strict scoring drops repeated ids). Levels with the value prior
    assign items jointly (the best few per item, best total of distinct products); the others go greedily
    item by item."""
    if ctx.skill.prior and len(items) > 1:
        return _choose_joint(ctx, items, pools)
    taken: set[str] = set()
    out: list[Pick] = []
    for i in items:
        pick = ctx.choose(i, pools.get(i) if pools is not None else None, exclude=taken)
        if pick is not None:
            taken.add(pick[0].pid)
        out.append(pick)
    return out


def _choose_joint(ctx: Ctx, items: list[int], pools: dict[int, list[Cand]] | None) -> list[Pick]:
    from itertools import product as cartesian

    ranked = [ctx.ranked(i, pools.get(i) if pools is not None else None)[:5] for i in items]
    if any(not r for r in ranked):
        return [(r[0][1], r[0][2]) if r else None for r in ranked]
    combos, scores = [], []
    for combo in cartesian(*ranked):
        if len({t[1].pid for t in combo}) == len(combo):
            combos.append(combo)
            scores.append(sum(t[0] for t in combo) * ctx.skill.decisive)
    if not combos:
        return [(r[0][1], r[0][2]) for r in ranked]
    best = combos[ctx.dec.pick(scores)]
    return [(t[1], t[2]) for t in best]
