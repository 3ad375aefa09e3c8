"""Link keys for the leak-cluster guard (docs/arena.md §12 design, point 2): canonical query text, the request text a
paraphrase check compares, and the constraint signature of a problem's ground truth.

- :func:`canonical_query`: NFKC, casefold, backticks dropped, every other punctuation or symbol → space except
  ``%`` and a decimal point between two digits, whitespace collapsed. Two queries that differ only in
  whitespace, case or punctuation get the same canonical query (the ORO eval rows 50 / 53 case).
- :func:`request_text`: the canonical query without the upstream voucher block (``My budget is only `N`, but I
  have a voucher …``), so paraphrases of one request with another voucher still compare as paraphrases.
- :func:`constraint_signature`: per requested item its GT category (when a lookup is given) plus the sorted
  ``(axis, key, value)`` constraint tuples — price mode and bounds included, product id and title dropped,
  ``sku_options`` and ``attributes`` on one ``sku_attr`` axis as the scorer counts them — and the items as a
  multiset. Attribute reorders, item reorders and retailer substitutions (same constraints, another GT product
  in another shop) share it. It is *strong* when every item carries at least ``min_constraints`` informative
  constraints; a trivial price (``greater than [≤ 1, null]``) is not informative.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import NamedTuple

from shoparena.tasks.types import Problem, RewardItem

__all__ = ["Signature", "canonical_query", "constraint_signature", "gt_title_text", "request_text"]

_KEEP_DECIMAL = re.compile(r"(?<!\d)\.|\.(?!\d)")
_PUNCT = re.compile(r"[^\w\s%.]|_")
_VOUCHER = re.compile(r"(?:^| )my budget is only [\d.]+ but i have a voucher\b")


def canonical_query(text: str) -> str:
    """The canonical form of a query (see the module docstring); the same for whitespace-only variants."""
    s = unicodedata.normalize("NFKC", text).casefold().replace("`", "")
    s = _KEEP_DECIMAL.sub(" ", s)
    s = _PUNCT.sub(" ", s)
    return " ".join(s.split())


def request_text(text: str) -> str:
    """:func:`canonical_query` with the voucher block cut off (the whole text when there is none)."""
    s = canonical_query(text)
    m = _VOUCHER.search(s)
    return s[: m.start()].strip() if m else s


class Signature(NamedTuple):
    """A problem's constraint signature: ``key`` (a sha256 hex of the canonical multiset) and ``strong``."""

    key: str
    strong: bool


def _num(x: float | int | None) -> str:
    return "null" if x is None else repr(float(x))


def _item_tuples(item: RewardItem) -> tuple[list[tuple[str, str, str]], int]:
    """The sorted ``(axis, key, value)`` tuples of one item and how many are informative."""
    tuples: list[tuple[str, str, str]] = []
    informative = 0
    for entry in item.price or []:
        for mode, bounds in entry.items():
            lo, hi = [*bounds, None, None][:2]
            tuples.append(("price", mode, f"{_num(lo)},{_num(hi)}"))
            trivial = mode == "greater than" and hi is None and (lo is None or float(lo) <= 1.0)
            informative += not trivial
    for code in item.service or []:
        tuples.append(("service", "", code))
        informative += 1
    for key, value in item.sku_attr_pairs():
        tuples.append(("sku_attr", key, value))
        informative += 1
    return sorted(set(tuples)), informative


def constraint_signature(
    problem: Problem, *, categories: Mapping[str, str] | None = None, min_constraints: int = 2
) -> Signature | None:
    """The signature of ``problem``'s reward items, or None when it has none (Knowledge problems).

    ``categories`` maps GT product id → catalog category; without it (or for ids it lacks) the category part is
    empty, so a signature is comparable only between problems whose categories were looked up alike."""
    if not problem.reward:
        return None
    items: list[str] = []
    strong = True
    for item in problem.reward:
        tuples, informative = _item_tuples(item)
        strong = strong and informative >= min_constraints
        category = (categories or {}).get(item.product_id, "")
        items.append(category + "\x1e" + "\x1d".join("\x1f".join(t) for t in tuples))
    blob = "\x1c".join(sorted(items))
    return Signature(hashlib.sha256(blob.encode("utf-8")).hexdigest(), strong)


def gt_title_text(problem: Problem) -> str:
    """The canonical GT titles of a problem, sorted and joined (the title-similarity check's text)."""
    if problem.bucket == "knowledge":
        titles = [problem.knowledge_product.title] if problem.knowledge_product else []
    else:
        titles = [t for item in problem.reward for t in item.title]
    return " ".join(sorted(canonical_query(t) for t in titles))
