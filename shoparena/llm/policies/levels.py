"""The graded family of offline policies: what each level does differently (one :class:`Skill` per name).

Each field is a real behaviour, not a success dial:

========================  ===========  ==========  ==============  =============================
behaviour                 random       novice      careful         expert
========================  ===========  ==========  ==============  =============================
search query              raw request  raw item    noun + typed    noun + every value phrase;
                                                   values          other names of the product
price / service filters   never        rarely      usually         always
reformulate / paginate    no           no          once, if        up to twice per item (other
                                                   nothing fits    wording, values only, page 2)
verify before choosing    no           a glance    top 3 (trusts   top 10 with the view tool,
                                                   check tool)     exact values, one SKU variant
choose among candidates   uniform      top-ranked  first full      best match, then the likeliest
                          (noisy)      (noisy)     match           listing (focus, price in range)
same-shop items           ignored      ignored     anchor item 1,  all items searched, shops
                                                   3 shops, one    ranked by coverage, 8 shops,
                                                   search a step   parallel in-shop searches
voucher                   ignored      ignored     sum, discount   scope, threshold, cap; bundle
                                                   (no scope/cap)  search near the budget
ORO helper tools (oro7)   no           no          check, same-    same-shop, calculator
                                                   shop, calc.     (verifies with view)
category vocabulary       no           no          no              yes (``vocab.py``)
========================  ===========  ==========  ==============  =============================

Sampling: every choice goes through the episode's :class:`~shoparena.llm.policies.decide.Decider`; ``noise``
(judgement noise × T) and ``decisive`` (score scale before the softmax) set how much a level's choices vary.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LEVELS", "Skill"]


@dataclass(frozen=True, slots=True)
class Skill:
    """How one policy level behaves (module docstring)."""

    name: str
    query: str = "full"
    """``raw`` (the request text), ``noun`` (head noun + typed values) or ``full`` (noun + every value phrase)."""
    price_filter: float = 1.0
    """Probability (at T = 1) of passing the stated price range as the ``price`` filter."""
    service_filter: float = 1.0
    reformulate: int = 2
    """Extra searches per item when the results look poor (other wording, values only, next page)."""
    view: int = 10
    """Candidates per item to inspect before choosing (0: never looks)."""
    view_prob: float = 1.0
    exact: bool = True
    """Verify with ``view_product_information`` and exact value matching; False trusts ``check_product_match``
    when it is offered (lowercase substring test) and title words otherwise."""
    prior: bool = True
    """Break ties among equally matching listings by focus and value (see ``knowledge.prior``)."""
    uniform: bool = False
    """Pick uniformly among the results (the ``random`` floor)."""
    noise: float = 0.0
    """Judgement noise on candidate scores (× temperature)."""
    shops: int = 8
    """Shops tried for same-shop requests (0: the same-shop requirement is ignored)."""
    anchor_specific: bool = True
    """Anchor same-shop searches on the most constrained item (else the first one)."""
    voucher: str = "full"
    """``ignore``, ``naive`` (sum, discount if over budget, one swap) or ``full`` (scope, threshold, cap, search)."""
    oro_tools: bool = True
    parallel: bool = True
    """Issue independent searches of one step as parallel calls."""
    detail: int = 2
    """How much of the evidence the think text spells out (0–2)."""
    decisive: float = 4.0
    """Confidence of the final choices: candidate scores are multiplied by it before the softmax, so a level
    sampled at T = 0.7 still takes a clearly better candidate and varies among near-equals."""
    vocabulary: bool = True
    """Knows the store's category vocabulary: which nouns name the same kind of product (``trainers`` and
    ``sneakers``), for reading titles and rewording searches."""


LEVELS: dict[str, Skill] = {
    "random": Skill("random", query="raw", price_filter=0.0, service_filter=0.0, reformulate=0, view=0,
                    view_prob=0.0, exact=False, prior=False, uniform=True, shops=0, voucher="ignore",
                    oro_tools=False, parallel=False, detail=0, vocabulary=False, decisive=1.0),
    "novice": Skill("novice", query="raw", price_filter=0.2, service_filter=0.1, reformulate=0, view=1,
                    view_prob=0.35, exact=False, prior=False, noise=1.5, shops=0, voucher="ignore",
                    oro_tools=False, parallel=False, detail=0, vocabulary=False, decisive=1.0),
    "careful": Skill("careful", query="noun", price_filter=0.9, service_filter=0.7, reformulate=1, view=3,
                     view_prob=0.9, exact=False, prior=False, noise=0.6, shops=3, anchor_specific=False,
                     voucher="naive", oro_tools=True, parallel=False, detail=1, vocabulary=False,
                     decisive=2.0),
    "expert": Skill("expert"),
}
