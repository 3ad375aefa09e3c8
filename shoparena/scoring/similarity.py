"""Title similarity backends for the ``title`` axis (docs/shoppingbench.md §7.2, §7.8).

Every backend implements :class:`TitleSimilarity` (``name`` plus ``similarity(candidate, gt, problem=)``)
and is registered by name; :func:`get_similarity` takes a spec ``name[:argument]``:

``lexical`` (default, deterministic, offline)
    Titles are normalised: ``casefold()``, whitespace runs collapsed to one space, stripped. Equal normalised
    titles score **1.0**. Otherwise, with ``W(s)`` the count vector of word tokens (regex ``\\w+``) of the
    normalised title and ``T(s)`` the count vector of character trigrams of ``" " + normalised + " "``::

        lexical(a, b) = 0.5 · cos(W(a), W(b)) + 0.5 · cos(T(a), T(b))

    where ``cos(u, v) = u·v / (|u|·|v|)`` (0 when either vector is empty). The word term rewards shared
    words, the trigram term tolerates small edits (``"Powder1"`` vs ``"Powder 1"``, plurals). Unrelated
    titles land near 0–0.2; the same product with minor edits lands ≥ 0.7.

``embedding[:<path-or-name>]``
    Cosine of L2-normalised sentence-transformers embeddings (default ``Qwen/Qwen3-Embedding-0.6B``, the model
    upstream and ORO use). The model is loaded from a local path or the local Hugging Face cache only, with
    ``HF_HUB_OFFLINE=1`` (never downloaded). Needs the ``[embed]`` extra. Embeddings are cached by text.

``precomputed[:<path-or-name>]``
    For the GT side, a problem's stored ``reward_title_embeddings`` (ORO suites v2+, float32); for the
    candidate side, the embedding model. Identical titles short-circuit to 1.0 without a model. Problems
    without stored vectors fall back to a backend (default: the same embedding model).

Every backend returns exactly 1.0 for byte-identical titles. The backend's ``name`` is recorded on every
score. Upstream compares ``similarity(product title, GT title)`` in that argument order.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import regex

from shoparena.errors import ConfigError
from shoparena.registry import Registry

if TYPE_CHECKING:
    from shoparena.tasks.types import Problem

DEFAULT_EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-0.6B"
EMBED_HINT = "install the optional extra: pip install 'shoparena[embed]'"

_WORD_RE = regex.compile(r"\w+")
_SPACE_RE = regex.compile(r"\s+")


@runtime_checkable
class TitleSimilarity(Protocol):
    """Similarity in [0, 1] of a candidate product title to a GT title."""

    name: str

    def similarity(self, candidate: str, gt: str, *, problem: Problem | None = None) -> float: ...


@runtime_checkable
class Encoder(Protocol):
    """Text → embedding matrix (one row per text). Rows need not be normalised."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


# ----------------------------------------------------------------------------------------------- lexical

def normalize_title(title: str) -> str:
    """casefold, collapse whitespace runs to one space, strip."""
    return _SPACE_RE.sub(" ", title.casefold()).strip()


def _cosine_counts(a: Counter[str], b: Counter[str]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(n * b[k] for k, n in a.items() if k in b)
    return dot / (math.sqrt(sum(n * n for n in a.values())) * math.sqrt(sum(n * n for n in b.values())))


def _trigrams(norm: str) -> Counter[str]:
    padded = f" {norm} "
    return Counter(padded[i:i + 3] for i in range(len(padded) - 2))


class LexicalSimilarity:
    """The deterministic offline default (formula in the module docstring)."""

    name = "lexical"
    word_weight = 0.5

    def similarity(self, candidate: str, gt: str, *, problem: Problem | None = None) -> float:
        a, b = normalize_title(candidate), normalize_title(gt)
        if a == b:
            return 1.0
        if not a or not b:
            return 0.0
        words = _cosine_counts(Counter(_WORD_RE.findall(a)), Counter(_WORD_RE.findall(b)))
        grams = _cosine_counts(_trigrams(a), _trigrams(b))
        return min(1.0, self.word_weight * words + (1 - self.word_weight) * grams)


# --------------------------------------------------------------------------------------------- embedding

def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


class SentenceTransformerEncoder:
    """A sentence-transformers model from a local path or the local HF cache, loaded on first use, offline."""

    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, *, device: str | None = None) -> None:
        self.name = model
        self.device = device
        self._model: object | None = None

    def _load(self) -> object:
        if self._model is not None:
            return self._model
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError("the embedding similarity needs sentence-transformers", hint=EMBED_HINT) from exc
        path = Path(self.name).expanduser()
        source = str(path) if path.exists() else self.name
        try:
            self._model = SentenceTransformer(source, device=self.device, local_files_only=True,
                                              model_kwargs={"torch_dtype": "float32"})
        except Exception as exc:
            raise ConfigError(
                f"cannot load embedding model {self.name!r} from a local path or the local cache: {exc}",
                hint="pass a local model directory (embedding:/path/to/model); models are never downloaded",
            ) from exc
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        out = model.encode(list(texts), convert_to_numpy=True, normalize_embeddings=True)  # type: ignore[attr-defined]
        return np.asarray(out, dtype=np.float32)


