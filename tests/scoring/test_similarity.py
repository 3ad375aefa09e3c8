"""Title similarity backends (docs/shoppingbench.md §7.8)."""

from __future__ import annotations

import builtins
import itertools
import math
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from shoparena.catalog.types import Product
from shoparena.errors import ConfigError
from shoparena.scoring.similarity import (
    EmbeddingSimilarity,
    LexicalSimilarity,
    PrecomputedSimilarity,
    SentenceTransformerEncoder,
    TitleSimilarity,
    get_similarity,
    normalize_title,
    similarity_names,
)
from shoparena.tasks.types import Problem

LEX = LexicalSimilarity()


class HashTrigramEncoder:
    """A tiny deterministic local encoder: hashed character-trigram counts in 64 dimensions."""

    name = "hash-trigram-64"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f" {text.lower()} "
            for i in range(len(padded) - 2):
                out[row, zlib.crc32(padded[i:i + 3].encode()) % 64] += 1
        return out


class TableEncoder:
    """Looks texts up in a table of stored vectors (e.g. a suite's ``reward_title_embeddings``)."""

    name = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


# ------------------------------------------------------------------------------------------------ lexical

def test_lexical_exact_after_normalisation_is_one_shoppingbench_7_8() -> None:
    assert normalize_title("  Red \t SHOE\n") == "red shoe"
    assert LEX.similarity("  Red   SHOE ", "red shoe") == 1.0
    assert LEX.similarity("Straße", "STRASSE") == 1.0  # casefold, not lower


def test_lexical_hand_computed_plural_shoppingbench_7_8() -> None:
    # words {red, shoe}·{red, shoes}: 1/(√2·√2) = 0.5
    # trigrams of " red shoe " (8 distinct) and " red shoes " (9 distinct) share 7: 7/√72
    expected = 0.5 * 0.5 + 0.5 * 7 / math.sqrt(72)
    assert LEX.similarity("red shoe", "red shoes") == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.662479, abs=1e-6)


def test_lexical_hand_computed_repeated_words_shoppingbench_7_8() -> None:
    # words {aa:2}·{aa:1}: cosine 1; trigrams {" aa":2, "aa ":2, "a a":1}·{" aa":1, "aa ":1} = 4/(3·√2)
    assert LEX.similarity("aa aa", "aa") == pytest.approx(0.5 + 0.5 * 4 / (3 * math.sqrt(2)), abs=1e-12)


def test_lexical_unrelated_is_zero_and_empty_is_zero_shoppingbench_7_8() -> None:
    assert LEX.similarity("blue cup", "red shoe") == 0.0
    assert LEX.similarity("", "red shoe") == 0.0
    assert LEX.similarity("", "  ") == 1.0


def test_lexical_is_symmetric_and_bounded_shoppingbench_7_8(tiny_products: list[Product]) -> None:
    titles = [p.title for p in tiny_products]
    for a, b in itertools.combinations(titles, 2):
        v = LEX.similarity(a, b)
        assert 0.0 <= v <= 1.0
        assert v == pytest.approx(LEX.similarity(b, a))


def test_lexical_calibration_unrelated_far_below_half_shoppingbench_7_8(tiny_products: list[Product]) -> None:
    worst = max(LEX.similarity(a.title, b.title) for a, b in itertools.combinations(tiny_products, 2))
    assert worst < 0.4


@pytest.mark.parametrize(("candidate", "gt"), [
    ("Hyco Chili Powder 1 kilo", "Hyco Chili Powder1 kilo"),
    ("Heavy Duty Pushcart Solid Rubber Wheel Steel Body 6/8/10/12 Inches",
     "Heavy Duty Pushcart Solid Rubber Wheel Steel Body 6/8/10/12 Inches Mold-On Rubber Wheel"),
    ("Sakura Craypas Junior Artist 50 Colors Oil Pastel", "Sakura Craypas Junior artist 50 colors"),
])
def test_lexical_calibration_minor_edits_reach_strict_threshold_shoppingbench_7_8(candidate: str, gt: str) -> None:
    # tiny-catalog titles against the real upstream GT titles of the same products
    assert LEX.similarity(candidate, gt) >= 0.7


# ----------------------------------------------------------------------------------------------- registry

def test_registry_names_and_default_shoppingbench_7_8() -> None:
    assert set(similarity_names()) >= {"lexical", "embedding", "precomputed"}
    assert get_similarity().name == "lexical"
    assert get_similarity("lexical").name == "lexical"
    assert isinstance(get_similarity("lexical"), TitleSimilarity)


