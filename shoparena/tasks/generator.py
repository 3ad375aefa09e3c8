"""Offline problem generator: the upstream recipe (docs/shoppingbench.md §3.7) with templates instead of an LLM.

For each cluster: sample ground-truth products (product 1; shop 2–4 from one shop; voucher 1–4 random products
with a platform voucher or 2–4 from one shop with a shop voucher), sample constraints copied byte-exact from the
products, make a voucher (§3.3/§3.4), render a base query, then ``paraphrases`` variants of the same constraint
set sharing ``cluster_id`` (= the base problem's id): another frame and phrasing, constraint order reshuffled, the
next category noun synonym; shop clusters also permute the items (``variant="reorder"``); product clusters may
swap in a product of another shop of the same category satisfying the same constraints
(``variant="substitution"``). Every problem is checked against its own ground truth; a failure is a generator bug.

Determinism: cluster ``k`` draws from ``random.Random(f"shoparena-gen:{seed}:{k}")``; same catalog, ``n``, seed
and config ⇒ identical problems (and bytes via ``dump_problems``). ``problem_id`` =
``synthetic:{bucket}:{sha1(query)[:12]}`` (the loader's derived-id rule with suite ``synthetic``); queries are
unique within one output. ``n`` counts problems, not clusters: the last cluster may be cut short.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from shoparena.catalog.types import SERVICE_CODES, Product
from shoparena.errors import ConfigError, DataError, closest
from shoparena.tasks.catalog_view import CatalogView
from shoparena.tasks.checks import GeneratorBug, check_solvable, difficulty_of
from shoparena.tasks.constraints import voucher_discounted
from shoparena.tasks.loader import derive_problem_id
from shoparena.tasks.nouns import category_nouns_for
from shoparena.tasks.templates import (
    FRAMES,
    SAME_SHOP_SENTENCES,
    Constraint,
    describe_item,
    list_styles,
    render_query,
    with_voucher,
)
from shoparena.tasks.types import Problem, RewardItem, Voucher

__all__ = ["GenerationReport", "GeneratorBug", "GeneratorConfig", "generate_problems", "make_voucher"]

log = logging.getLogger(__name__)
GEN_BUCKETS: tuple[str, ...] = ("product", "shop", "voucher")
SUITE = "synthetic"


class GeneratorConfig(BaseModel):
    """Knobs of the recipe. Item-count weights and type/price shares default to the upstream test data (§3.4)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bucket_weights: dict[str, float] = {"product": 1.0, "shop": 1.0, "voucher": 1.0}
    shop_items: dict[int, float] = {2: 89, 3: 86, 4: 75}
    platform_voucher_items: dict[int, float] = {1: 22, 2: 40, 3: 41, 4: 26}
    shop_voucher_items: dict[int, float] = {2: 30, 3: 39, 4: 52}
    shop_voucher_share: float = 121 / 250
    percentage_share: float = 137 / 250
    price_prob: float = 0.74
    """Share of product/shop items with a price constraint (183/250 and 542/736 upstream)."""
    price_mode_weights: dict[str, float] = {"greater than": 0.63, "between": 0.35, "less than": 0.02}
    sku_prob: float = 0.5
    sku_subset_prob: float = 0.5
    """Given a SKU constraint with several pairs: probability of keeping a random proper subset."""
    attr_prob: float = 0.5
    service_prob: float = 0.5
    substitution_prob: float = 0.5
    """Product clusters: chance that one variant is a retailer substitution (when a substitute exists)."""
    substitution_scan: int = 200
    """At most this many same-category products are tested when looking for a substitute."""
    max_attempts: int = 12
    """Samples tried per cluster (the first half refuse GT products already used by an earlier cluster)."""


@dataclass
class GenerationReport:
    """What generation did besides returning problems."""

    clusters: int = 0
    problems: int = 0
    by_bucket: dict[str, int] = field(default_factory=dict)
    skipped_buckets: dict[str, str] = field(default_factory=dict)
    """Bucket → why it could not be generated (e.g. no shop with ≥ 2 products)."""
    substitutions: int = 0
    dropped_variants: int = 0
    """Variants whose every rendering collided with an earlier query."""
    failed_clusters: int = 0
    reused_gt: int = 0
    """Clusters whose GT products overlap an earlier cluster's (unavoidable on tiny catalogs)."""


@dataclass
class _Item:
    product: Product
    constraints: list[Constraint]
    nouns: tuple[str, ...]


