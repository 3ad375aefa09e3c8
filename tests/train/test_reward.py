"""The per-step teacher tool-match reward (docs/training.md §3.1, upstream ToolRL correctness rescaled to [0, 1]),
pinned against values computed by hand: score / (1 + Σ(1 + #params))."""

from __future__ import annotations

import pytest

from shoparena.errors import ConfigError
from shoparena.train.reward import (
    NEUTRAL,
    blended_reward,
    match_score,
    mean_step_match,
    tool_match,
    value_match,
)


def call(name: str, **args: object) -> dict[str, object]:
    return {"name": name, "arguments": args}


FIND = call("find_product", q="violin bow", page=1)
VIEW = call("view_product_information", product_ids="11,22")
REC = call("recommend_product", product_ids="11")


def test_exact_equality_scores_one() -> None:
    assert tool_match([FIND], [FIND]) == 1.0


def test_json_string_arguments_equal_dict_arguments() -> None:
    # the corpus's reference_steps carry arguments as JSON strings
    teacher = [{"name": "find_product", "arguments": '{"q": "violin bow", "page": 1}'}]
    assert tool_match([FIND], teacher) == 1.0


def test_wrong_tool_name_scores_zero() -> None:
    # names: Jaccard([find], [view]) = 0; no same-name call → 0 / (1 + 1 + 2)
    assert tool_match([VIEW], [FIND]) == 0.0


def test_one_value_wrong_string_tokens_partial() -> None:
    # names 1 + keys 1 + q: tokens [violin, bow] vs [violin] → 1/2, page 1 → 1 ⇒ 3.5 / 4
    assert tool_match([call("find_product", q="violin", page=1)], [FIND]) == pytest.approx(3.5 / 4)


def test_int_needs_exact_equality() -> None:
    # page "1" (string) vs 1 (int) → 0 ⇒ 1 + 1 + 1 + 0 = 3 of 4
    assert tool_match([call("find_product", q="violin bow", page="1")], [FIND]) == pytest.approx(3 / 4)
    assert value_match(1, True) == 0.0


def test_missing_key_costs_key_set_and_value() -> None:
    # keys Jaccard([q, page], [q]) = 1/2, q matches 1, page missing 0 ⇒ 1 + 1.5 = 2.5 of 4
    assert tool_match([call("find_product", q="violin bow")], [FIND]) == pytest.approx(2.5 / 4)


def test_comma_and_space_split_makes_order_irrelevant() -> None:
    # tokens [11, 22] vs [22, 11]: multiset Jaccard 1 ⇒ not exact-equal lists, but every part scores:
    # names 1 + keys 1 + value 1 = 3 of 1 + (1 + 1) = 3 → 1.0
    assert tool_match([call("view_product_information", product_ids="22, 11")], [VIEW]) == 1.0
    # one id of two: tokens [11] vs [11, 22] → 1/2 ⇒ 2.5 / 3
    assert tool_match([call("view_product_information", product_ids="11")], [VIEW]) == pytest.approx(2.5 / 3)


def test_extra_predicted_call_lowers_name_jaccard() -> None:
    # names [find] vs [find, rec]: Jaccard 1/2; find matches fully (1 + 2) ⇒ 3.5 / 4
    assert tool_match([FIND, REC], [FIND]) == pytest.approx(3.5 / 4)


def test_two_teacher_calls_best_unused_match_each() -> None:
    # teacher [view(11,22), view(33)], pred [view(33), view(11,22)]: names [v, v] vs [v, v] → 1;
    # each teacher call takes its exact partner (2 each) ⇒ 1 + 2 + 2 = 5 of 1 + 2 + 2 = 5 → 1.0, although the lists
    # are not equal in order
    v33 = call("view_product_information", product_ids="33")
    assert tool_match([v33, VIEW], [VIEW, v33]) == 1.0
    # a single predicted view can serve only one of the two teacher calls: names [v, v] vs [v] → 1/2;
    # best for VIEW = 2, v33 finds no unused call ⇒ 2.5 / 5
    assert tool_match([VIEW], [VIEW, v33]) == pytest.approx(2.5 / 5)


def test_unparseable_prediction_scores_zero() -> None:
    assert tool_match(None, [FIND]) == 0.0
    assert tool_match([{"name": "find_product", "arguments": "{not json"}], [FIND]) == 0.0
    assert tool_match([{"arguments": {}}], [FIND]) == 0.0


def test_teacher_without_call_is_neutral() -> None:
    assert tool_match([FIND], []) == NEUTRAL == 0.5
    assert tool_match(None, []) == NEUTRAL


def test_empty_prediction_against_a_teacher_call_is_zero() -> None:
    assert tool_match([], [FIND]) == 0.0


def test_match_score_is_frequency_aware() -> None:
    # [a, a, b] vs [a, b, b]: intersection 2 (a once, b once), union 3 + 3 − 2 = 4
    assert match_score(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(0.5)
    assert match_score([], []) == 1.0
    assert match_score(["a"], []) == 0.0


def test_mean_step_match_aligns_by_position() -> None:
    teacher = [[FIND], [VIEW], [REC]]
    assert mean_step_match([[FIND], [VIEW], [REC]], teacher) == 1.0
    # stopped after two turns: (1 + 1 + 0) / 3
    assert mean_step_match([[FIND], [VIEW]], teacher) == pytest.approx(2 / 3)
    # one turn too many: (1 + 1 + 1 + 0) / 4
    assert mean_step_match([[FIND], [VIEW], [REC], [REC]], teacher) == pytest.approx(3 / 4)
    # swapped order costs both positions: (0 + 0 + 1) / 3
    assert mean_step_match([[VIEW], [FIND], [REC]], teacher) == pytest.approx(1 / 3)
    assert mean_step_match([], []) == 0.0
    # an unparseable turn and a teacher turn without calls: (0 + 0.5) / 2
    assert mean_step_match([None, [FIND]], [[FIND], []]) == pytest.approx(0.25)


def test_blended_reward() -> None:
    assert blended_reward(1.0, 0.5) == 0.75
    assert blended_reward(0.0, 0.5, w=0.2) == pytest.approx(0.1)
    assert blended_reward(1.0, 0.0, w=0.0) == 1.0
    with pytest.raises(ConfigError):
        blended_reward(1.0, 1.0, w=1.5)
