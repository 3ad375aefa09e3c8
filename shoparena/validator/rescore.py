"""Re-scoring stored trajectories under the current rule scorer: new records, a new pipeline, a diff report.

A stored record keeps everything its score is a function of (τ²-bench style): the steps the agent produced, the
envelope status and the problem id. :func:`rescore_store` replays each stored original through today's
:class:`~shoparena.scoring.scorer.Scorer` (``strict`` or ``upstream``, the given catalog) and appends one NEW
record per original — the store stays append-only, nothing is updated or deleted — then reports what moved: how
many outcomes changed (gained, lost) overall and per bucket, the per-field hit rates (title / price / service /
sku & attrs) before → after, and a few examples.

The new record is the original's content (eval run id, agent, problem, bucket, status, steps, messages, call
log, axis, the judge's verdict and coefficient, start and finish times) with the new ``outcome`` / ``success``
and a new pipeline: the original's with ``scorer`` set to ``shoparena-rule/N+rescore`` (:data:`RESCORE_TAG`), the
chosen mode and similarity, the catalog's hash and this package's version. The judge fields stay the
original's, because the verdict is carried over, not re-judged. The tag makes the pipeline version differ from
the original's even when nothing else changed, so re-scoring under an unchanged scorer still writes one record
per original (with an identical outcome), which is what the "0 changed" check of a scorer change relies on.

Provenance: the record schema has no provenance field (``extra="forbid"``; a new field would change every stored
record's content hash), and ``outcome`` must stay a :class:`~shoparena.scoring.types.ProblemScore`. A re-scored
record names its original structurally instead: same ``eval_run_id`` and ``problem_id``, same ``trace_sha256``
and ``call_log_sha256`` (the content is copied, so the hashes match), and a pipeline whose scorer carries
:data:`RESCORE_TAG`; :func:`original_of` resolves it, and the report's examples list both ids.

Idempotent: the new record's idempotency key is ``eval_run_id|problem_id|new pipeline version``, so an original
already re-scored under that pipeline is counted ``already_rescored`` and not scored again (the store would refuse
the duplicate anyway). Re-scores are never re-scored themselves (their original is). Untrusted input never raises
mid-run: a stored body that does not parse or match its hashes, a problem the problem source lacks or that
disagrees with the record (bucket, query), and a trajectory the scorer cannot take are counted under ``skipped``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shoparena import __version__
from shoparena.errors import ConfigError
from shoparena.scoring.types import FIELDS, ProblemScore
from shoparena.store.store import TrajectoryStore, now_ms
from shoparena.store.types import (
    UNHASHED_FIELDS,
    PipelineVersion,
    RecordQuery,
    TrajectoryRecord,
    body_problems,
)
from shoparena.tasks.types import Problem
from shoparena.types import MODES, Mode
from shoparena.validator.core import SCORER_ID

__all__ = ["RESCORE_TAG", "AxisRates", "BucketDiff", "RescoreExample", "RescoreReport", "is_rescore",
           "load_problem_source", "original_of", "rescore_pipeline", "rescore_records", "rescore_store"]

RESCORE_TAG = "+rescore"
"""Suffix of ``PipelineVersion.scorer`` on re-scored records (``shoparena-rule/1+rescore``)."""
SKIP_REASONS: tuple[str, ...] = ("rescore_record", "unreadable", "hash_mismatch", "unknown_problem",
                                 "problem_mismatch", "unscorable", "duplicate_key")
"""Why a considered record was not re-scored (keys of :attr:`RescoreReport.skipped`)."""
_DERIVED = ("trace_sha256", "call_log_sha256", "pipeline_version", "idempotency_key")
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class BucketDiff(BaseModel):
    """Outcomes of one bucket's re-scored records, before → after."""

    model_config = _FROZEN

    rescored: int
    changed: int
    """Records whose ``success`` flipped (``gained + lost``)."""
    gained: int
    """False → True."""
    lost: int
    """True → False."""
    rule_changed: int
    """Records whose rule score moved (with or without an outcome change)."""
    success_before: int
    success_after: int
    asr_before: float | None
    asr_after: float | None


