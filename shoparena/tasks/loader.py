"""Load and write problem files: upstream JSONL, ORO suite JSON and our own JSONL (docs/shoppingbench.md §3.1–3.6).

One entry point, :func:`load_problems`, detects the format from the first non-blank byte (``[`` ⇒ an ORO suite
JSON array, ``{`` ⇒ JSONL) and each record's bucket:

- **our JSONL** (a record with ``bucket``): upstream keys plus ``problem_id``, ``bucket``, ``cluster_id``,
  ``difficulty``, ``suite``, ``title``, ``variant``, ``reward_title_embeddings``;
- **ORO suite** (a record with ``category``): bucket = ``category`` lowercased; ``difficulty``, ``title`` and
  ``reward_title_embeddings`` kept;
- **upstream JSONL**: bucket from the file name (``synthesize_{product,shop,voucher,web_simpleqa}_…``), else from
  the record's shape: ``Knowledge_Attribute`` ⇒ knowledge, ``voucher`` ⇒ voucher, list ``reward`` ⇒ shop,
  object ``reward`` ⇒ product.

Problem ids. A record without ``problem_id`` gets ``f"{suite}:{bucket}:{sha1(query)[:12]}"`` where ``suite`` is
the record's ``suite`` or else the file stem (``synthesize_product_test``, ``problem_suite_v2``) and the hash is
over the exact UTF-8 query bytes. Loading the same file twice gives the same ids; moving a file under another
name changes them. Ids are unique within a file: a repeated id (or a repeated query, for derived ids) is a bad
record. Bad records never abort the load: they are counted in a :class:`ProblemLoadReport` with their line (or
array index) and a precise message; a file where nothing is usable raises :class:`DataError`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from shoparena._io import atomic_write, iter_lines, open_text, write_jsonl
from shoparena.catalog.types import Product
from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.tasks.types import BUCKETS, PRICE_MODES, Problem, RewardItem, Voucher

#: Upstream file name → bucket (docs/shoppingbench.md §3.1).
_FILE_BUCKET = re.compile(r"synthesize_(product|shop|voucher|web_simpleqa)(?:_|\.|$)")
_FILE_BUCKET_MAP = {"product": "product", "shop": "shop", "voucher": "voucher", "web_simpleqa": "knowledge"}
_UPSTREAM_KEYS = frozenset({"query", "reward", "voucher", "Knowledge_Attribute"})
_ORO_KEYS = frozenset({"category", "difficulty", "title", "reward_title_embeddings", "problem_id", "suite_id"})
#: Our extra keys, in the order :func:`dump_problems` writes them after the upstream keys.
EXTRA_KEYS: tuple[str, ...] = ("difficulty", "cluster_id", "variant", "title", "suite", "reward_title_embeddings")
_OUR_KEYS = frozenset({"problem_id", "bucket", *EXTRA_KEYS})
_KNOWN_KEYS = _UPSTREAM_KEYS | _ORO_KEYS | _OUR_KEYS
_MAX_EXAMPLES = 20


@dataclass
class ProblemLoadReport:
    """What a load skipped and why (same shape as the catalog's ``LoadReport``)."""

    path: str = ""
    loaded: int = 0
    bad_count: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    """Short reason → count (``invalid JSON``, ``schema``, ``unknown price mode``, ``missing query``, …)."""
    examples: list[str] = field(default_factory=list)
    """Up to 20 ``"line 12: <reason>: <detail>"`` strings, in file order."""
    conflicts: list[str] = field(default_factory=list)
    """Every ``"line 12: 'id' differs from line 3"``: an id already used by a problem with other content (which
    of the two is meant cannot be known; :func:`load_problems` with ``refuse_conflicts`` refuses the file)."""

    def add(self, where: str, reason: str, detail: str) -> None:
        self.bad_count += 1
        self.reasons[reason] += 1
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}: {detail}")

    def summary(self) -> str:
        head = f"{self.path}: loaded {self.loaded} problems, skipped {self.bad_count} bad records"
        if not self.bad_count:
            return head
        reasons = ", ".join(f"{r} ×{n}" for r, n in self.reasons.most_common())
        return "\n  ".join([f"{head} ({reasons})", *self.examples])

    def to_dict(self) -> dict[str, Any]:
        """The skipped lines as JSON data (``lines``: how many, ``reasons``: count by reason, ``examples``: up to
        20 ``"line N: reason: detail"``), for the outputs of the commands that read problems."""
        return {"path": self.path, "loaded": self.loaded, "lines": self.bad_count,
                "reasons": dict(self.reasons.most_common()), "examples": list(self.examples)}


