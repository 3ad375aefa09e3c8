"""The memory-mapped BM25 index: open it, look documents up, and search it (evaluation in :mod:`.query`).

Scores are bit-identical to Lucene's BM25 (see :mod:`shoparena.catalog.bm25`) and rank by
``(score desc, product id asc)`` — Anserini's ``BREAK_SCORE_TIES_BY_DOCID`` sort. Filters (shop, price range,
required services) are boolean masks over the candidates' document columns, so a selective filter never turns
into a fetch-then-filter loop; the upstream hit cap (``CAPACITY``) is reproduced exactly.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from shoparena.catalog import query
from shoparena.catalog.analysis import ANALYZER_ID
from shoparena.catalog.index_build import INDEX_FORMAT, META_FILE, build_index
from shoparena.catalog.query import MAX_CLAUSES, Hits, TooManyClauses
from shoparena.catalog.tables import HashLookup, StringTable
from shoparena.catalog.types import Product
from shoparena.errors import IndexFormatError, NotFoundError

__all__ = ["MAX_CLAUSES", "DocFilter", "Hits", "SearchIndex", "TooManyClauses"]

_LOW32 = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class DocFilter:
    """Filters applied inside the index. ``shop`` is a shop code (-1: an unknown shop, matches nothing)."""

    shop: int | None = None
    price_lo: float | None = None
    price_hi: float | None = None
    services: int = 0

    def active(self) -> bool:
        return self.shop is not None or self.price_lo is not None or self.price_hi is not None or self.services != 0


class SearchIndex(Sequence[Product]):
    """A read-only, memory-mapped index; also a lazy ``Sequence[Product]`` in document order."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        meta_path = self.path / META_FILE
        if not meta_path.exists():
            raise NotFoundError(
                f"no search index at {self.path}",
                hint="build one with `shoparena catalog generate` or `shoparena catalog import`",
            )
        self.meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
        if self.meta.get("format") != INDEX_FORMAT or self.meta.get("analyzer") != ANALYZER_ID:
            raise IndexFormatError(
                f"index at {self.path} has format {self.meta.get('format')!r} / analyzer "
                f"{self.meta.get('analyzer')!r}; this shoparena reads {INDEX_FORMAT!r} / {ANALYZER_ID!r}",
                hint="rebuild the index from its documents file",
            )
        try:
            self._open_files()
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"index at {self.path} is incomplete or corrupt: {exc}",
                                   hint="rebuild the index") from exc
        self._local = threading.local()
        self.term_id = functools.lru_cache(maxsize=1 << 16)(self._term_id)
        """The term id of an analyzed term, or -1 (cached: queries repeat their vocabulary)."""
        self.capacity_key = functools.lru_cache(maxsize=256)(self._capacity_key)
        """``(clauses, capacity) ->`` the rank key of the ``capacity``-th unfiltered hit (0: fewer hits). Cached:
        agents page through, and re-filter, the same query text."""

    def _open_files(self) -> None:
        p = self.path

        def arr(name: str) -> np.ndarray:
            # a plain ndarray view of the mapping: slicing a np.memmap costs a subclass round trip per call
            return np.load(p / f"{name}.npy", mmap_mode="r").view(np.ndarray)

        self.term_offsets = arr("term.off")
        self.post_docs = arr("post.doc")
        self.post_tf = arr("post.tf")
        self.post_x = arr("post.x")
        self.idf = arr("idf")
        self.term_max_x = arr("term.maxx")
        self.norms = arr("norm")
        self.doc_lengths = arr("dl")
        self.prices = arr("price")
        self.sold_counts = arr("sold")
        self.services = arr("service")
        self.shop_codes = arr("shop")
        self.shop_offsets = arr("shopdocs.off")
        self.shop_docs = arr("shopdocs.docs")
        self.tiebreak = arr("tiebreak")
        self._terms = StringTable(p, "terms")
        self._term_lookup = HashLookup(p, "terms", self._terms)
        self._pids = StringTable(p, "pid")
        self._pid_lookup = HashLookup(p, "pid", self._pids)
        self._shops = StringTable(p, "shop")
        self._shop_lookup = HashLookup(p, "shop", self._shops)
        self._raw = StringTable(p, "raw")
        self._find = StringTable(p, "find")
        n = int(self.meta["n_docs"])
        sizes = {len(self.norms), len(self.prices), len(self.shop_codes), len(self.tiebreak), len(self._raw),
                 len(self._find), len(self._pids)}
        if sizes != {n} or len(self.term_offsets) != int(self.meta["n_terms"]) + 1 or \
                len(self.post_docs) != int(self.meta["n_postings"]):
            raise ValueError("array sizes disagree with meta.json")

    def warm(self) -> int:
        """Touch every page of the postings and document columns so the first queries do not pay page faults
        (a serving process calls this once at start). Returns the number of bytes read."""
        total = 0
        for arr in (self.post_docs, self.post_x, self.term_offsets, self.idf, self.term_max_x, self.prices,
                    self.shop_codes, self.services, self.tiebreak, self._term_lookup.hashes, self._pid_lookup.hashes):
            step = max(1, 4096 // max(1, arr.itemsize))
            if len(arr):
                np.add.reduce(arr[::step], dtype=np.float64)
            total += arr.nbytes
        return total

    # ---- construction ----------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SearchIndex:
        return cls(path)

    @classmethod
    def build(cls, docs: Any, out_dir: str | os.PathLike[str], **kwargs: Any) -> SearchIndex:
        """Index Products or loader documents into ``out_dir`` and open the result (see :func:`build_index`)."""
        return cls(build_index(docs, out_dir, **kwargs))

    # ---- documents -------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.meta["n_docs"])

    def __getitem__(self, doc: int) -> Product:  # type: ignore[override]
        if isinstance(doc, slice):
            raise TypeError("SearchIndex supports integer indexing only")
        if doc < 0:
            doc += len(self)
        if not 0 <= doc < len(self):
            raise IndexError(doc)
        return Product.model_construct(**orjson.loads(self._raw[doc]))

    def __iter__(self) -> Iterator[Product]:
        for doc in range(len(self)):
            yield self[doc]

    def doc_of(self, product_id: str) -> int:
        """The doc number of ``product_id`` (exact string), or -1."""
        return self._pid_lookup.find(product_id.encode("utf-8"))

    def get(self, product_id: str) -> Product | None:
        doc = self.doc_of(product_id)
        return None if doc < 0 else self[doc]

    def raw_json(self, doc: int) -> bytes:
        """The upstream product record of ``doc`` as JSON bytes."""
        return self._raw[doc]

    def find_json(self, doc: int) -> bytes:
        """The ``find_product`` result item of ``doc`` as JSON bytes."""
        return self._find[doc]

    def product_id(self, doc: int) -> str:
        return self._pids[doc].decode("utf-8")

    def shop_code(self, shop_id: str) -> int:
        """The shop code of ``shop_id`` (exact string), or -1."""
        return self._shop_lookup.find(shop_id.encode("utf-8"))

    def shop_id(self, code: int) -> str:
        return self._shops[code].decode("utf-8")

    @property
    def catalog_sha256(self) -> str:
        """Content hash of the indexed product records (provenance for scores and trajectories)."""
        return str(self.meta["catalog_sha256"])

    # ---- scoring (see shoparena.catalog.query) --------------------------------------------------------
    def _term_id(self, term: str) -> int:
        return self._term_lookup.find(term.encode("utf-8"))

    def accumulator(self) -> np.ndarray:
        """This thread's dense score accumulator (all zeros between queries)."""
        acc = getattr(self._local, "acc", None)
        if acc is None:
            acc = self._local.acc = np.zeros(len(self), dtype=np.float64)
        return acc

    def slots(self) -> np.ndarray:
        """This thread's dense doc → candidate-slot map (all zeros between uses)."""
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = np.zeros(len(self), dtype=np.int32)
        return slot

    def rank_keys(self, docs: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """One uint64 per document ordering like Pyserini: float32 score bits above, inverted id rank below."""
        return (scores.astype(np.float32).view(np.uint32).astype(np.uint64) << np.uint64(32)) | \
            (_LOW32 - self.tiebreak[docs].astype(np.uint64))

    def filter_mask(self, docs: np.ndarray, flt: DocFilter) -> np.ndarray:
        """Which of ``docs`` pass ``flt`` (vectorised over the document columns)."""
        keep = np.ones(len(docs), dtype=bool)
        if flt.shop is not None:
            keep &= self.shop_codes[docs] == flt.shop
        if flt.price_lo is not None or flt.price_hi is not None:
            prices = self.prices[docs]
            if flt.price_lo is not None:
                keep &= prices >= flt.price_lo
            if flt.price_hi is not None:
                keep &= prices <= flt.price_hi
        if flt.services:
            keep &= (self.services[docs] & np.uint8(flt.services)) == flt.services
        return keep

    def shop_members(self, shop: int) -> np.ndarray:
        """The doc numbers of shop code ``shop``, ascending."""
        return self.shop_docs[int(self.shop_offsets[shop]):int(self.shop_offsets[shop + 1])]

    def _capacity_key(self, terms: tuple[str, ...], capacity: int) -> int:
        docs, scores = query.score_all(self, terms)
        if len(docs) <= capacity:
            return 0
        keys = self.rank_keys(docs, scores)
        return int(np.partition(keys, len(keys) - capacity)[len(keys) - capacity])

    def score_all(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every document matching any of ``terms`` (analyzed; duplicates boost) and its float32 score."""
        return query.score_all(self, terms)

    def search(self, terms: Sequence[str], *, k: int = 50, flt: DocFilter | None = None,
               capacity: int | None = None, prune: bool = True) -> Hits:
        """The top ``k`` documents for analyzed query ``terms`` passing ``flt``, ranked like Pyserini.

        ``capacity`` reproduces upstream's ``searcher.search(q, k=CAPACITY)`` then filter: a document is eligible
        only if it ranks within the top ``capacity`` of the unfiltered result. ``prune=False`` scores every
        matching document (the exhaustive reference the MaxScore path is tested against).
        """
        return query.search(self, terms, k=k, flt=flt, capacity=capacity, prune=prune)