def test_registry_unknown_name_suggests_closest_shoppingbench_7_8() -> None:
    with pytest.raises(ConfigError) as err:
        get_similarity("lexicl")
    assert "lexical" in (err.value.hint or "")


def test_registry_embedding_names_default_model_and_loads_lazily_shoppingbench_7_8() -> None:
    backend = get_similarity("embedding")
    assert backend.name == "embedding:Qwen/Qwen3-Embedding-0.6B"
    assert get_similarity("embedding:/models/qwen").name == "embedding:/models/qwen"
    assert get_similarity("precomputed").name == "precomputed:Qwen/Qwen3-Embedding-0.6B"
    assert backend.similarity("same", "same") == 1.0  # identical titles need no model


def test_missing_sentence_transformers_is_config_error_with_hint_shoppingbench_7_8(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_st(name: str, *args: object, **kw: object) -> object:
        if name.startswith("sentence_transformers"):
            raise ImportError("no sentence_transformers")
        return real_import(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_st)
    enc = SentenceTransformerEncoder()
    with pytest.raises(ConfigError) as err:
        enc.encode(["a"])
    assert "shoparena[embed]" in (err.value.hint or "")


# ------------------------------------------------------------------------------------------------ encoders

def test_embedding_backend_is_cosine_of_normalised_vectors_and_caches_shoppingbench_7_8() -> None:
    enc = HashTrigramEncoder()
    sim = EmbeddingSimilarity(enc)
    a, b = "violin bow", "violin bows"
    va, vb = enc.encode([a, b])
    expected = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
    enc.calls.clear()
    assert sim.similarity(a, b) == pytest.approx(expected, abs=1e-6)
    assert sim.similarity(b, a) == pytest.approx(expected, abs=1e-6)
    assert enc.calls == [[a, b]]  # the second call hit the cache
    assert sim.name == "embedding:hash-trigram-64"


def test_precomputed_gt_vector_against_itself_is_one_shoppingbench_7_8(suite_v2: list[Problem]) -> None:
    problem = suite_v2[0]
    gt = problem.reward[0].title[0]
    sim = PrecomputedSimilarity(HashTrigramEncoder())
    vec = sim.gt_embedding(gt, problem)
    assert vec is not None and vec.dtype == np.float32 and vec.shape == (1024,)
    assert float(vec @ vec) == pytest.approx(1.0, abs=1e-6)
    assert sim.similarity(gt, gt, problem=problem) == 1.0  # exact title: no model call


def test_precomputed_uses_stored_gt_vector_with_candidate_encoder_shoppingbench_7_8(
    suite_v2: list[Problem],
) -> None:
    # the candidate is another problem's GT title; the table encoder returns its stored Qwen3 vector
    p1, p2 = suite_v2[0], suite_v2[1]
    gt, other = p1.reward[0].title[0], p2.reward[0].title[0]
    assert p2.reward_title_embeddings is not None and p1.reward_title_embeddings is not None
    sim = PrecomputedSimilarity(TableEncoder(p2.reward_title_embeddings))
    u = np.asarray(p2.reward_title_embeddings[other], dtype=np.float32)
    v = np.asarray(p1.reward_title_embeddings[gt], dtype=np.float32)
    expected = float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))
    assert sim.similarity(other, gt, problem=p1) == pytest.approx(expected, abs=1e-5)
    assert sim.name == "precomputed:table"


def test_precomputed_falls_back_without_stored_vectors_shoppingbench_7_8(
    upstream_problems: dict[str, list[Problem]],
) -> None:
    problem = upstream_problems["product"][2]  # upstream problems carry no embeddings
    gt = problem.reward[0].title[0]
    sim = PrecomputedSimilarity(HashTrigramEncoder(), fallback=LexicalSimilarity())
    cand = "Hyco Chili Powder 1 kilo"
    assert sim.similarity(cand, gt, problem=problem) == LEX.similarity(cand, gt)
    assert sim.similarity(cand, gt) == LEX.similarity(cand, gt)


def test_precomputed_dimension_mismatch_is_config_error_shoppingbench_7_8(suite_v2: list[Problem]) -> None:
    problem = suite_v2[0]
    sim = PrecomputedSimilarity(HashTrigramEncoder())  # 64-d candidate vs 1024-d stored
    with pytest.raises(ConfigError):
        sim.similarity("something else", problem.reward[0].title[0], problem=problem)
