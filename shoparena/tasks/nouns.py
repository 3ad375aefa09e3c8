"""Short category nouns for query templates (part of ``tasks/templates``): never the full product title.

Upstream's LLM wrote queries "using only a short category name from the title" (docs/shoppingbench.md §3.7). Offline we
take the nouns from, in order:

1. ``category_nouns(category)`` from ``shoparena.catalog.synthetic`` (or ``shoparena.catalog.taxonomy``) when
   that module exists, knows the category and one of its nouns occurs in the title (that one goes first; the
   rest are the provider's synonyms). Real products in a category the provider knows but whose title uses none
   of its nouns take the fallback, so a paraphrase never names another product type;
2. a fallback: words of the leaf category (``"Men's Shoes > Sneakers"`` ⇒ ``sneakers``; generic leaves such as
   ``Women`` fall back to the parent), preferring the form the title uses (``"Fishing Rods"`` + a title with
   ``Fishing Rod`` ⇒ ``fishing rod``), then the leaf parts themselves, then synonyms from a small table.

Every noun is lowercase and differs from the lowercased title; the first noun is the canonical one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from shoparena.catalog.types import Product

_GENERIC_LEAVES = frozenset({
    "women", "men", "kids", "boys", "girls", "unisex", "baby", "others", "other", "default", "accessories",
    "general", "miscellaneous", "misc",
})
_SPLIT = re.compile(r"\s*(?:&|,|/|\band\b)\s*")
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")

#: A small synonym table for the fallback (keys and values lowercase).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "sneakers": ("trainers", "rubber shoes"),
    "shoes": ("footwear",),
    "earphones": ("earbuds", "in-ear headphones"),
    "headphones": ("headsets",),
    "jeans": ("denim pants",),
    "pants": ("trousers",),
    "t-shirts": ("tees", "shirts"),
    "dresses": ("frocks",),
    "cables": ("cords", "wires"),
    "phone cases": ("phone covers", "mobile cases"),
    "cases & covers": ("cases", "covers"),
    "power banks": ("portable chargers", "battery packs"),
    "backpacks": ("rucksacks", "school bags"),
    "knives": ("blades",),
    "bedding": ("bed sheets", "bed linen"),
    "spices": ("seasonings",),
    "herbs": ("seasonings",),
    "coffee": ("coffee beans",),
    "hardware": ("tools",),
    "art supplies": ("art materials",),
    "kitchen appliances": ("kitchen gadgets",),
    "jersey": ("sports shirt",),
    "straps": ("bands",),
    "collectibles": ("collectible items", "souvenirs"),
    "musical accessories": ("music accessories", "instrument accessories"),
    "drums": ("drum gear",),
    "percussion": ("percussion gear",),
    "fishing rods": ("fishing poles",),
    "wall art": ("wall decor",),
    "air fresheners": ("car fresheners",),
    "calendars": ("planners",),
    "books": ("reading books",),
}


def singular(word: str) -> str:
    """A crude English singular, good enough to match a leaf category word against a title word."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _provider() -> Callable[[str], tuple[str, ...]] | None:
    import importlib

    for module in ("shoparena.catalog.synthetic", "shoparena.catalog.taxonomy"):
        try:
            fn = getattr(importlib.import_module(module), "category_nouns", None)
        except ImportError:
            continue
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def _from_provider(category: str) -> tuple[str, ...]:
    fn = _provider()
    if fn is None or not category:
        return ()
    leaf = category.split(">")[-1].strip()
    for key in dict.fromkeys((category, leaf)):
        try:
            found = tuple(fn(key) or ())
        except (KeyError, LookupError, ValueError, TypeError):
            continue
        if found:
            return found
    return ()


def _fallback(category: str, title: str) -> list[str]:
    levels = [s.strip() for s in category.split(">") if s.strip()]
    while len(levels) > 1 and levels[-1].lower() in _GENERIC_LEAVES:
        levels.pop()
    leaf = levels[-1].lower() if levels else ""
    parts = [p for p in _SPLIT.split(leaf) if p]
    words = _WORD.findall(title.lower())
    nouns: list[str] = []
    for part in parts:
        pw = part.split()
        for j, w in enumerate(words):
            if singular(w) == singular(pw[-1]):
                if j > 0 and len(pw) > 1 and singular(words[j - 1]) == singular(pw[-2]):
                    w = f"{words[j - 1]} {w}"
                nouns.append(w)
                break
    nouns.extend(parts)
    for noun in [leaf, *nouns]:
        nouns.extend(SYNONYMS.get(noun, ()))
    return nouns


def _in_title(noun: str, title_words: list[str]) -> bool:
    want = [singular(w) for w in _WORD.findall(noun.lower())]
    have = [singular(w) for w in title_words]
    n = len(want)
    return n > 0 and any(have[i:i + n] == want for i in range(len(have) - n + 1))


def category_nouns_for(product: Product) -> tuple[str, ...]:
    """Short nouns naming ``product``'s category (≥ 1; lowercase; none equal to the full title).

    Provider nouns are used only when one of them occurs in the title (it goes first; the others are the
    provider's synonyms); otherwise the fallback derives nouns from the category leaf and the title.
    """
    title = product.title.strip().lower()
    words = _WORD.findall(title)
    provided = [n.strip().lower() for n in _from_provider(product.category)]
    matched = [n for n in provided if _in_title(n, words)]
    raw = [*matched, *provided] if matched else _fallback(product.category, product.title)
    out = [n.strip().lower() for n in raw]
    out = [n for n in dict.fromkeys(out) if n and n != title]
    return tuple(out) or ("item",)


#: Mass nouns take no article ("coffee with …", not "a coffee with …").
MASS_NOUNS = frozenset({
    "coffee", "tea", "hardware", "bedding", "literature", "flour", "rice", "sugar", "seasoning", "software",
    "furniture", "jewelry", "jewellery", "luggage", "equipment", "clothing", "makeup", "skincare", "stationery",
    "food", "milk", "water", "oil", "lingerie", "chocolate", "candy", "media", "music", "footwear", "eyewear",
    "sportswear", "swimwear", "underwear", "nightwear", "cookware", "tableware", "bakeware", "drinkware",
    "dinnerware", "haircare", "bodycare", "merchandise", "decor", "paper", "fabric", "yarn", "soap", "shampoo",
    "perfume", "lotion", "toothpaste", "honey", "salt", "pepper", "cheese", "bread", "meat", "seafood",
})


def with_article(noun: str) -> str:
    """``a cable`` / ``an earphone`` / ``sneakers`` / ``coffee`` (plural-looking nouns, mass nouns and
    ``x & y`` take no article)."""
    last = noun.split()[-1] if noun.split() else noun
    if "&" in noun or (last.endswith("s") and not last.endswith("ss")) or last in MASS_NOUNS:
        return noun
    vowel_sound = noun[:1] in "aeiou" and not noun.startswith(("uni", "usb", "use", "uk", "eu", "one"))
    return f"{'an' if vowel_sound else 'a'} {noun}"
