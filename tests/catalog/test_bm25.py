"""Lucene's norm encoding and BM25 arithmetic (docs/shoppingbench.md §1.3), golden values computed by hand."""

from __future__ import annotations

import numpy as np

from shoparena.catalog import bm25


def test_small_float_norms_are_exact_below_24_then_keep_4_significant_bits() -> None:
    assert [bm25.int_to_byte4(i) for i in range(25)] == list(range(25))
    # 24 + longToInt4(n - 24): 32 -> 24 + 8 = 32; 40 and 41 share 24 + 16 = 40 (one extra bit of shift).
    assert bm25.int_to_byte4(32) == 32
    assert bm25.int_to_byte4(40) == bm25.int_to_byte4(41) == 40
    assert bm25.byte4_to_int(40) == 40
    assert bm25.byte4_to_int(bm25.int_to_byte4(41)) == 40
    # 100: 24 + longToInt4(76); 76 = 0b1001100 -> shift 3, mantissa 0b1001 -> 0b001 | 4 << 3 = 33 -> byte 57.
    assert bm25.int_to_byte4(100) == 57
    assert bm25.byte4_to_int(57) == 24 + (0b1001 << 3) == 96
    assert bm25.byte4_to_int(255) > 2_000_000_000
    lengths = np.array([0, 5, 23, 24, 41, 100, 5000, 70000])
    assert bm25.encode_lengths(lengths).tolist() == [bm25.int_to_byte4(int(v)) for v in lengths]


def test_idf_and_term_score_follow_lucene() -> None:
    # idf = ln(1 + (N - n + 0.5) / (n + 0.5)); N = 10, n = 2 -> ln(1 + 8.5 / 2.5) = ln(4.4)
    assert bm25.idf(2, 10) == np.float32(np.log(4.4))
    assert bm25.idf_scalar(2, 10) == np.float32(np.log(4.4))
    # normInverse for dl == avgdl is 1 / k1 exactly as float: 1f / (0.9f * (0.6f + 0.4f * 10f / 10f))
    cache = bm25.norm_inverse_cache(0.9, 0.4, np.float32(10.0))
    f = np.float32
    assert cache[10] == f(1.0) / (f(0.9) * ((f(1.0) - f(0.4)) + (f(0.4) * f(10.0)) / f(10.0)))
    # a term score is weight * tf / (tf + 1/normInverse) written as w - w / (1 + tf * normInverse)
    w = f(2.0)
    x = np.array([f(1.0) * cache[10]], dtype=np.float32)
    assert bm25.term_scores(w, x)[0] == w - w / (f(1.0) + x[0])
    assert abs(float(bm25.term_scores(w, x)[0]) - 2.0 * 1 / (1 + 0.9)) < 1e-6
