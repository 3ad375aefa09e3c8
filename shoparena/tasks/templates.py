"""Query templates: sentence frames, constraint phrases and the upstream voucher block (docs/shoppingbench.md §3.3, §3.7).

A query is a frame (``"I'm looking for {items}."``) around item descriptions; an item description is a short
category noun (``tasks/nouns.py``) followed by one phrase per constraint. Every constraint value is inserted
verbatim (SKU/attribute values, service phrases, price bounds), so a reader can recover the constraint set from
the query; the product title is never used. Voucher queries end with exactly the upstream block: a blank line,
then the three numbered rules with backticked numbers (``exceeds`` wording; ``14%`` for a stored ``0.14``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from shoparena.tasks.nouns import with_article
from shoparena.tasks.types import Voucher

#: Product bucket frames (``{items}`` is one item description).
PRODUCT_FRAMES: tuple[str, ...] = (
    "I'm looking for {items}.",
    "Show me {items}.",
    "Can you find {items}?",
    "Looking for {items}.",
    "Find me {items}.",
    "I need {items}.",
    "Please help me find {items}.",
    "Do you have {items}?",
    "I want to buy {items}.",
    "Search for {items}, please.",
    "Could you show me {items}?",
    "Help me shop for {items}.",
    "I'd like to get {items}.",
    "Any recommendations for {items}?",
    "I'm searching for {items}.",
    "Can you help me find {items}?",
    "Please recommend {items}.",
    "Where can I get {items}?",
    "I'm shopping for {items}.",
    "Recommend me {items}.",
    "I'd love to find {items}.",
    "Could you look up {items} for me?",
)

#: Shop bucket frames; each one asks for a single shop. ``: {items}`` frames also take ordinal lists.
SHOP_FRAMES: tuple[str, ...] = (
    "I'm looking for a shop that offers these items: {items}. The shop should sell all these products.",
    "Find a shop offering {items}.",
    "Can you find one store that sells {items}? All of them must come from the same store.",
    "Looking for a shop that sells all of the following: {items}.",
    "I want to buy everything from a single seller: {items}.",
    "Show me a store that has {items}.",
    "Please find a shop that carries {items}, all from the same shop.",
    "Which shop sells {items}? I want to order them all from one store.",
    "Help me find a seller offering {items}.",
    "I need one shop that stocks these products: {items}.",
    "Is there a store where I can get {items}? Everything should come from one shop.",
    "Find me a single shop with {items}.",
    "I'd like to order the following from the same shop: {items}.",
    "Search for a shop that offers {items}.",
    "Could you locate a store selling {items}? They must all be from the same shop.",
    "I'm shopping for {items}, and I want all of them from one seller.",
    "Recommend a shop that sells all of these: {items}.",
    "Find a store offering these items: {items}. Make sure they are all sold by the same shop.",
    "I need a shop that has {items} in stock.",
    "Can you find a single seller for {items}?",
    "Please look for one shop carrying these products: {items}.",
    "I want to buy these from just one store: {items}.",
)

#: Voucher bucket frames (one to four items); the voucher block is appended after a blank line.
VOUCHER_FRAMES: tuple[str, ...] = (
    "I'm looking for {items}.",
    "Can you help me buy {items}?",
    "I want to purchase {items}.",
    "Show me {items}.",
    "I need to get {items}.",
    "Please find {items}.",
    "Help me order {items}.",
    "I'd like to buy {items}.",
    "Looking for {items}.",
    "Could you find {items} for me?",
    "I'm planning to buy {items}.",
    "I'm shopping for {items}.",
    "Find me {items}.",
    "Please recommend {items}.",
    "I want {items}.",
    "Search for {items}.",
    "I'm trying to get {items} within my budget.",
    "Can you put together a cart with {items}?",
    "Help me pick {items}.",
    "Here's what I need: {items}.",
    "I need a few things: {items}.",
    "Please get me the following: {items}.",
)

FRAMES: dict[str, tuple[str, ...]] = {"product": PRODUCT_FRAMES, "shop": SHOP_FRAMES, "voucher": VOUCHER_FRAMES}

#: Appended to a shop query whose frame does not already say that every item comes from one shop.
SAME_SHOP_SENTENCES: tuple[str, ...] = (
    "All items must come from the same shop.",
    "Everything should be sold by one shop.",
    "I want to buy all of them from a single store.",
    "They should all come from the same seller.",
    "Please make sure one shop sells all of them.",
)
_SAYS_ONE_SHOP = re.compile(r"\b(same|one|single|just one) (shop|store|seller)\b|\bshop should sell all\b", re.I)


def says_one_shop(text: str) -> bool:
    """Whether ``text`` states that all items come from one shop."""
    return _SAYS_ONE_SHOP.search(text) is not None

_ORDINALS = ("First", "Second", "Third", "Fourth")

#: Service code → phrases (docs/shoppingbench.md §1.2: official = LazMall, flashsale = LazFlash).
SERVICE_PHRASES: dict[str, tuple[str, ...]] = {
    "freeShipping": ("with free shipping", "with free delivery", "shipped for free"),
    "COD": ("with cash on delivery", "available for cash on delivery", "payable by cash on delivery (COD)"),
    "official": ("from LazMall", "from an official store", "sold by an official LazMall store"),
    "flashsale": ("on flash sale", "with LazFlash deals", "in a flash sale"),
}

PRICE_PHRASES: dict[str, tuple[str, ...]] = {
    "greater than": (
        "priced above {lo} pesos", "costing more than {lo} PHP", "priced over {lo} PHP", "above {lo} pesos",
        "with a price above {lo} PHP", "costing over {lo} pesos",
    ),
    "between": (
        "priced between {lo} and {hi} PHP", "costing between {lo} and {hi} pesos", "priced from {lo} to {hi} PHP",
        "in the {lo} to {hi} PHP range", "with a price between {lo} and {hi} pesos",
    ),
    "less than": ("priced below {hi} PHP", "costing less than {hi} pesos", "under {hi} PHP",
                  "priced at most {hi} pesos"),
}

_PAIR_PHRASES: dict[str, tuple[str, ...]] = {
    "color": ("in {v}", "in the color {v}", "in {v} color", "with color option {v}"),
    "size": ("in size {v}", "size {v}", "in the {v} size"),
    "material": ("made of {v}", "made from {v}", "with {v} material"),
    "brand": ("from {v}", "by {v}", "from the brand {v}"),
    "pattern": ("with a {v} pattern", "in a {v} design", "featuring a {v} pattern"),
    "model": ("model {v}", "in model {v}", "for model {v}"),
    "generic": ("with {k} {v}", "with {k}: {v}", "where the {k} is {v}", "having {k} {v}"),
}


@dataclass(frozen=True)
class Constraint:
    """One atomic constraint to phrase: ``kind`` ∈ sku / attr / service / price.

    sku/attr: ``key`` and ``value``; service: ``value`` is the code; price: ``key`` is the mode and
    ``bounds`` ``(lower, upper)``."""

    kind: str
    key: str = ""
    value: str = ""
    bounds: tuple[float | int | None, float | int | None] = (None, None)


def fmt_num(x: float | int | None) -> str:
    """``170`` for 170 or 170.0; ``12.5`` otherwise (the way the upstream queries print numbers)."""
    if x is None:
        return ""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _key_kind(key: str) -> str:
    k = key.lower()
    for needle, kind in (("colo", "color"), ("size", "size"), ("material", "material"), ("pattern", "pattern"),
                         ("model", "model")):
        if needle in k:
            return kind
    return "brand" if k == "brand" or k.endswith("_brand") else "generic"


def readable_key(key: str) -> str:
    """``type_of_inks`` ⇒ ``type of inks``; Lazada's ``fa_`` prefix is dropped (``fa_create_year`` ⇒ ``create
    year``)."""
    words = key.replace("_", " ").split()
    if len(words) > 1 and words[0] == "fa":
        words = words[1:]
    return " ".join(words) or key


def constraint_phrase(c: Constraint, rng: random.Random) -> str:
    """One phrase for one constraint, values inserted verbatim."""
    if c.kind == "service":
        options = SERVICE_PHRASES.get(c.value, (f"with {c.value} service",))
        return rng.choice(options)
    if c.kind == "price":
        lo, hi = c.bounds
        return rng.choice(PRICE_PHRASES[c.key]).format(lo=fmt_num(lo), hi=fmt_num(hi))
    options = _PAIR_PHRASES[_key_kind(c.key)]
    low = c.value.lower()
    # "in one size size", "in random wax color color": skip wordings that repeat a word the value carries
    fitting = [o for o in options if not any(w in o and w in low for w in ("color", "size", "pattern"))]
    return rng.choice(fitting or options).format(k=readable_key(c.key), v=c.value)


def join_phrases(phrases: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b, and c``."""
    if len(phrases) <= 2:
        return " and ".join(phrases)
    return ", ".join(phrases[:-1]) + ", and " + phrases[-1]


