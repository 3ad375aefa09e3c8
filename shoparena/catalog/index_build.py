"""Building the on-disk BM25 index: analysis, postings, norms, document columns (format ``shoparena-bm25/3``).

The index is a directory of flat files, written to a temporary sibling and renamed into place (a reader never
sees half an index):

- ``meta.json`` — format, analyzer id, k1/b, collection statistics, catalog hash, tie-break rule;
- postings in term order: ``term.off.npy`` (int64, V+1), ``post.doc.npy`` (int32 doc numbers ascending within a
  term), ``post.tf.npy`` (term frequency), ``post.x.npy`` (float32 ``tf · normInverse[norm[doc]]``, exactly the
  product Lucene computes at query time), ``idf.npy`` (float32 per term), ``term.maxx.npy`` (the largest ``x`` of
  each term, which bounds its score for MaxScore pruning);
- the vocabulary ``terms.bin``/``terms.off.npy`` with its hash lookup ``terms.hash.npy``/``terms.row.npy``;
- per-document columns: ``norm.npy`` (Lucene's one-byte length), ``dl.npy``, ``price.npy``, ``sold.npy``,
  ``service.npy`` (bit mask over SERVICE_CODES), ``shop.npy`` (shop code), ``tiebreak.npy`` (rank of the
  product id in byte order: Anserini sorts score ties by the collection docid string), and each shop's documents
  (``shopdocs.off.npy`` / ``shopdocs.docs.npy``, doc numbers ascending) for shop-filtered queries;
- records: ``raw.bin`` (the upstream product JSON) and ``find.bin`` (the pre-serialised ``find_product`` item),
  product and shop id tables with hash lookups.

Documents keep their input order as doc numbers (Lucene's insertion order).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from shoparena import __version__
from shoparena.catalog import bm25
from shoparena.catalog.analysis import ANALYZER_ID, analyze_token, candidate_tokens, candidates, tokenize
from shoparena.catalog.loader import upstream_record
from shoparena.catalog.tables import BlobWriter, HashLookup, StringTable
from shoparena.catalog.types import SERVICE_CODES, Product, product_contents
from shoparena.errors import DataError

INDEX_FORMAT = "shoparena-bm25/3"
META_FILE = "meta.json"
_SERVICE_BIT = {code: 1 << i for i, code in enumerate(SERVICE_CODES)}
_CACHE_LIMIT = 4_000_000


def service_mask(codes: Iterable[str]) -> int:
    """Bit mask of the known service codes among ``codes`` (unknown codes contribute nothing)."""
    mask = 0
    for code in codes:
        mask |= _SERVICE_BIT.get(code, 0)
    return mask


def _split(doc: Any) -> tuple[Product, str]:
    """A Product, or anything with ``.product`` and ``.contents`` (a loader ``CatalogDocument``)."""
    if isinstance(doc, Product):
        return doc, product_contents(doc)
    return doc.product, doc.contents


def build_index(
    docs: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    k1: float = bm25.K1,
    b: float = bm25.B,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Index ``docs`` (Products or ``CatalogDocument``s, in doc-number order) into ``out_dir``; returns it.

    A document's indexed text is its ``contents`` (for Products: :func:`product_contents`, upstream's rule).
    Raises :class:`DataError` on a duplicate product id (the loader reports those before they get here).
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write(docs, tmp, k1=k1, b=b, progress=progress)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "index")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write(docs: Iterable[Any], tmp: Path, *, k1: float, b: float, progress: Callable[[int], None] | None) -> None:
    t0 = time.perf_counter()
    raw_w = BlobWriter(tmp, "raw")
    find_w = BlobWriter(tmp, "find")
    pids: list[str] = []
    seen: set[str] = set()
    shop_of: dict[str, int] = {}
    shop_codes = array("i")
    prices = array("d")
    sold = array("q")
    services = array("B")
    tok_counts = array("i")
    term_ids = array("i")
    vocab: dict[str, int] = {}
    runs: dict[str, tuple[int, ...]] = {}  # ASCII candidate run -> its term ids (stop words dropped)
    tokens: dict[str, int] = {}  # tokenizer token -> term id, -1 for a stop word
    sha = hashlib.sha256()
    dumps = orjson.dumps

    def term_id(token: str) -> int:
        tid = tokens.get(token)
        if tid is None:
            term = analyze_token(token)
            tid = tokens[token] = -1 if term is None else vocab.setdefault(term, len(vocab))
        return tid

    def run_ids(run: str) -> tuple[int, ...]:
        ids = tuple(t for t in map(term_id, candidate_tokens(run)) if t >= 0)
        runs[run] = ids
        return ids

    for n, doc in enumerate(docs):
        product, contents = _split(doc)
        pid = product.product_id
        if pid in seen:
            raise DataError(f"duplicate product_id {pid!r} at document {n}", hint="ids must be unique")
        seen.add(pid)
        pids.append(pid)
        record = dumps(upstream_record(product))
        sha.update(record)
        sha.update(b"\n")
        raw_w.add(record)
        find_w.add(dumps({
            "product_id": pid, "shop_id": product.shop_id, "title": product.title, "price": product.price,
            "service": product.service, "sold_count": product.sold_count,
        }))
        code = shop_of.setdefault(product.shop_id, len(shop_of))
        shop_codes.append(code)
        prices.append(product.price)
        sold.append(product.sold_count)
        services.append(service_mask(product.service))
        if contents.isascii():
            doc_runs = candidates(contents)
            try:
                ids = [t for r in doc_runs for t in runs[r]]
            except KeyError:
                if len(runs) > _CACHE_LIMIT:
                    runs.clear()
                ids = [t for r in doc_runs for t in (runs.get(r) or run_ids(r))]
        else:
            if len(tokens) > _CACHE_LIMIT:
                tokens.clear()
            ids = [t for t in map(term_id, tokenize(contents)) if t >= 0]
        term_ids.extend(ids)
        tok_counts.append(len(ids))
        if progress is not None and n % 1000 == 999:
            progress(1000)
    n_docs = len(pids)
    if progress is not None and n_docs % 1000:
        progress(n_docs % 1000)
    raw_w.close()
    find_w.close()
    t_scan = time.perf_counter() - t0

    # ---- postings ----------------------------------------------------------------------------------------
    tids = np.frombuffer(term_ids, dtype=np.int32) if term_ids else np.zeros(0, np.int32)
    doc_of_tok = np.repeat(np.arange(n_docs, dtype=np.int32), np.frombuffer(tok_counts, dtype=np.int32)) \
        if n_docs else np.zeros(0, np.int32)
    keep = tids >= 0
    tids, doc_of_tok = tids[keep], doc_of_tok[keep]
    del keep
    dl = np.bincount(doc_of_tok, minlength=n_docs).astype(np.int32)
    norms = bm25.encode_lengths(dl)
    doc_count = int(np.count_nonzero(dl))
    sum_ttf = int(dl.sum(dtype=np.int64))
    avg = bm25.avgdl(sum_ttf, doc_count)
    cache_ni = bm25.norm_inverse_cache(k1, b, avg)

    terms = list(vocab)  # id order
    term_bytes = [t.encode("utf-8") for t in terms]
    HashLookup.write(tmp, "terms", term_bytes)
    # Renumber terms in hash order so the lookup's rows are the term ids themselves.
    hash_rows = np.load(tmp / "terms.row.npy")
    new_id = np.empty(len(terms), dtype=np.int32)
    new_id[hash_rows] = np.arange(len(terms), dtype=np.int32)
    np.save(tmp / "terms.row.npy", np.arange(len(terms), dtype=np.int32))
    StringTable.write(tmp, "terms", (term_bytes[i] for i in hash_rows))
    tids = new_id[tids] if len(terms) else tids

    order = np.argsort(tids, kind="stable")
    t_sorted = tids[order]
    d_sorted = doc_of_tok[order]
    del order, tids, doc_of_tok
    change = np.ones(len(t_sorted), dtype=bool)
    if len(t_sorted) > 1:
        change[1:] = (t_sorted[1:] != t_sorted[:-1]) | (d_sorted[1:] != d_sorted[:-1])
    starts = np.flatnonzero(change)
    tf = np.diff(np.append(starts, len(t_sorted))).astype(np.int32)
    post_term = t_sorted[starts]
    post_doc = d_sorted[starts].astype(np.int32)
    del t_sorted, d_sorted, change, starts
    df = np.bincount(post_term, minlength=len(terms)).astype(np.int64)
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(df, out=offsets[1:])
    post_x = (tf.astype(np.float32) * cache_ni[norms[post_doc]]).astype(np.float32)
    tf_dtype = np.uint16 if (len(tf) == 0 or tf.max() < 65536) else np.int32
    np.save(tmp / "term.off.npy", offsets)
    np.save(tmp / "post.doc.npy", post_doc)
    np.save(tmp / "post.tf.npy", tf.astype(tf_dtype))
    np.save(tmp / "post.x.npy", post_x)
    np.save(tmp / "idf.npy", bm25.idf(df, doc_count))
    # per-term maximum of tf·normInverse: the term's score upper bound, for MaxScore pruning at query time
    max_x = np.zeros(len(terms), dtype=np.float32)
    if len(post_x):
        nonempty = df > 0
        max_x[nonempty] = np.maximum.reduceat(post_x, offsets[:-1][nonempty])
    np.save(tmp / "term.maxx.npy", max_x)

    # ---- document columns ------------------------------------------------------------------------------
    np.save(tmp / "norm.npy", norms)
    np.save(tmp / "dl.npy", dl)
    np.save(tmp / "price.npy", np.frombuffer(prices, dtype=np.float64) if prices else np.zeros(0))
    np.save(tmp / "sold.npy", np.frombuffer(sold, dtype=np.int64) if sold else np.zeros(0, np.int64))
    np.save(tmp / "service.npy", np.frombuffer(services, dtype=np.uint8) if services else np.zeros(0, np.uint8))
    np.save(tmp / "shop.npy", np.frombuffer(shop_codes, dtype=np.int32) if shop_codes else np.zeros(0, np.int32))
    pid_bytes = [p.encode("utf-8") for p in pids]
    tiebreak = np.empty(n_docs, dtype=np.int32)
    if n_docs:
        tiebreak[np.argsort(np.array(pid_bytes, dtype=object), kind="stable")] = np.arange(n_docs, dtype=np.int32)
    np.save(tmp / "tiebreak.npy", tiebreak)
    StringTable.write(tmp, "pid", pid_bytes)
    HashLookup.write(tmp, "pid", pid_bytes)
    shop_bytes = [s.encode("utf-8") for s in shop_of]
    StringTable.write(tmp, "shop", shop_bytes)
    HashLookup.write(tmp, "shop", shop_bytes)
    codes = np.frombuffer(shop_codes, dtype=np.int32) if shop_codes else np.zeros(0, np.int32)
    shop_off = np.zeros(len(shop_of) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(shop_of)), out=shop_off[1:])
    np.save(tmp / "shopdocs.off.npy", shop_off)
    np.save(tmp / "shopdocs.docs.npy", np.argsort(codes, kind="stable").astype(np.int32))

    meta = {
        "format": INDEX_FORMAT,
        "analyzer": ANALYZER_ID,
        "k1": k1,
        "b": b,
        "n_docs": n_docs,
        "doc_count": doc_count,
        "sum_total_term_freq": sum_ttf,
        "avgdl": float(avg),
        "n_terms": len(terms),
        "n_postings": len(post_doc),
        "n_shops": len(shop_of),
        "tie_break": "product_id",
        "catalog_sha256": sha.hexdigest(),
        "built_with": f"shoparena {__version__}",
        "build_seconds": {"scan": round(t_scan, 3), "total": round(time.perf_counter() - t0, 3)},
    }
    with open(tmp / META_FILE, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
