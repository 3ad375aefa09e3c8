"""Lucene's BM25 arithmetic, bit for bit (``BM25Similarity`` + ``SmallFloat`` of Lucene 9; docs/shoppingbench.md §1.3).

What Pyserini scores with, reproduced in float32 exactly as Lucene computes it:

- document length ``dl`` is the number of indexed tokens, stored lossily in one byte
  (``SmallFloat.intToByte4``: exact below 24, then 4 significant bits) and decoded with ``byte4ToInt``;
- ``avgdl = (float)(sumTotalTermFreq / (double) docCount)`` where ``docCount`` counts documents with at least one
  token in the field;
- ``idf = (float) ln(1 + (docCount − df + 0.5) / (df + 0.5))`` (double inside, float out);
- ``normInverse[byte] = 1f / (k1 · ((1 − b) + b · dl / avgdl))`` in float;
- a term's score is ``w − w / (1 + tf · normInverse)`` with ``w = boost · idf`` in float, ``boost`` being the
  number of times the term occurs in the query (Anserini's bag-of-words query);
- a document's score is the double-precision sum of its term scores, cast to float.
"""

from __future__ import annotations

import math

import numpy as np

K1 = 0.9
"""Pyserini's default ``k1`` (never overridden upstream or in ORO)."""
B = 0.4
"""Pyserini's default ``b``."""


def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()
    if num_bits < 4:
        return i
    shift = num_bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)  # = 24


def int_to_byte4(length: int) -> int:
    """``SmallFloat.intToByte4``: the one-byte norm of a field length."""
    if length < 0:
        raise ValueError("a field length is never negative")
    if length < _NUM_FREE_VALUES:
        return length
    return _NUM_FREE_VALUES + _long_to_int4(length - _NUM_FREE_VALUES)


def byte4_to_int(norm: int) -> int:
    """``SmallFloat.byte4ToInt``: the length Lucene scores with for a stored norm byte."""
    if norm < _NUM_FREE_VALUES:
        return norm
    return _NUM_FREE_VALUES + _int4_to_long(norm - _NUM_FREE_VALUES)


#: ``BM25Similarity.LENGTH_TABLE``: decoded length of every norm byte, as float32.
LENGTH_TABLE = np.array([byte4_to_int(i) for i in range(256)], dtype=np.float32)
#: norm byte of every length up to 4096 (longer lengths go through :func:`int_to_byte4`).
_ENCODE_TABLE = np.array([int_to_byte4(i) for i in range(4097)], dtype=np.uint8)


def encode_lengths(lengths: np.ndarray) -> np.ndarray:
    """Vectorised :func:`int_to_byte4` over an integer array of field lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = _ENCODE_TABLE[np.minimum(lengths, 4096)]
    big = lengths > 4096
    if big.any():
        out[big] = [int_to_byte4(int(v)) for v in lengths[big]]
    return out


def avgdl(sum_total_term_freq: int, doc_count: int) -> np.float32:
    """``BM25Similarity.avgFieldLength``."""
    if doc_count <= 0:
        return np.float32(1.0)
    return np.float32(sum_total_term_freq / float(doc_count))


def idf(doc_freq: np.ndarray | int, doc_count: int) -> np.ndarray:
    """``BM25Similarity.idf`` for one or many document frequencies (float64 inside, float32 out)."""
    df = np.asarray(doc_freq, dtype=np.float64)
    return np.log(1.0 + (doc_count - df + 0.5) / (df + 0.5)).astype(np.float32)


def idf_scalar(doc_freq: int, doc_count: int) -> np.float32:
    """Scalar form of :func:`idf` using ``math.log`` like Java's ``Math.log(1 + x)``."""
    return np.float32(math.log(1 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5)))


def norm_inverse_cache(k1: float, b: float, avg_dl: np.float32) -> np.ndarray:
    """``BM25Similarity.scorer``'s 256-entry cache ``1f / (k1 * ((1 - b) + b * LENGTH_TABLE[i] / avgdl))``."""
    k1f, bf, avg = np.float32(k1), np.float32(b), np.float32(avg_dl)
    one_minus_b = np.float32(np.float32(1.0) - bf)
    with np.errstate(divide="ignore"):
        denom = k1f * (one_minus_b + (bf * LENGTH_TABLE) / avg)
        return (np.float32(1.0) / denom).astype(np.float32)


def term_scores(weight: np.float32, tf_norm_inverse: np.ndarray) -> np.ndarray:
    """``BM25Scorer.score``: ``weight - weight / (1f + freq * normInverse)`` given ``freq * normInverse``."""
    w = np.float32(weight)
    return w - w / (np.float32(1.0) + tf_norm_inverse)