def describe_item(noun: str, constraints: Sequence[Constraint], rng: random.Random) -> str:
    """``a violin bow made of horsetail, in size 4/4, and with free shipping`` (constraints in given order)."""
    head = with_article(noun)
    phrases = [constraint_phrase(c, rng) for c in constraints]
    return f"{head} {join_phrases(phrases)}" if phrases else head


def render_items(descriptions: Sequence[str], style: str) -> str:
    """Join item descriptions: ``inline`` (``a; b; and c``), ``numbered`` (``(1) a; (2) b``) or ``ordinal``
    (``First, a. Second, b``). One item is returned as is."""
    if len(descriptions) == 1:
        return descriptions[0]
    if style == "numbered":
        return "; ".join(f"({i}) {d}" for i, d in enumerate(descriptions, start=1))
    if style == "ordinal":
        sentences = [f"{_ORDINALS[i]}, {d}" for i, d in enumerate(descriptions[:-1])]
        return ". ".join([*sentences, f"Finally, {descriptions[-1]}"])
    return "; ".join(descriptions[:-1]) + "; and " + descriptions[-1]


def list_styles(frame: str) -> tuple[str, ...]:
    """Ordinal lists are full sentences, so only frames that introduce the list with a colon take them."""
    return ("inline", "numbered", "ordinal") if ": {items}" in frame else ("inline", "numbered")