class AxisRates(BaseModel):
    """One scoring field's constraint hits over every re-scored record, before → after (``rate = hits / total``;
    None with no constraint on that field)."""

    model_config = _FROZEN

    hits_before: int
    total_before: int
    rate_before: float | None
    hits_after: int
    total_after: int
    rate_after: float | None


class RescoreExample(BaseModel):
    model_config = _FROZEN

    record_id: str
    """The original."""
    new_record_id: str
    """The re-scored record (its id does not depend on when it is written, so a dry run shows it too)."""
    problem_id: str
    bucket: str
    agent_id: str
    success_before: bool
    success_after: bool
    rule_before: float | None
    rule_after: float


class RescoreReport(BaseModel):
    """What :func:`rescore_store` did. ``considered == rescored + already_rescored + sum(skipped)`` unless
    ``limit_reached`` stopped the pass early."""

    model_config = _FROZEN

    store: str
    mode: Mode
    similarity: str
    catalog_sha256: str
    dry_run: bool
    considered: int
    """Records read (matching ``since`` and the query)."""
    rescored: int
    """Originals scored again (new records built; appended unless ``dry_run``)."""
    appended: int
    """New records written (0 in a dry run; fewer than ``rescored`` only if a concurrent run stored some)."""
    already_rescored: int
    """Originals whose re-score under the target pipeline was already stored (nothing written)."""
    skipped: dict[str, int]
    """Reason → count (:data:`SKIP_REASONS`); reasons that did not occur are left out."""
    changed: int
    gained: int
    lost: int
    rule_changed: int
    catalog_mismatch: int
    """Re-scored originals first scored against another catalog (their ``catalog_sha256`` differs)."""
    limit_reached: bool
    pipelines: dict[str, PipelineVersion]
    """New pipeline version → pipeline (one per distinct judge among the originals, usually one)."""
    by_bucket: dict[str, BucketDiff]
    by_axis: dict[str, AxisRates]
    """Per scoring field (``title``, ``price``, ``service``, ``sku & attrs``): constraint hit rates."""
    examples: list[RescoreExample] = Field(default_factory=list)
    """Changed outcomes first (append order), then records whose rule score alone moved."""

    def write(self, path: str | os.PathLike[str]) -> Path:
        """This report as indented JSON at ``path`` (atomic); returns ``path``."""
        from shoparena._io import atomic_write

        with atomic_write(path, "wb") as fh:
            fh.write(orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n")
        return Path(path)


def is_rescore(pipeline: PipelineVersion) -> bool:
    """True for the pipeline of a re-scored record."""
    return pipeline.scorer.endswith(RESCORE_TAG)


def rescore_pipeline(original: PipelineVersion, *, mode: Mode, similarity: str, catalog_sha256: str
                     ) -> PipelineVersion:
    """The pipeline a re-score of a record scored under ``original`` is stored under (module docstring)."""
    return PipelineVersion.model_validate({**original.model_dump(), "scorer": SCORER_ID + RESCORE_TAG,
                                           "scorer_mode": mode, "similarity": similarity,
                                           "catalog_sha256": catalog_sha256, "package_version": __version__})


def original_of(store: TrajectoryStore, record: TrajectoryRecord) -> TrajectoryRecord | None:
    """The stored original a re-scored ``record`` was made from (None when it is not a re-score or the original is
    not in ``store``): same eval run and problem, same trace and call-log hashes, not itself a re-score."""
    if not is_rescore(record.pipeline):
        return None
    for r in list(store.query(eval_run_id=record.eval_run_id, problem_id=record.problem_id)):
        if (not is_rescore(r.pipeline) and r.trace_sha256 == record.trace_sha256
                and r.call_log_sha256 == record.call_log_sha256):
            return r
    return None


def load_problem_source(problems: str | os.PathLike[str] | None = None,
                        banks: str | os.PathLike[str] | None = None) -> dict[str, Problem]:
    """Problems by id from a problem file and/or a saved bank set (records reference their problem by id; they do
    not embed it). A problem in both takes the file's version."""
    if problems is None and banks is None:
        raise ConfigError("re-scoring needs the problems the records were scored on",
                          hint="pass --problems FILE (problem JSONL) or --banks DIR (a saved bank set)")
    out: dict[str, Problem] = {}
    if banks is not None:
        from shoparena.tasks.banks import BankSet

        out.update((p.problem_id, p) for p in BankSet.load(banks).all_problems())
    if problems is not None:
        from shoparena.tasks.loader import load_problems

        out.update((p.problem_id, p) for p in load_problems(problems, refuse_conflicts=True))
    return out


def rescore_records(store_url: str, catalog: str | os.PathLike[str], *,
                    problems: str | os.PathLike[str] | None = None, banks: str | os.PathLike[str] | None = None,
                    mode: Mode = "strict", similarity: str = "lexical", since: int | None = None,
                    limit: int | None = None, dry_run: bool = False, examples: int = 5) -> RescoreReport:
    """Open the store at ``store_url`` (never created: :class:`~shoparena.errors.NotFoundError` when missing), the
    catalog's index and the problem source, and run :func:`rescore_store`. ``since``: ms since the epoch."""
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.store import open_store

    if mode not in MODES:
        raise ConfigError(f"unknown scoring mode {mode!r}", hint="use strict or upstream")
    by_id = load_problem_source(problems, banks)
    index = SearchIndex.open(index_path(catalog))
    with open_store(store_url, create=False, readonly=dry_run) as store:
        return rescore_store(store, index, by_id, mode=mode, similarity=similarity,
                             query=RecordQuery(since=since), limit=limit, dry_run=dry_run, examples=examples)


class _Tally:
    """The report's running sums."""

    def __init__(self) -> None:
        self.buckets: dict[str, Counter[str]] = {}
        self.hits: dict[str, Counter[str]] = {f: Counter() for f in FIELDS}
        self.changed: list[RescoreExample] = []
        self.moved: list[RescoreExample] = []

    def add(self, old: TrajectoryRecord, new: TrajectoryRecord, score: ProblemScore, keep: int) -> bool:
        b = self.buckets.setdefault(old.bucket, Counter())
        rule_before = _number(old.outcome.get("rule"))
        flipped = old.success != score.success
        moved = rule_before is None or abs(rule_before - score.rule) > 1e-12
        b["rescored"] += 1
        b["success_before"] += old.success
        b["success_after"] += score.success
        b["gained"] += flipped and score.success
        b["lost"] += flipped and old.success
        b["rule_changed"] += moved
        for f in FIELDS:
            c = self.hits[f]
            c["hits_before"] += _count(old.outcome.get("axis_hits"), f)
            c["total_before"] += _count(old.outcome.get("axis_totals"), f)
            c["hits_after"] += score.axis_hits.get(f, 0)
            c["total_after"] += score.axis_totals.get(f, 0)
        if flipped or moved:
            target = self.changed if flipped else self.moved
            if len(target) < keep:
                target.append(RescoreExample(
                    record_id=old.record_id, new_record_id=new.record_id, problem_id=old.problem_id,
                    bucket=old.bucket, agent_id=old.agent_id, success_before=old.success,
                    success_after=score.success, rule_before=rule_before, rule_after=score.rule))
        return moved

    def by_bucket(self) -> dict[str, BucketDiff]:
        out = {}
        for name, c in sorted(self.buckets.items()):
            n = c["rescored"]
            out[name] = BucketDiff(rescored=n, changed=c["gained"] + c["lost"], gained=c["gained"], lost=c["lost"],
                                   rule_changed=c["rule_changed"], success_before=c["success_before"],
                                   success_after=c["success_after"], asr_before=_rate(c["success_before"], n),
                                   asr_after=_rate(c["success_after"], n))
        return out

    def by_axis(self) -> dict[str, AxisRates]:
        return {f: AxisRates(hits_before=c["hits_before"], total_before=c["total_before"],
                             rate_before=_rate(c["hits_before"], c["total_before"]), hits_after=c["hits_after"],
                             total_after=c["total_after"], rate_after=_rate(c["hits_after"], c["total_after"]))
                for f, c in self.hits.items()}


def rescore_store(store: TrajectoryStore, index: Any, problems: Mapping[str, Problem], *, mode: Mode = "strict",
                  similarity: str = "lexical", query: RecordQuery | None = None, limit: int | None = None,
                  dry_run: bool = False, examples: int = 5, batch: int = 64) -> RescoreReport:
    """Re-score the originals among the records ``query`` matches (append order) against ``index`` and append one
    new record per original, ``batch`` per transaction (module docstring). ``limit``: stop after that many
    originals were re-scored (a later run goes on where this one stopped: done ones count ``already_rescored``).
    ``dry_run``: report only, write nothing."""
    from shoparena.scoring.scorer import Scorer
    from shoparena.scoring.similarity import get_similarity

    if limit is not None and limit < 1:
        raise ConfigError(f"limit {limit} must be ≥ 1")
    sim = get_similarity(similarity)
    scorer = Scorer(index, mode=mode, similarity=sim)
    catalog_sha = str(index.catalog_sha256)
    q = (query or RecordQuery()).model_copy(update={"order_by": "seq", "descending": False, "limit": None})

    targets: dict[str, tuple[PipelineVersion, str]] = {}  # original pipeline key → target pipeline and its key
    done: dict[str, set[tuple[str, str]]] = {}  # target key → (eval run, problem) already stored under it
    built: set[tuple[str, str, str]] = set()
    skipped: Counter[str] = Counter()
    tally = _Tally()
    considered = rescored = appended = already = catalog_mismatch = rule_changed = 0
    limit_reached = False
    pending: list[TrajectoryRecord] = []
    memory = _in_memory(store)
    # an in-memory store runs on one connection: read the whole stream before touching the store again
    bodies: Iterable[bytes] = list(store.bodies(q)) if memory else store.bodies(q)

    def flush() -> None:
        nonlocal appended
        if pending and not dry_run:
            appended += store.append_many(pending)
        pending.clear()

    stream: Iterator[bytes] = iter(bodies)
    try:
        for raw in stream:
            considered += 1
            rec, reason = _read(raw)
            if rec is None:
                skipped[reason] += 1
                continue
            if is_rescore(rec.pipeline):
                skipped["rescore_record"] += 1
                continue
            if rec.pipeline_version not in targets:
                target = rescore_pipeline(rec.pipeline, mode=mode, similarity=sim.name, catalog_sha256=catalog_sha)
                targets[rec.pipeline_version] = (target, target.key())
            target, tkey = targets[rec.pipeline_version]
            if tkey not in done:
                done[tkey] = {(r.eval_run_id, r.problem_id) for r in store.rows(pipeline_version=tkey)}
            key = (rec.eval_run_id, rec.problem_id)
            if key in done[tkey]:
                already += 1
                continue
            if (*key, tkey) in built:
                skipped["duplicate_key"] += 1
                continue
            problem = problems.get(rec.problem_id)
            if problem is None:
                skipped["unknown_problem"] += 1
                continue
            if not _matches(rec, problem):
                skipped["problem_mismatch"] += 1
                continue
            try:
                score = _score(scorer, problem, rec)
            except Exception:  # an unscorable stored trajectory is counted, never fatal
                skipped["unscorable"] += 1
                continue
            new = _rescored(rec, score, target)
            built.add((*key, tkey))
            rescored += 1
            catalog_mismatch += rec.pipeline.catalog_sha256 != catalog_sha
            rule_changed += tally.add(rec, new, score, examples)
            pending.append(new)
            if len(pending) >= batch and not memory:
                flush()
            if limit is not None and rescored >= limit:
                limit_reached = True
                break
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # end the read transaction before the last write
    flush()
    by_bucket = tally.by_bucket()
    gained = sum(b.gained for b in by_bucket.values())
    lost = sum(b.lost for b in by_bucket.values())
    return RescoreReport(
        store=store.url, mode=mode, similarity=sim.name, catalog_sha256=catalog_sha, dry_run=dry_run,
        considered=considered, rescored=rescored, appended=appended, already_rescored=already,
        skipped={r: skipped[r] for r in SKIP_REASONS if skipped[r]}, changed=gained + lost, gained=gained,
        lost=lost, rule_changed=rule_changed, catalog_mismatch=catalog_mismatch, limit_reached=limit_reached,
        pipelines={k: t for t, k in targets.values()}, by_bucket=by_bucket, by_axis=tally.by_axis(),
        examples=(tally.changed + tally.moved)[:examples])


# -- helpers ---------------------------------------------------------------------------------------------------
def _in_memory(store: TrajectoryStore) -> bool:
    from shoparena.db.engine import sqlite_path

    return store.dialect == "sqlite" and sqlite_path(store.url) is None


def _read(raw: bytes) -> tuple[TrajectoryRecord | None, str]:
    """A stored body as a record, or None and why not (it does not parse, or it does not match its hashes)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, "unreadable"
    if not isinstance(body, dict):
        return None, "unreadable"
    if body_problems(body):
        return None, "hash_mismatch"
    try:
        return TrajectoryRecord.model_validate(body), ""
    except ValidationError:
        return None, "unreadable"


def _matches(rec: TrajectoryRecord, problem: Problem) -> bool:
    """The problem source's problem is the one the record was scored on: same bucket, and the record's user query
    (when it kept messages) is the problem's."""
    if problem.bucket != rec.bucket:
        return False
    query = next((m.get("content") for m in rec.messages if isinstance(m, dict) and m.get("role") == "user"), None)
    return query is None or query == problem.query


def _score(scorer: Any, problem: Problem, rec: TrajectoryRecord) -> ProblemScore:
    """The record's trajectory scored again: its steps and envelope status, its sample index, and the envelope's
    error recovered from the stored outcome (the scorer appends its own notes, which are taken off first)."""
    sample = rec.outcome.get("sample")
    sample = sample if isinstance(sample, int) and not isinstance(sample, bool) else 0
    env: dict[str, Any] = {"problem_id": rec.problem_id, "status": rec.status, "dialogue": rec.steps, "error": None}
    score: ProblemScore = scorer.score_steps(problem, env, sample=sample)
    stored = rec.outcome.get("error")
    if isinstance(stored, str) and stored != score.error:
        own = score.error
        envelope_error = stored
        if own and stored.endswith("; " + own):
            envelope_error = stored[: -len("; " + own)]
        if envelope_error != own:
            score = scorer.score_steps(problem, {**env, "error": envelope_error}, sample=sample)
    return score


def _rescored(rec: TrajectoryRecord, score: ProblemScore, pipeline: PipelineVersion) -> TrajectoryRecord:
    """The original's content with the new outcome and pipeline, sealed now."""
    body = rec.model_dump(exclude={*UNHASHED_FIELDS, *_DERIVED})
    body.update(outcome=score.model_dump(mode="json"), success=score.success, pipeline=pipeline.model_dump())
    return TrajectoryRecord.model_validate(body).sealed(now_ms())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(counts: Any, name: str) -> int:
    value = counts.get(name) if isinstance(counts, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 6) if d else None
