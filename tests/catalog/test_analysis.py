"""Pyserini's default analyzer: StandardTokenizer, possessive, lowercase, stop words, Porter (docs/shoppingbench.md §1.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoparena.catalog.analysis import (
    ENGLISH_STOP_WORDS,
    MAX_TOKEN_LENGTH,
    _tokenize_general,
    analyze,
    tokenize,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("3.5mm AUX cable", ["3.5mm", "AUX", "cable"]),  # Numeric MidNumLet Numeric, then letters glued (WB10)
        ("Men's Running Shoes", ["Men's", "Running", "Shoes"]),  # apostrophe between letters (WB6/7)
        ("U.S.A. made", ["U.S.A", "made"]),  # trailing full stop is a break
        ("t-shirt 4/4", ["t", "shirt", "4", "4"]),  # hyphen and slash always break
        ("int: one size eu:39", ["int", "one", "size", "eu", "39"]),  # ':' joins letters only
        ("a:b c.d 1,000.50 1.5.", ["a:b", "c.d", "1,000.50", "1.5"]),
        ("abc.123 12.ab", ["abc", "123", "12", "ab"]),  # mid punctuation never joins letters to digits
        ("a_b __ _1 x_", ["a_b", "_1", "x_"]),  # ExtendNumLet glues; underscores alone are no token
        ("3pcs 500ml 1.8L", ["3pcs", "500ml", "1.8L"]),
        ("", []),
        ("  ,.;:!? ", []),
    ],
)
def test_standard_tokenizer_cases(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens
    assert _tokenize_general(text) == tokens


def test_non_latin_scripts_and_emoji() -> None:
    assert tokenize("中文字") == ["中", "文", "字"]  # one ideograph per token
    assert tokenize("ひらがな") == ["ひ", "ら", "が", "な"]  # one hiragana per token
    assert tokenize("カタカナ") == ["カタカナ"]  # katakana runs stay together
    assert tokenize("ภาษาไทย ok") == ["ภาษาไทย", "ok"]  # South-East-Asian runs stay together
    assert tokenize("Nice 👍🏽 😀") == ["Nice", "👍🏽", "😀"]  # emoji sequences (with modifiers) are tokens
    assert tokenize("café naïve") == ["café", "naïve"]


def test_long_tokens_are_cut_at_255_chars() -> None:
    tokens = tokenize("x" * 600 + " ok")
    assert [len(t) for t in tokens] == [MAX_TOKEN_LENGTH, MAX_TOKEN_LENGTH, 90, 2]


def test_filter_chain() -> None:
    assert analyze("Men's Running Shoes") == ["men", "run", "shoe"]  # possessive, lowercase, Porter
    assert analyze("MEN’S shoes") == ["men", "shoe"]  # curly apostrophe possessive
    assert analyze("The best of the U.S.A.") == ["best", "u.s.a"]  # stop words removed
    assert analyze("meetings 1990s") == ["meet", "1990"]
    assert analyze("İstanbul ΟΔΟΣ") == ["istanbul", "οδοσ"]  # Java per-code-point lowercase, no final sigma


def test_lucene_english_stop_word_list() -> None:
    assert len(ENGLISH_STOP_WORDS) == 33
    assert {"a", "the", "with", "will", "such", "into"} <= ENGLISH_STOP_WORDS
    assert "one" not in ENGLISH_STOP_WORDS and "for" in ENGLISH_STOP_WORDS


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aZq09.,;:'_ -/!x#*", max_size=40))
def test_ascii_fast_path_matches_the_general_grammar(text: str) -> None:
    assert tokenize(text) == _tokenize_general(text)