def render_query(frame: str, descriptions: Sequence[str], style: str, *, one_shop: str | None = None) -> str:
    """Fill a frame (first letter capitalised). ``one_shop`` (one of :data:`SAME_SHOP_SENTENCES`) is appended
    when the filled frame does not already say that all items come from one shop."""
    text = frame.format(items=render_items(descriptions, style))
    if one_shop is not None and not says_one_shop(text):
        text = f"{text} {one_shop}"
    return text[:1].upper() + text[1:]


def voucher_block(voucher: Voucher) -> str:
    """The upstream voucher rules block, byte-exact (docs/shoppingbench.md §3.3)."""
    scope = (
        "The voucher applies to all products."
        if voucher.voucher_type == "platform"
        else "The voucher only applies to the products from the same shop."
    )
    if voucher.discount_type == "fixed":
        rule = f"It provides a fixed discount of `{fmt_num(voucher.face_value)}`."
    else:
        pct = round(float(voucher.discount or 0) * 100, 6)
        rule = f"It provides a percentage discount of `{fmt_num(pct)}%` with a cap of `{fmt_num(voucher.cap)}`."
    return (
        f"My budget is only `{fmt_num(voucher.budget)}`, but I have a voucher with the following rules:\n"
        f"1. {scope}\n"
        f"2. It is valid only when the total price of the products exceeds `{fmt_num(voucher.threshold)}`.\n"
        f"3. {rule}"
    )


def with_voucher(request: str, voucher: Voucher) -> str:
    """``request`` + blank line + :func:`voucher_block`."""
    return f"{request}\n\n{voucher_block(voucher)}"


def strip_voucher_block(query: str) -> str:
    """The request part of a voucher query (the whole query when it has no block)."""
    i = query.find("\n\nMy budget is only `")
    return query if i < 0 else query[:i]
