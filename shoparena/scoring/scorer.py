"""The rule scorer (docs/shoppingbench.md §7): a pure function of a problem, a trajectory and a product lookup.

``Scorer(lookup, mode=...)`` scores one trajectory at a time:

- :meth:`Scorer.score_steps` takes a step list (§6.1) or an ORO envelope (§6.2; ``FAILED``/``TIMED_OUT``
  envelopes with partial dialogue are still scored, ``dialogue: null`` scores as an empty trajectory);
- :meth:`Scorer.score_ids` takes the recommended ids directly (comma string or list; see ``steps.py``).

Per problem (§7.3): the product bucket uses the first id only; shop/voucher score id ``i`` against
``reward[i]`` (extra ids ignored, missing/unknown ids contribute 0) and average over ``len(reward)``. The
``shop`` rule needs every position to hit and one ``shop_id`` among the hits; ``budget`` needs every position
to hit and the bundle to fit the budget, with the voucher if it applies (``tasks.constraints.within_budget``).
A hit is a resolved product (upstream, even a wrong one, §9.2) or ``rule > 0`` (strict). ``format`` and
``length`` never enter success (§7.4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoparena.catalog.types import Product, ProductLookup
from shoparena.errors import ConfigError
from shoparena.scoring.format import length_reward, trajectory_format
from shoparena.scoring.items import axis_totals, knowledge_scores, score_item
from shoparena.scoring.similarity import LexicalSimilarity, TitleSimilarity
from shoparena.scoring.steps import last_recommendation, split_ids, unwrap
from shoparena.scoring.types import FIELDS, ItemScore, ParityFlags, ProblemScore
from shoparena.tasks.constraints import voucher_applies, voucher_discounted, within_budget
from shoparena.tasks.types import Problem
from shoparena.types import MODES, Mode


def is_successful(bucket: str, rule: float, shop: float | None = None, budget: float | None = None) -> bool:
    """ORO ``is_problem_successful`` (§7.4): product/knowledge ``rule ≥ 1``; shop also ``shop ≥ 1``;
    voucher also ``budget ≥ 1``."""
    ok = rule >= 1
    if bucket == "shop":
        return ok and (shop or 0) >= 1
    if bucket == "voucher":
        return ok and (budget or 0) >= 1
    return ok


class Scorer:
    """Scores trajectories of one mode against a product lookup (index, dict, HTTP client).

    ``think`` selects think-mode format checking (``False``: the no-think/ReAct ablation, tool_call only).
    Product lookups are cached per scorer (ORO caches ``/get_product_raw`` the same way).
    """

    def __init__(
        self,
        lookup: ProductLookup,
        *,
        mode: Mode = "upstream",
        similarity: TitleSimilarity | None = None,
        parity: ParityFlags | None = None,
        think: bool = True,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown scoring mode {mode!r}", hint="use upstream or strict")
        self.lookup = lookup
        self.mode: Mode = mode
        self.similarity = similarity if similarity is not None else LexicalSimilarity()
        self.parity = parity or ParityFlags()
        self.think = think
        self._products: dict[str, Product | None] = {}

    # ------------------------------------------------------------------------------------------ lookup
    def product(self, product_id: str | None) -> Product | None:
        """The product for an exact id (no stripping here: upstream's ``" b"`` is simply unknown)."""
        if not product_id:
            return None
        if product_id not in self._products:
            self._products[product_id] = self.lookup.get(product_id)
        return self._products[product_id]

    # ---------------------------------------------------------------------------------------- entries
    def score_steps(
        self, problem: Problem, steps: Sequence[Any] | Mapping[str, Any], *, sample: int = 0,
        rollout_line: int | None = None,
    ) -> ProblemScore:
        """Score a step list or an ORO envelope: the last ``recommend_product`` call's ids."""
        env = unwrap(steps)
        raw = last_recommendation(env.steps, self.parity)
        return self.score_ids(problem, raw, env.steps, sample=sample, rollout_line=rollout_line,
                              status=env.status, error=env.error)

    def score_ids(
        self,
        problem: Problem,
        product_ids: str | Sequence[str] | None,
        steps: Sequence[Any] | None = None,
        *,
        sample: int = 0,
        rollout_line: int | None = None,
        status: str | None = None,
        error: str | None = None,
    ) -> ProblemScore:
        """Score recommended ids (comma string split per mode, or a list taken element-wise then stripped
        and de-duplicated in strict). ``steps`` only feed ``format`` and ``length`` (0 without them)."""
        ids = split_ids(product_ids, self.mode)
        steps = list(steps or [])
        src = "content" if problem.bucket == "knowledge" else None
        base: dict[str, Any] = {
            "problem_id": problem.problem_id, "bucket": problem.bucket, "mode": self.mode,
            "similarity": self.similarity.name, "sample": sample, "rollout_line": rollout_line,
            "status": status, "error": error, "recommended_ids": ids, "steps": len(steps),
            "format": trajectory_format(steps, mode=self.mode, think=self.think, parity=self.parity, source=src),
            "length": length_reward(steps),
        }
        if problem.bucket == "knowledge":
            return self._knowledge(problem, ids, base)
        if not problem.reward:
            base["error"] = error or "problem has no reward items"
            return ProblemScore(**base, **_bucket_defaults(problem.bucket))
        positions = ids[:1] if problem.bucket == "product" else ids
        n = 1 if problem.bucket == "product" else len(problem.reward)
        items = []
        for i, item in enumerate(problem.reward[:n]):
            pid = positions[i] if i < len(positions) else None
            items.append(score_item(self.product(pid), item, position=i, product_id=pid, mode=self.mode,
                                    similarity=self.similarity, problem=problem))
        return self._combine(problem, items, base)

    def unmatched(self, problem: Problem) -> ProblemScore:
        """The score of a problem no rollout was found for: 0 everywhere, a failure; axis totals kept."""
        totals = {f: 0 for f in FIELDS}
        reward = problem.reward[:1] if problem.bucket == "product" else problem.reward
        for item in reward:
            for f, t in axis_totals(item).items():
                totals[f] += t
        return ProblemScore(
            problem_id=problem.problem_id, bucket=problem.bucket, mode=self.mode,
            similarity=self.similarity.name, matched=False, error="no rollout",
            fields={f: 0.0 for f in FIELDS} if problem.bucket != "knowledge" else {"title": 0.0},
            axis_hits={f: 0 for f in totals} if problem.bucket != "knowledge" else {},
            axis_totals=totals if problem.bucket != "knowledge" else {},
            **_bucket_defaults(problem.bucket),
        )

    # ---------------------------------------------------------------------------------------- buckets
    def _combine(self, problem: Problem, items: list[ItemScore], base: dict[str, Any]) -> ProblemScore:
        n = len(items)
        fields = {f: sum(it.axes[f].score for it in items) / n for f in FIELDS}
        hits = {f: sum(it.axes[f].hits for it in items) for f in FIELDS}
        totals = {f: sum(it.axes[f].total for it in items) for f in FIELDS}
        gt = sum(it.gt for it in items) / n
        rule = sum(it.rule for it in items) / n
        product = sum(it.resolved for it in items) / n
        hit_items = [it for it in items if it.hit]
        all_hit = len(hit_items) == n
        shop_ids = [it.shop_id or "" for it in hit_items]
        extra: dict[str, Any] = {}
        if problem.bucket == "shop":
            extra["shop"] = 1.0 if all_hit and len(set(shop_ids)) == 1 else 0.0
        elif problem.bucket == "voucher":
            extra.update(self._budget(problem, hit_items, all_hit))
            if extra.get("error"):
                extra["error"] = "; ".join(e for e in (base["error"], extra["error"]) if e)
        success = is_successful(problem.bucket, rule, extra.get("shop"), extra.get("budget"))
        return ProblemScore(**{**base, **extra}, success=success, gt=gt, rule=rule, fields=fields,
                            axis_hits=hits, axis_totals=totals, product=product, items=items)

    def _budget(self, problem: Problem, hit_items: list[ItemScore], all_hit: bool) -> dict[str, Any]:
        voucher = problem.voucher
        if voucher is None:
            return {"budget": 0.0, "error": "voucher problem without a voucher"}
        prices = [it.price or 0.0 for it in hit_items]
        shop_ids = [it.shop_id or "" for it in hit_items]
        total = float(sum(prices))
        discounted = None
        if hit_items and voucher_applies(voucher, shop_ids) and total >= voucher.threshold:
            discounted = voucher_discounted(total, voucher)
        ok = all_hit and within_budget(prices, shop_ids, voucher)
        return {"budget": 1.0 if ok else 0.0, "bundle_total": total, "bundle_discounted": discounted}

    def _knowledge(self, problem: Problem, ids: list[str], base: dict[str, Any]) -> ProblemScore:
        first = ids[0] if ids else None
        item, kw = knowledge_scores(self.product(first), first, problem, mode=self.mode,
                                    similarity=self.similarity)
        title = item.axes["title"].score if "title" in item.axes else 0.0
        return ProblemScore(
            **base, success=is_successful("knowledge", item.rule), gt=item.gt, rule=item.rule,
            fields={"title": title}, product=1.0 if item.resolved else 0.0, kw=kw, items=[item],
        )


def _bucket_defaults(bucket: str) -> dict[str, Any]:
    if bucket == "shop":
        return {"shop": 0.0}
    if bucket == "voucher":
        return {"budget": 0.0}
    if bucket == "knowledge":
        return {"kw": 0.0}
    return {}
