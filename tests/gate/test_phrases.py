"""The bank index: what counts as a copied phrase, fragment, rare title word; speed on all banks."""

from __future__ import annotations

import time

from shoparena.arena.gate import PhraseIndex, check_submission
from shoparena.arena.gate.phrases import canonical, words
from tests.gate import agent, bank_index, bank_problems, problem


def test_index_holds_every_gt_id_and_maps_it_to_a_problem() -> None:
    index = bank_index()
    ids = {i for p in bank_problems() for i in p.gt_ids()}
    assert set(index.ids) == ids and len(ids) > 1500
    assert index.ids[problem("knowledge").gt_ids()[0]] == problem("knowledge").problem_id


def test_template_shingles_are_boilerplate_but_problem_text_is_not() -> None:
    index = bank_index()
    assert index.phrases_in("The voucher only applies to the products from the same shop.") == []
    (hit,) = index.phrases_in("Looking for a 12 inch heavy-duty rubber wheel for a pushcart.")
    assert hit.phrase == "looking for a 12 inch heavy duty rubber wheel for a pushcart"


def test_six_words_are_not_enough_below_thirty_characters() -> None:
    index = PhraseIndex.from_problems([problem("product").model_copy(update={"query": "a bb cc dd ee ff gg hh"})])
    assert index.phrases_in("a bb cc dd ee ff") == []  # 6 words, 16 characters
    assert index.phrases_in("x a bb cc dd ee ff gg hh y") == []  # 8 words, 22 characters


def test_normalisation() -> None:
    assert canonical("Ｌｏｏｋｉｎｇ  FOR\u200b a T-Shirt!") == "looking for a t shirt"
    assert [w for w, _, _ in words("eu:30 — 4/4")] == ["eu", "30", "4", "4"]


def test_fragments_title_fragments_and_pairs() -> None:
    index = bank_index()
    assert index.fragment("B20 cast bronze crash cymbals") is not None
    assert index.fragment("free shipping and cash on delivery") is None
    assert index.fragment("stainless steel water bottle") is None  # 4 words: too short to be evidence
    assert index.title_fragment("cinnamoroll kuromi") is not None
    assert index.title_fragment("arborea") is None  # one plain word says nothing
    assert index.title_fragment("stainless steel") is None and index.title_fragment("phone case") is None
    assert index.pair_problem("hybrid ghost", "arborea") is not None
    assert index.pair_problem("cheap", "budget") is None


def test_indexing_all_banks_and_checking_a_large_file_are_fast() -> None:
    problems = bank_problems()
    start = time.perf_counter()
    index = PhraseIndex.from_problems(problems)
    build = time.perf_counter() - start
    body = "\n".join(f"def f{i}(query):\n    words = query.lower().split()\n    return [w for w in words if "
                     f"len(w) > {i % 7}]  # helper {i}" for i in range(6000))
    code = agent(body)
    assert 400_000 < len(code) < 1_000_000
    start = time.perf_counter()
    report = check_submission(code, phrases=index)
    elapsed = time.perf_counter() - start
    assert report.accepted
    assert build < 5.0 and elapsed < 10.0  # generous bounds for a loaded CI machine