def _weighted(rng: random.Random, weights: Mapping[int, float], cap: int) -> int:
    keys = [k for k in sorted(weights) if k <= cap] or [cap]
    return rng.choices(keys, weights=[weights.get(k, 1.0) for k in keys])[0]


def _price_constraint(price: float, rng: random.Random, cfg: GeneratorConfig) -> Constraint:
    modes = list(cfg.price_mode_weights)
    mode = rng.choices(modes, weights=[cfg.price_mode_weights[m] for m in modes])[0]
    lo = min(max(1, math.floor(price * rng.uniform(0.05, 0.98))), math.floor(price))
    hi = math.ceil(price * (1 + rng.uniform(0.02, 1.0)))
    bounds = {"greater than": (lo, None), "between": (lo, hi), "less than": (None, hi)}[mode]
    return Constraint("price", key=mode, bounds=bounds)


def sample_constraints(p: Product, rng: random.Random, cfg: GeneratorConfig, *, price: bool) -> list[Constraint]:
    """SKU variant (p≈½; all pairs or a subset), each attribute key (p≈½, one value), each known service (p≈½),
    at most one price mode widened around the true price to integers. Values are copied byte-exact; blank values
    and values containing the whole title are never used (the query must not spell out the title)."""
    out: list[Constraint] = []
    title = p.title.strip().lower()

    def usable(value: str) -> bool:  # a value that spells out the whole title would leak it into the query
        return bool(value.strip()) and title not in value.lower()

    variants = [v for v in p.sku_options.values() if any(usable(x) for x in v.values())]
    if variants and rng.random() < cfg.sku_prob:
        pairs = [(k, v) for k, v in rng.choice(variants).items() if usable(v)]
        if len(pairs) > 1 and rng.random() < cfg.sku_subset_prob:
            pairs = rng.sample(pairs, rng.randint(1, len(pairs) - 1))
        out.extend(Constraint("sku", k, v) for k, v in pairs)
    taken = {(c.key, c.value) for c in out}
    for key, values in p.attributes.items():
        values = [v for v in values if usable(v)]
        if values and rng.random() < cfg.attr_prob:
            value = rng.choice(values)
            if (key, value) not in taken:
                out.append(Constraint("attr", key, value))
    for code in dict.fromkeys(p.service):
        if code in SERVICE_CODES and rng.random() < cfg.service_prob:
            out.append(Constraint("service", value=code))
    if price and rng.random() < cfg.price_prob:
        out.append(_price_constraint(p.price, rng, cfg))
    return out


def reward_item(product: Product, constraints: Sequence[Constraint]) -> RewardItem:
    """The upstream reward object for one product, keys and list entries in mention order."""
    sku = {c.key: c.value for c in constraints if c.kind == "sku"}
    attrs = [{c.key: [c.value]} for c in constraints if c.kind == "attr"]
    services = [c.value for c in constraints if c.kind == "service"]
    prices = [{c.key: list(c.bounds)} for c in constraints if c.kind == "price"]
    return RewardItem(
        product_id=product.product_id, title=[product.title], price=prices or None, service=services or None,
        sku_options=[sku] if sku else None, attributes=attrs or None,
    )


def make_voucher(prices: Sequence[float], voucher_type: str, rng: random.Random, cfg: GeneratorConfig) -> Voucher:
    """§3.7 step 4: threshold 10–90 % of the total (int); fixed face 10–50 % of the threshold, or a percentage
    10–50 % with a cap in [threshold·d, threshold]; budget = ceil(price after voucher) plus 0–10 %."""
    total = float(sum(prices))
    threshold = max(1, int(total * rng.uniform(0.10, 0.90)))
    if rng.random() < cfg.percentage_share:
        d = rng.randint(10, 50) / 100
        terms: dict[str, object] = {"discount_type": "percentage", "face_value": None, "discount": d,
                                    "cap": rng.randint(math.ceil(threshold * d), threshold)}
    else:
        terms = {"discount_type": "fixed", "face_value": max(1, round(threshold * rng.uniform(0.10, 0.50))),
                 "discount": None, "cap": None}
    probe = Voucher.model_validate({"voucher_type": voucher_type, "threshold": threshold, **terms,
                                    "price_after_voucher": 0.0, "budget": 0})
    after = voucher_discounted(total, probe) if total >= threshold else total
    budget = math.ceil(after) + math.floor(math.ceil(after) * rng.uniform(0.0, 0.10))
    return probe.model_copy(update={"price_after_voucher": float(after), "budget": budget})