class _EmbeddingCache:
    """Unit-normalised embeddings by text, bounded (oldest entries evicted first)."""

    def __init__(self, encoder: Encoder, max_size: int = 100_000) -> None:
        self.encoder = encoder
        self.max_size = max_size
        self._cache: dict[str, np.ndarray] = {}

    def get(self, texts: Sequence[str]) -> list[np.ndarray]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            rows = _unit(self.encoder.encode(missing))
            if rows.shape[0] != len(missing):
                raise ConfigError(f"encoder {self.encoder.name!r} returned {rows.shape[0]} rows for "
                                  f"{len(missing)} texts")
            for text, row in zip(missing, rows, strict=True):
                if len(self._cache) >= self.max_size:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[text] = row
        return [self._cache[t] for t in texts]


def _cos(u: np.ndarray, v: np.ndarray) -> float:
    if u.shape != v.shape:
        raise ConfigError(f"embedding dimensions differ ({u.shape[-1]} vs {v.shape[-1]})",
                          hint="stored reward_title_embeddings come from Qwen/Qwen3-Embedding-0.6B (1024-d)")
    return float(np.clip(np.dot(u, v), -1.0, 1.0))


class EmbeddingSimilarity:
    """Cosine of normalised embeddings from an :class:`Encoder` (cached by text)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name = f"embedding:{encoder.name}"
        self._cache = _EmbeddingCache(encoder)

    def similarity(self, candidate: str, gt: str, *, problem: Problem | None = None) -> float:
        if candidate == gt:
            return 1.0
        u, v = self._cache.get([candidate, gt])
        return _cos(u, v)


class PrecomputedSimilarity:
    """GT side from ``problem.reward_title_embeddings``, candidate side from ``encoder``; else ``fallback``."""

    def __init__(self, encoder: Encoder, *, fallback: TitleSimilarity | None = None) -> None:
        self.encoder = encoder
        self.fallback = fallback if fallback is not None else EmbeddingSimilarity(encoder)
        self.name = f"precomputed:{encoder.name}"
        self._cache = _EmbeddingCache(encoder)
        self._stored: dict[tuple[str, str], np.ndarray] = {}

    def gt_embedding(self, gt: str, problem: Problem | None) -> np.ndarray | None:
        """The stored, unit-normalised float32 vector of ``gt`` for ``problem``, or None."""
        stored = problem.reward_title_embeddings if problem is not None else None
        if not stored or gt not in stored:
            return None
        key = (problem.problem_id, gt)  # type: ignore[union-attr]
        if key not in self._stored:
            self._stored[key] = _unit(np.asarray(stored[gt], dtype=np.float32))[0]
        return self._stored[key]

    def similarity(self, candidate: str, gt: str, *, problem: Problem | None = None) -> float:
        if candidate == gt:
            return 1.0
        gt_vec = self.gt_embedding(gt, problem)
        if gt_vec is None:
            return self.fallback.similarity(candidate, gt, problem=problem)
        (cand_vec,) = self._cache.get([candidate])
        return _cos(cand_vec, gt_vec)


# ---------------------------------------------------------------------------------------------- registry

SimilarityFactory = Callable[[str | None], TitleSimilarity]
SIMILARITIES: Registry[SimilarityFactory] = Registry(
    "similarity backend", error=ConfigError, usage="lexical, embedding[:<model>] or precomputed[:<model>]")
"""Backend name → factory ``(argument or None) -> TitleSimilarity``."""


def register_similarity(name: str) -> Callable[[SimilarityFactory], SimilarityFactory]:
    """Register a factory ``(argument or None) -> TitleSimilarity`` under ``name``."""
    return SIMILARITIES.register(name)


def similarity_names() -> tuple[str, ...]:
    return tuple(SIMILARITIES.names())


def get_similarity(spec: str | None = None) -> TitleSimilarity:
    """A backend from ``name[:argument]`` (``lexical``, ``embedding:/models/qwen3``, ``precomputed``)."""
    name, _, arg = (spec or "lexical").partition(":")
    return SIMILARITIES.get(name)(arg or None)


@register_similarity("lexical")
def _lexical(arg: str | None) -> TitleSimilarity:
    if arg:
        raise ConfigError("the lexical similarity takes no argument", hint="use --similarity lexical")
    return LexicalSimilarity()


@register_similarity("embedding")
def _embedding(arg: str | None) -> TitleSimilarity:
    return EmbeddingSimilarity(SentenceTransformerEncoder(arg or DEFAULT_EMBEDDING_MODEL))


@register_similarity("precomputed")
def _precomputed(arg: str | None) -> TitleSimilarity:
    return PrecomputedSimilarity(SentenceTransformerEncoder(arg or DEFAULT_EMBEDDING_MODEL))
