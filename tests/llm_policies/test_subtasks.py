"""The axis-B sub-task prompts: classify_intent, score_match, narrate."""

from __future__ import annotations

import pytest

from shoparena.catalog.index import SearchIndex
from shoparena.llm.policies import get_policy
from shoparena.llm.subtasks import (
    intent_messages,
    match_messages,
    narrate_messages,
    parse_intent,
    parse_match,
)
from shoparena.llm.types import Sampling, chat_sync
from shoparena.tasks.types import Problem

LEVELS = ["random", "novice", "careful", "expert"]


@pytest.mark.parametrize("level", LEVELS)
def test_classify_intent_parses_and_is_right(level: str, problems: list[Problem]) -> None:
    for p in problems[::4]:
        reply = chat_sync(get_policy(level), intent_messages(p.query), None, Sampling(temperature=0.7, seed=1))
        intent = parse_intent(reply.content)
        assert intent is not None
        assert intent["bucket"] == p.bucket and intent["items"] == len(p.reward)
        assert len(intent["queries"]) == len(p.reward)


def _view(index: SearchIndex, pid: str) -> dict:
    """A product as an agent has seen it: search fields plus view fields."""
    prod = index.get(pid)
    assert prod is not None
    return {"product_id": prod.product_id, "shop_id": prod.shop_id, "title": prod.title, "price": prod.price,
            "service": list(prod.service), "sku_options": prod.sku_options, "attributes": prod.attributes}


@pytest.mark.parametrize("level", LEVELS)
def test_score_match_is_calibrated(level: str, problems: list[Problem], synth_index: SearchIndex) -> None:
    """The GT product of an item scores high; another item's GT scores lower for the same request."""
    gaps = []
    for p in problems:
        if p.bucket != "shop":
            continue
        right = _view(synth_index, p.reward[0].product_id)
        wrong = _view(synth_index, p.reward[-1].product_id)
        s = Sampling(temperature=0.7, seed=3)
        good = parse_match(chat_sync(get_policy(level), match_messages(p.query, right, 0), None, s).content)
        bad = parse_match(chat_sync(get_policy(level), match_messages(p.query, wrong, 0), None, s).content)
        assert good is not None and bad is not None
        gaps.append(good - bad)
        if level == "expert":
            assert good >= 0.9
    assert sum(gaps) / len(gaps) > 0.2


def test_score_match_without_item_number_and_with_partial_fields() -> None:
    q = "Find me hoop earrings with free delivery priced above 100 PHP."
    reply = chat_sync(get_policy("expert"), match_messages(q, {"product_id": "1", "title": "Gold Hoop Earrings",
                                                               "price": 150.0, "service": ["freeShipping"]}))
    assert parse_match(reply.content) >= 0.9
    cheap = chat_sync(get_policy("expert"), match_messages(q, {"product_id": "2", "title": "Gold Hoop Earrings",
                                                               "price": 50.0, "service": []}))
    assert parse_match(cheap.content) < 0.3
    assert "misses" in cheap.content


@pytest.mark.parametrize("level", LEVELS)
def test_narrate_names_the_products(level: str, by_bucket: dict[str, Problem], synth_index: SearchIndex) -> None:
    p = by_bucket["voucher"]
    chosen = [_view(synth_index, r.product_id) for r in p.reward]
    text = chat_sync(get_policy(level), narrate_messages(p.query, chosen), None, Sampling(seed=1)).content
    assert all(c["title"] in text for c in chosen[:4])
    assert "{" not in text
    empty = chat_sync(get_policy(level), narrate_messages(p.query, [])).content
    assert "could not find" in empty