def _resolve_buckets(buckets: Sequence[str] | Mapping[str, float], cfg: GeneratorConfig) -> dict[str, float]:
    weights = dict(buckets) if isinstance(buckets, Mapping) else {b: cfg.bucket_weights.get(b, 1.0) for b in buckets}
    for b in weights:
        if b not in GEN_BUCKETS:
            hint = closest(b, GEN_BUCKETS)
            raise ConfigError(f"cannot generate bucket {b!r}",
                              hint=f"use one of {GEN_BUCKETS}" + (f" (did you mean {hint!r}?)" if hint else ""))
    return {b: w for b, w in weights.items() if w > 0}


def _quotas(weights: Mapping[str, float], total: int) -> dict[str, int]:
    """Largest-remainder apportionment of ``total`` clusters over the buckets."""
    s = sum(weights.values())
    raw = {b: total * w / s for b, w in weights.items()}
    out = {b: math.floor(r) for b, r in raw.items()}
    for b in sorted(raw, key=lambda b: (out[b] - raw[b], list(raw).index(b)))[: total - sum(out.values())]:
        out[b] += 1
    return out


class _Builder:
    """Makes one cluster at a time; holds what must stay unique across the whole output."""

    def __init__(self, view: CatalogView, cfg: GeneratorConfig, paraphrases: int, report: GenerationReport):
        self.view, self.cfg, self.paraphrases, self.report = view, cfg, paraphrases, report
        self.seen_queries: set[str] = set()
        self.used_gt: set[str] = set()

    def sample(self, bucket: str, rng: random.Random) -> tuple[list[Product], str | None]:
        view, cfg = self.view, self.cfg
        if bucket == "product":
            return [view.products[rng.randrange(len(view))]], None
        if bucket == "voucher" and not (view.multi_shops and rng.random() < cfg.shop_voucher_share):
            k = _weighted(rng, cfg.platform_voucher_items, len(view))
            return view.distinct(rng.sample(range(len(view)), k)), "platform"
        shop = rng.choice(view.multi_shops)
        weights = cfg.shop_items if bucket == "shop" else cfg.shop_voucher_items
        k = _weighted(rng, weights, len(view.by_shop[shop]))
        return view.pick_from_shop(shop, k, rng), ("shop" if bucket == "voucher" else None)

    def cluster(self, bucket: str, rng: random.Random) -> list[Problem]:
        cfg = self.cfg
        for attempt in range(cfg.max_attempts):
            products, vtype = self.sample(bucket, rng)
            if len(products) < (2 if bucket == "shop" or vtype == "shop" else 1):
                continue
            reused = any(p.product_id in self.used_gt for p in products)
            if reused and attempt < cfg.max_attempts // 2:
                continue
            items = [_Item(p, sample_constraints(p, rng, cfg, price=bucket != "voucher"), category_nouns_for(p))
                     for p in products]
            voucher = make_voucher([p.price for p in products], vtype, rng, cfg) if vtype else None
            members = self._members(bucket, items, voucher, rng)
            if members:
                self.report.reused_gt += reused
                for m in members:
                    self.used_gt.update(m.gt_ids())
                return members
        return []

    def _members(self, bucket: str, items: list[_Item], voucher: Voucher | None, rng: random.Random) -> list[Problem]:
        frames = list(range(len(FRAMES[bucket])))
        rng.shuffle(frames)
        base = self._render(bucket, items, voucher, rng, frames, variant="base", cluster_id=None, noun_at=0)
        if base is None:
            return []
        members = [base]
        sub_slot = -1
        if bucket == "product" and self.paraphrases and rng.random() < self.cfg.substitution_prob:
            sub_slot = rng.randrange(1, self.paraphrases + 1)
        for j in range(1, self.paraphrases + 1):
            v_items, variant = [_Item(it.product, rng.sample(it.constraints, len(it.constraints)), it.nouns)
                                for it in items], "paraphrase"
            if j == sub_slot:
                sub = self.view.substitute(items[0].product, reward_item(items[0].product, items[0].constraints),
                                           rng, self.cfg.substitution_scan, exclude=self.used_gt)
                if sub is not None:
                    v_items, variant = [_Item(sub, v_items[0].constraints, items[0].nouns)], "substitution"
                    self.report.substitutions += 1
            if bucket == "shop" and len(v_items) > 1:
                order = list(range(len(v_items)))
                while order == list(range(len(v_items))):
                    rng.shuffle(order)
                v_items, variant = [v_items[i] for i in order], "reorder"
            frames = frames[1:] + frames[:1]
            member = self._render(bucket, v_items, voucher, rng, frames, variant=variant,
                                  cluster_id=base.problem_id, noun_at=j)
            if member is None:
                self.report.dropped_variants += 1
                continue
            members.append(member)
        return [members[0].model_copy(update={"cluster_id": members[0].problem_id}), *members[1:]]

    def _render(self, bucket: str, items: list[_Item], voucher: Voucher | None, rng: random.Random,
                frames: list[int], *, variant: str, cluster_id: str | None, noun_at: int) -> Problem | None:
        descriptions = [describe_item(it.nouns[noun_at % len(it.nouns)], it.constraints, rng) for it in items]
        reward = [reward_item(it.product, it.constraints) for it in items]
        for fi in frames:
            frame = FRAMES[bucket][fi]
            one_shop = rng.choice(SAME_SHOP_SENTENCES) if bucket == "shop" else None
            query = render_query(frame, descriptions, rng.choice(list_styles(frame)), one_shop=one_shop)
            if voucher is not None:
                query = with_voucher(query, voucher)
            if query in self.seen_queries:
                continue
            problem = Problem(
                problem_id=derive_problem_id(SUITE, bucket, query), bucket=bucket,  # type: ignore[arg-type]
                query=query, reward=reward, voucher=voucher, difficulty=difficulty_of(bucket, reward),
                cluster_id=cluster_id, suite=SUITE, variant=variant,
            )
            problems = {it.product.product_id: it.product for it in items}
            violations = check_solvable(problem, problems)
            if violations:
                raise GeneratorBug(f"generated problem {problem.problem_id} is unsolvable: {violations}")
            self.seen_queries.add(query)
            return problem
        return None