class _Bad(Exception):
    """One unusable record: ``reason`` is the counter key, ``detail`` the precise message."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def derive_problem_id(suite: str, bucket: str, query: str) -> str:
    """The id of a problem that carries none: ``{suite}:{bucket}:{sha1(query)[:12]}``."""
    return f"{suite}:{bucket}:{hashlib.sha1(query.encode('utf-8')).hexdigest()[:12]}"


def file_bucket(path: str | os.PathLike[str]) -> str | None:
    """The bucket an upstream file name implies (``synthesize_shop_test.jsonl`` ⇒ ``shop``), else None."""
    m = _FILE_BUCKET.search(Path(path).name)
    return _FILE_BUCKET_MAP[m.group(1)] if m else None


def _suite_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _validation_detail(exc: ValidationError, prefix: str) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{prefix}{'.' if loc else ''}{loc}: {err['msg']}")
    more = exc.error_count() - 3
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _reward_items(raw: Any, bucket: str) -> list[RewardItem]:
    if bucket == "product":
        if not isinstance(raw, dict):
            raise _Bad("bucket mismatch", f"a product reward must be an object, got {type(raw).__name__}")
        raw_items = [raw]
    else:
        if not isinstance(raw, list):
            raise _Bad("bucket mismatch", f"a {bucket} reward must be a list, got {type(raw).__name__}")
        if not raw:
            raise _Bad("schema", f"a {bucket} reward list is empty")
        raw_items = raw
    items = []
    for i, item in enumerate(raw_items):
        where = "reward" if bucket == "product" else f"reward[{i}]"
        if not isinstance(item, dict):
            raise _Bad("schema", f"{where} must be an object, got {type(item).__name__}")
        for entry in item.get("price") or []:
            for mode in entry if isinstance(entry, dict) else ():
                if mode not in PRICE_MODES:
                    raise _Bad("unknown price mode", f"{where}.price: {mode!r}; expected one of {PRICE_MODES}")
        try:
            items.append(RewardItem.model_validate(item))
        except ValidationError as exc:
            raise _Bad("schema", _validation_detail(exc, where)) from None
    return items


def _detect_bucket(rec: dict[str, Any], hint: str | None) -> str:
    if "bucket" in rec:
        bucket = rec["bucket"]
        if bucket not in BUCKETS:
            raise _Bad("unknown bucket", f"bucket {bucket!r}; expected one of {BUCKETS}")
        return str(bucket)
    if "category" in rec:
        cat = rec["category"]
        bucket = cat.lower() if isinstance(cat, str) else None
        if bucket == "web" or bucket == "web_simpleqa":
            bucket = "knowledge"
        if bucket not in BUCKETS:
            raise _Bad("unknown bucket", f"category {cat!r}; expected Product, Shop or Voucher")
        return bucket
    if hint is not None:
        return hint
    if "Knowledge_Attribute" in rec:
        return "knowledge"
    if "voucher" in rec:
        return "voucher"
    if "reward" not in rec:
        raise _Bad("schema", "missing 'reward' (cannot tell the bucket)")
    return "shop" if isinstance(rec["reward"], list) else "product"


def parse_problem(rec: Any, *, suite: str, bucket_hint: str | None = None) -> Problem:
    """One record (any of the three formats) → :class:`Problem`; raises ``ValueError`` with a precise message."""
    try:
        return _parse(rec, suite, bucket_hint)
    except _Bad as bad:
        raise ValueError(f"{bad.reason}: {bad.detail}") from None


def _parse(rec: Any, suite: str, bucket_hint: str | None) -> Problem:
    if not isinstance(rec, dict):
        raise _Bad("not an object", f"expected a JSON object, got {type(rec).__name__}")
    unknown = sorted(set(rec) - _KNOWN_KEYS)
    if unknown:
        raise _Bad("unknown key", f"unexpected keys {unknown}")
    query = rec.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _Bad("missing query", "'query' must be a non-empty string")
    bucket = _detect_bucket(rec, bucket_hint)
    if "reward" not in rec:
        raise _Bad("schema", "missing 'reward'")
    fields: dict[str, Any] = {"bucket": bucket, "query": query}
    if bucket == "knowledge":
        attr = rec.get("Knowledge_Attribute")
        if attr is None or isinstance(attr, bool | dict | list):
            raise _Bad("schema", f"'Knowledge_Attribute' must be a string or number, got {attr!r}")
        fields["knowledge_attribute"] = str(attr)
        try:
            fields["knowledge_product"] = Product.model_validate(rec["reward"])
        except ValidationError as exc:
            raise _Bad("schema", _validation_detail(exc, "reward")) from None
    else:
        fields["reward"] = _reward_items(rec["reward"], bucket)
    if bucket == "voucher":
        if not isinstance(rec.get("voucher"), dict):
            raise _Bad("schema", "a voucher problem needs a 'voucher' object")
        try:
            fields["voucher"] = Voucher.model_validate(rec["voucher"])
        except ValidationError as exc:
            raise _Bad("schema", _validation_detail(exc, "voucher")) from None
    elif rec.get("voucher") is not None:
        raise _Bad("bucket mismatch", f"a {bucket} problem carries a 'voucher'")
    for key in EXTRA_KEYS:
        if rec.get(key) is not None:
            fields[key] = rec[key]
    if "suite" not in fields and rec.get("suite_id") is not None:
        fields["suite"] = str(rec["suite_id"])
    fields.setdefault("suite", suite)
    pid = rec.get("problem_id")
    fields["problem_id"] = str(pid) if pid is not None else derive_problem_id(fields["suite"], bucket, query)
    try:
        return Problem.model_validate(fields)
    except ValidationError as exc:
        raise _Bad("schema", _validation_detail(exc, "problem")) from None


def _records(path: Path, report: ProblemLoadReport) -> Iterator[tuple[str, Any]]:
    """``(where, decoded record)`` pairs; undecodable ones are reported and yield nothing."""
    first = b""
    for _, line in iter_lines(path):
        first = line[:1]
        break
    if first == b"[":
        try:
            with open_text(path) as fh:
                items = orjson.loads(fh.read())
        except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(
                f"{path}: not valid JSON ({exc})", hint="an ORO suite is one JSON array of problem objects"
            ) from None
        if not isinstance(items, list):
            raise DataError(f"{path}: expected a JSON array", hint="an ORO suite is one JSON array")
        for i, item in enumerate(items):
            yield f"item {i}", item
        return
    for n, line in iter_lines(path):
        try:
            yield f"line {n}", orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            report.add(f"line {n}", "invalid JSON", str(exc))


def iter_problems(path: str | os.PathLike[str], report: ProblemLoadReport | None = None) -> Iterator[Problem]:
    """Stream the valid problems of a file (any of the three formats), counting bad records in ``report``."""
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(f"no problem file at {p}", hint="pass an upstream JSONL, an ORO suite JSON or our JSONL")
    report = report if report is not None else ProblemLoadReport(path=str(p))
    report.path = report.path or str(p)
    suite, hint = _suite_name(p), file_bucket(p)
    seen: dict[str, tuple[str, Problem]] = {}
    for where, rec in _records(p, report):
        try:
            problem = _parse(rec, suite, hint)
        except _Bad as bad:
            report.add(where, bad.reason, bad.detail)
            continue
        if problem.problem_id in seen:
            first, earlier = seen[problem.problem_id]
            if problem == earlier:
                report.add(where, "duplicate id", f"{problem.problem_id!r} already used at {first} (same problem)")
            else:
                detail = f"{problem.problem_id!r} already used at {first} by a problem with other content"
                report.add(where, "conflicting id", detail)
                report.conflicts.append(f"{where}: {detail}")
            continue
        seen[problem.problem_id] = (where, problem)
        report.loaded += 1
        yield problem


def load_problems(path: str | os.PathLike[str], report: ProblemLoadReport | None = None, *,
                  refuse_conflicts: bool = False) -> list[Problem]:
    """All valid problems of a file. Raises :class:`NotFoundError` for a missing file and :class:`DataError`
    when the file has records but none is usable, or (``refuse_conflicts``, for commands that score an agent)
    when a problem id is used again by a problem with other content; bad records are otherwise only counted in
    ``report``."""
    report = report if report is not None else ProblemLoadReport(path=str(path))
    problems = list(iter_problems(path, report))
    if refuse_conflicts and report.conflicts:
        raise DataError(f"{path}: {len(report.conflicts)} problem id(s) used again with other content: "
                        f"{report.conflicts[0]}",
                        hint="give each problem its own id or drop the stale copy (`shoparena problems stats FILE` "
                             "lists every skipped line)")
    if not problems and report.bad_count:
        raise DataError(
            f"no usable problem in {path}: {report.summary()}",
            hint="expected upstream synthesize_*_test.jsonl lines, an ORO problem_suite JSON array, "
            "or JSONL written by `shoparena problems generate`",
        )
    return problems


def problem_row(problem: Problem) -> dict[str, Any]:
    """Our JSONL object: ``problem_id``, ``bucket``, the upstream keys, then the non-null extra keys."""
    row: dict[str, Any] = {"problem_id": problem.problem_id, "bucket": problem.bucket, **problem.to_upstream()}
    for key in EXTRA_KEYS:
        value = getattr(problem, key)
        if value is not None:
            row[key] = value
    return row


def dump_problems(problems: Iterable[Problem], path: str | os.PathLike[str]) -> Path:
    """Atomically write our JSONL (``.gz`` aware). Same problems ⇒ same bytes; returns ``path``."""
    write_jsonl(path, (problem_row(p) for p in problems))
    return Path(path)


def suite_row(problem: Problem, *, with_ids: bool = False) -> dict[str, Any]:
    """One ORO suite object (docs/shoppingbench.md §3.6)."""
    if problem.bucket == "knowledge":
        raise ConfigError(
            f"{problem.problem_id}: ORO suites have no Knowledge bucket", hint="write it with dump_problems instead"
        )
    row: dict[str, Any] = {"problem_id": problem.problem_id} if with_ids else {}
    row.update(problem.to_upstream())
    row["category"] = problem.bucket.capitalize()
    for key in ("difficulty", "title", "reward_title_embeddings"):
        value = getattr(problem, key)
        if value is not None:
            row[key] = value
    return row


def dump_suite(problems: Sequence[Problem], path: str | os.PathLike[str], *, with_ids: bool = False) -> Path:
    """Atomically write an ORO suite JSON array (indented). ``with_ids`` adds ``problem_id`` as ORO's backend
    does when serving; without it, reloading derives ids from the new file's stem."""
    rows = [suite_row(p, with_ids=with_ids) for p in problems]
    with atomic_write(path, "wb") as fh:
        fh.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
        fh.write(b"\n")
    return Path(path)


def index_problems(problems: Iterable[Problem]) -> tuple[dict[str, Problem], dict[str, Problem]]:
    """``(by_id, by_query)`` lookups for joining trajectories (by ``problem_id``, else exact query text).

    A repeated ``problem_id`` raises :class:`DataError`; a repeated query keeps its first problem (the same
    upstream problem can sit in an upstream file and in an ORO suite under two ids).
    """
    by_id: dict[str, Problem] = {}
    by_query: dict[str, Problem] = {}
    for p in problems:
        if p.problem_id in by_id:
            raise DataError(f"duplicate problem_id {p.problem_id!r}", hint="problem ids must be unique")
        by_id[p.problem_id] = p
        by_query.setdefault(p.query, p)
    return by_id, by_query
