"""The store's category vocabulary, as an expert shopper knows it: nouns that name the same kind of product.

Read from the synthetic catalog's taxonomy (``shoparena.catalog.taxonomy.CATEGORY_NOUNS``: each leaf category
lists its noun and synonyms, and titles use any of them). Used only by levels with ``Skill.vocabulary`` to
read titles (``trainers`` ≈ ``sneakers``) and to reword searches; unknown nouns have no siblings.
"""

from __future__ import annotations

from functools import lru_cache

from shoparena.llm.policies.phrases import norm_words

__all__ = ["siblings"]


@lru_cache(maxsize=1)
def _groups() -> dict[tuple[str, ...], tuple[str, ...]]:
    try:
        from shoparena.catalog.taxonomy import CATEGORY_NOUNS
    except ImportError:  # pragma: no cover - the taxonomy ships with the package
        return {}
    out: dict[tuple[str, ...], list[str]] = {}
    for nouns in CATEGORY_NOUNS.values():
        for n in nouns:
            bucket = out.setdefault(tuple(norm_words(n)), [])
            bucket.extend(x for x in nouns if x != n and x not in bucket)
    return {k: tuple(v) for k, v in out.items()}


@lru_cache(maxsize=4096)
def siblings(noun: str) -> tuple[str, ...]:
    """Other names of the kind of product ``noun`` names (empty when the noun is not in the vocabulary)."""
    key = tuple(norm_words(noun))
    found = _groups().get(key)
    if found is None and len(key) > 1:
        found = _groups().get(key[-2:]) or _groups().get(key[-1:])
    return found or ()