def generate_problems(
    products: Sequence[Product] | CatalogView,
    n: int,
    seed: int = 0,
    *,
    buckets: Sequence[str] | Mapping[str, float] = GEN_BUCKETS,
    paraphrases: int = 2,
    config: GeneratorConfig | None = None,
    report: GenerationReport | None = None,
) -> list[Problem]:
    """``n`` solvable problems in clusters of ``1 + paraphrases`` (see the module docstring).

    ``products`` may be any sequence (len + indexing; read once to group by shop and category) or a prebuilt
    :class:`CatalogView`. ``buckets`` names the buckets (weights from ``config.bucket_weights``) or maps them to
    weights. A bucket the catalog cannot support (shop problems need a shop with ≥ 2 products) is skipped with
    a warning and recorded in ``report.skipped_buckets``; an empty catalog raises :class:`DataError`.
    """
    cfg = config or GeneratorConfig()
    report = report if report is not None else GenerationReport()
    if n < 0 or paraphrases < 0:
        raise ConfigError(f"n and paraphrases must be ≥ 0 (got n={n}, paraphrases={paraphrases})")
    weights = _resolve_buckets(buckets, cfg)
    view = products if isinstance(products, CatalogView) else CatalogView.build(products)
    if len(view) == 0:
        raise DataError("cannot generate problems from an empty catalog", hint="pass a catalog with products")
    if "shop" in weights and not view.multi_shops:
        report.skipped_buckets["shop"] = "no shop has 2 or more products"
        log.warning("skipping shop problems: no shop has 2 or more products")
        del weights["shop"]
    if not weights or n == 0:
        return []
    size = 1 + paraphrases
    plan_rng = random.Random(f"shoparena-gen:{seed}:plan")
    plan = [b for b, q in _quotas(weights, math.ceil(n / size)).items() for _ in range(q)]
    plan_rng.shuffle(plan)
    builder = _Builder(view, cfg, paraphrases, report)
    out: list[Problem] = []
    k = 0
    while len(out) < n and k < 4 * len(plan) + 32:
        bucket = plan[k] if k < len(plan) else plan_rng.choices(list(weights), list(weights.values()))[0]
        members = builder.cluster(bucket, random.Random(f"shoparena-gen:{seed}:{k}"))
        k += 1
        if not members:
            report.failed_clusters += 1
            continue
        report.clusters += 1
        out.extend(members[: n - len(out)])
    for p in out:
        report.by_bucket[p.bucket] = report.by_bucket.get(p.bucket, 0) + 1
    report.problems = len(out)
    if len(out) < n:
        log.warning("generated %d of %d problems (%d clusters failed)", len(out), n, report.failed_clusters)
    return out
