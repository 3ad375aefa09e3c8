"""``shoparena corpus build``: the whole corpus pipeline in one call (``docs/corpus-design.md``).

normalise (store records, or upstream rollout files scored here with the strict rule scorer) → filter (judge →
format → axis → dedup/rank → outcome) → rewrite the axis-B rows into agentic form and pass them through the same
format gate and ranking → split the problems by leak cluster into train / eval / never-touch and prove the split
→ export SFT (train and eval), KTO and GRPO sets, ``provenance.jsonl`` (one line per exported trajectory: its source
record, agent, run, hotkeys, what it was rewritten from) → ``manifest.json`` (which hashes every file).

With a ``validation`` partition (``SplitConfig.validation_fraction`` > 0, or a reused split that has one), its
problems' rows go to ``sft_validation`` and to no train export (SFT, KTO, GRPO): it is for choosing learning rates,
row counts and stopping points without touching eval or never_touch.

An empty corpus is a failure, not a success: a source whose normalisation keeps no trajectory, or a build whose
``sft_train`` would hold no row, raises :class:`~shoparena.errors.DataError` (exit 3) naming the stage and reason
that rejected the most rows, before ``split.json`` or any export is written; ``manifest.json`` (what marks a
corpus finished) is only ever written last.

Problems for the split come, in order of preference, from ``problems`` (a problem file), ``banks`` (a saved
:class:`~shoparena.tasks.banks.BankSet`: its leak clusters, and its static suites always never-touch) or, for a
store, from the records themselves (id, bucket, leak cluster, suite, the query and the GT ids the scorer
recorded) — enough for the guard's proof (problem ids, clusters, GT ids, canonical queries).

Rewritten rows are judged by their structure and outcome, not by the judge score of the trace they replace (that
score graded reasoning the rewrite discards): they skip the judge gate, keep the original score in their
provenance, and by default only successful traces are rewritten (narrating a wrong answer as reasoned is worse
than no row).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena._io import write_jsonl
from shoparena.corpus.filter import FilterConfig, run_filters
from shoparena.corpus.types import Rejection, StageReport, Trajectory
from shoparena.errors import ConfigError, DataError
from shoparena.tasks.types import Problem, RewardItem

if TYPE_CHECKING:
    from shoparena.corpus.split import AssignedRows

__all__ = ["CorpusConfig", "CorpusReport", "build_corpus"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CorpusConfig(BaseModel):
    """Every knob of :func:`build_corpus`: the filter's and the split's config objects plus the rewrite and
    export choices."""

    model_config = _FROZEN

    filter: FilterConfig = Field(default_factory=FilterConfig)
    split: Any = None
    """A :class:`~shoparena.corpus.split.SplitConfig` (None: its defaults with this config's ``seed``)."""
    seed: int = 0
    rewrite: str = "template"
    """``template`` (offline, deterministic), ``none``, or a model URI for the LLM rewriter."""
    rewrite_require_success: bool = True
    kto_min_judge: float = 0.7
    kto_turns: Literal["all", "last"] = "all"
    grpo_require_success: bool = True


class CorpusReport(BaseModel):
    """What a build did: per-stage counts, the rewrite's growth of the agentic corpus, split sizes, exports."""

    model_config = _FROZEN

    out: str
    source: dict[str, Any]
    stages: list[dict[str, Any]]
    """normalize, the filter stages, rewrite, the rewritten rows' format gate and ranking, split, exports."""
    agentic_rows: int
    """Axis-A rows kept by the filter (before the split)."""
    rewritten_rows: int
    """Rewritten axis-B rows that passed the same format gate and ranking."""
    growth: float | None
    """``rewritten_rows / agentic_rows``: how much the rewrite grows the agentic corpus."""
    split: dict[str, Any]
    exports: dict[str, Any]
    manifest: str


def _record_problem(t: Trajectory) -> Problem | None:
    if not t.problem_id:
        return None
    query = next((m.get("content") for m in t.messages if m.get("role") == "user"), None)
    items = (t.outcome or {}).get("items") or []
    gts = [it.get("gt_product_id") for it in items if it.get("gt_product_id")]
    bucket = t.bucket if t.bucket in ("product", "shop", "voucher", "knowledge") else None
    if not isinstance(query, str) or bucket is None:
        return None
    return Problem(problem_id=t.problem_id, bucket=bucket, query=query, cluster_id=t.cluster_id, suite=t.suite,
                   reward=[RewardItem(product_id=g, title=[""]) for g in gts])


def _score_rows(rows: Iterator[Trajectory | Rejection], problems: Mapping[str, Problem], index: Any
                ) -> Iterator[Trajectory | Rejection]:
    """Strict rule scores for imported rows (rollouts carry none): ``success`` and ``outcome``."""
    from shoparena.corpus.normalize import to_steps
    from shoparena.scoring.scorer import Scorer

    scorer = Scorer(index, mode="strict")
    for t in rows:
        if isinstance(t, Trajectory) and t.success is None and t.problem_id in problems:
            try:
                score = scorer.score_steps(problems[t.problem_id], to_steps(t))
            except Exception as exc:  # a row we cannot score is counted, never fatal
                yield Rejection(stage="normalize", reason="unscorable", message=f"{type(exc).__name__}: {exc}",
                                where=str(t.provenance.get("file", t.traj_id)), traj_id=t.traj_id)
                continue
            t.success = score.success
            t.outcome = score.model_dump(mode="json")
        yield t


class _Tap:
    """Counts normalisation (the ``normalize`` stage report) on the way into the filter, and keeps the little the
    later steps need: a problem view per problem (when no problem source was given) and the rewrite candidates
    (axis-B / mixed rows, successful ones unless told otherwise)."""

    def __init__(self, report: StageReport, *, views: bool, rewrite: bool, rewrite_require_success: bool) -> None:
        self.report = report
        self.views: dict[str, Problem] = {}
        self.candidates: list[Trajectory] = []
        self.advance: Callable[[int], None] | None = None
        self._views, self._rewrite, self._need_success = views, rewrite, rewrite_require_success

    def __call__(self, rows: Iterable[Trajectory | Rejection]) -> Iterator[Trajectory | Rejection]:
        report = self.report
        for r in rows:
            report.seen += 1
            if isinstance(r, Rejection):
                report.reject(r.reason, r.where)
            else:
                report.kept += 1
                if self._views and r.problem_id and r.problem_id not in self.views:
                    view = _record_problem(r)
                    if view is not None:
                        self.views[view.problem_id] = view
                if self._rewrite and r.axis in ("B", "mixed") and (r.success is True or not self._need_success):
                    self.candidates.append(r)
            if self.advance is not None:
                self.advance(1)
            yield r


def _load_problems(problems: str | os.PathLike[str] | None, banks: str | os.PathLike[str] | None
                   ) -> tuple[dict[str, Problem] | None, dict[str, str] | None, tuple[str, ...]]:
    """(problems by id, cluster map, static suite names) from a problem file or a saved bank set."""
    if problems is not None:
        from shoparena.tasks.loader import load_problems

        return {p.problem_id: p for p in load_problems(problems, refuse_conflicts=True)}, None, ()
    if banks is not None:
        from shoparena.tasks.banks import BankSet

        bank = BankSet.load(banks)
        by_id = {p.problem_id: p for p in bank.all_problems()}
        static = bank.static_suites()
        for name, members in static.items():
            for p in members:
                by_id[p.problem_id] = p.model_copy(update={"suite": name})
        return by_id, bank.cluster_map(), tuple(static)
    return None, None, ()


def build_corpus(
    out: str | os.PathLike[str], *, store: str | None = None, rollouts: str | os.PathLike[str] | None = None,
    catalog: str | os.PathLike[str] | None = None, problems: str | os.PathLike[str] | None = None,
    banks: str | os.PathLike[str] | None = None, split: str | os.PathLike[str] | None = None,
    config: CorpusConfig | None = None, query: Any = None,
    progress: Callable[[str, int | None], Callable[[int], None]] | None = None,
) -> CorpusReport:
    """Build the corpus into ``out`` from a store URL or an upstream rollout file (module docstring). ``split``
    reuses a frozen split manifest (``split.json`` of an earlier build: the partitions stay put as data grows; rows
    of problems it does not hold are counted ``unknown_problem``, never exported); an edited or leaking one raises
    :class:`~shoparena.errors.LeakError` before anything is written.

    ``progress(description, total)`` may return an ``advance(n)`` callable (the CLI's progress bar)."""
    from shoparena.artefact import relative_to
    from shoparena.corpus.export import jsonable, write_grpo, write_kto, write_manifest, write_sft
    from shoparena.corpus.normalize import iter_rollouts, iter_store
    from shoparena.corpus.split import (
        VALIDATION,
        SplitConfig,
        SplitManifest,
        assign_rows,
        split_problems,
        verify_split,
    )

    cfg = config or CorpusConfig()
    if (store is None) == (rollouts is None):
        raise ConfigError("give exactly one source", hint="--from STORE_URL or --from-rollouts FILE")
    if rollouts is not None and (catalog is None or problems is None):
        raise ConfigError("a rollout file needs its catalog and problems",
                          hint="--from-rollouts FILE --catalog DIR --problems FILE")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_id, clusters, static_names = _load_problems(problems, banks)
    index = None
    if catalog is not None:
        from shoparena.catalog.directory import index_path
        from shoparena.catalog.index import SearchIndex

        index = SearchIndex.open(index_path(catalog))

    # 1–2. normalise and filter in one streaming pass: only what the filter keeps for ranking, the problem views
    # and the rewrite candidates stay in memory, never the whole firehose
    normalize = StageReport(stage="normalize")
    tap = _Tap(normalize, views=by_id is None, rewrite=cfg.rewrite != "none",
               rewrite_require_success=cfg.rewrite_require_success)
    known = (lambda pid: index.doc_of(pid) >= 0) if index is not None else None
    if store is not None:
        from shoparena.store import open_store

        with open_store(store, readonly=True) as st:
            total = st.count(query) if query is not None else st.count()
            tap.advance = progress("normalise + filter", total) if progress else None
            result = run_filters(tap(iter_store(st, query)), cfg.filter, known_ids=known)
        source: dict[str, Any] = {"kind": "store", "url": _redact(store), "records": total}
    else:
        tap.advance = progress("normalise + filter", None) if progress else None
        stream: Iterator[Trajectory | Rejection] = iter_rollouts(rollouts, by_id)  # type: ignore[arg-type]
        if index is not None and by_id:
            stream = _score_rows(stream, by_id, index)
        result = run_filters(tap(stream), cfg.filter, known_ids=known)
        if normalize.seen and normalize.rejected.get("bad_json", 0) == normalize.seen:
            raise DataError(f"{rollouts}: none of its {normalize.seen} lines is a JSON rollout record",
                            hint="pass the rollouts.jsonl a `shoparena run` wrote (or a store with --from)")
        source = {"kind": "rollouts", "file": relative_to(rollouts, out_dir),  # type: ignore[arg-type]
                  "lines": normalize.seen}
    if not normalize.kept:  # nothing to split or export: refused before anything is written
        raise _empty(normalize, [], None, selected=query is not None)
    if by_id is None:
        by_id = tap.views
        source["problems"] = "from records"
    else:
        source["problems"] = relative_to(problems or banks, out_dir)  # type: ignore[arg-type]

    if catalog is not None:  # the catalog the harness stages search (`shoparena train` finds it here)
        source["catalog"] = relative_to(catalog, out_dir)

    # 3. rewrite axis-B rows into agentic form; the rewrites pass the same format gate and ranking
    rewrite_reports: list[StageReport] = []
    rewritten_kept: list[Trajectory] = []
    if cfg.rewrite != "none":
        rewritten, rw_report = _rewrite(tap.candidates, cfg.rewrite, catalog)
        rewrite_reports.append(rw_report)
        blank = [dataclasses.replace(t, judge_score=None, coefficient=None,
                                     provenance={**t.provenance, "original_judge_score": t.judge_score})
                 for t in rewritten]
        again = run_filters(blank, cfg.filter.model_copy(update={"judge_missing": "keep"}), known_ids=known)
        for r in again.reports:
            if r.stage != "judge":
                r.stage = f"rewrite:{r.stage}"
                rewrite_reports.append(r)
        rewritten_kept = again.kept

    # 4. split by leak cluster, prove it, route rows
    if split is not None:  # a frozen split: re-verified (hashes, then the guard) over the problems it holds
        manifest = SplitManifest.load(split)
        frozen = manifest.group_of()
        proof = verify_split(manifest, {pid: p for pid, p in by_id.items() if pid in frozen})
        source["split"] = relative_to(split, out_dir)
    else:
        split_cfg = cfg.split or SplitConfig(seed=cfg.seed)
        if static_names:
            split_cfg = split_cfg.model_copy(update={"static_suites": tuple(sorted({*split_cfg.static_suites,
                                                                                     *static_names}))})
        # clusters=None: cluster afresh — the problems' own cluster ids are one link kind among several (shared
        # GT ids, canonical queries, signatures, paraphrases), so the split is at least as coarse as they are
        manifest = split_problems(by_id.values(), clusters=clusters, config=split_cfg)
        proof = verify_split(manifest, by_id)
    sft_rows = assign_rows([*result.kept, *rewritten_kept], manifest)
    pref_rows = assign_rows([*result.kept, *result.failed, *result.axis_b], manifest)
    if not sft_rows["train"]:  # refused before anything is written
        raise _empty(normalize, [*result.reports, *rewrite_reports, sft_rows.report], sft_rows)
    manifest.save(out_dir / "split.json")

    # 5. export
    sft_train = write_sft(sft_rows["train"], out_dir, name="sft_train", manifest=manifest, partition="train")
    if not sft_train.rows:  # every train row was malformed for the trainer: no manifest marks this finished
        (out_dir / "manifest.json").unlink(missing_ok=True)
        raise _empty(normalize, [sft_train.report], None)
    exports = [
        sft_train,
        write_sft(sft_rows["eval"], out_dir, name="sft_eval", manifest=manifest, partition="eval"),
        *([write_sft(sft_rows[VALIDATION], out_dir, name="sft_validation", manifest=manifest, partition=VALIDATION)]
          if VALIDATION in sft_rows else []),
        write_kto(pref_rows["train"], out_dir, name="kto_train", min_judge=cfg.kto_min_judge, turns=cfg.kto_turns,
                  manifest=manifest, partition="train"),
        write_grpo(sft_rows["train"], {p: by_id[p] for p in manifest.partitions["train"].problems if p in by_id},
                   out_dir, name="grpo_train", require_success=cfg.grpo_require_success, manifest=manifest,
                   partition="train", ground_truth=problems is not None or banks is not None),
    ]
    exported = {t.traj_id: t for part in (sft_rows, pref_rows) for rows_ in part.values() for t in rows_}
    write_jsonl(out_dir / "provenance.jsonl", (_provenance(exported[k]) for k in sorted(exported)))
    stages = [normalize, *result.reports, *rewrite_reports, sft_rows.report]
    path = write_manifest(out_dir, sources=source, filter_config=cfg.model_dump(mode="json"),
                          reports=[s.to_dict() for s in stages], split=manifest, exports=exports,
                          proof=proof.model_dump(mode="json"))
    agentic = len(result.kept)
    return CorpusReport(
        out=str(out_dir), source=source, stages=[jsonable(s) for s in stages], agentic_rows=agentic,
        rewritten_rows=len(rewritten_kept), growth=round(len(rewritten_kept) / agentic, 4) if agentic else None,
        split={"sizes": manifest.sizes(), "rows": {k: len(v) for k, v in sft_rows.items()},
               "proof": "ok" if proof.ok else "failed"},
        exports={e.name: jsonable(e) for e in exports}, manifest=str(path))


#: What to try when a stage / reason rejected most rows of an empty corpus (``stage:reason`` or ``stage``).
_EMPTY_HINTS: dict[str, str] = {
    "normalize:empty_trace": "the records hold no steps: the agents produced nothing (e.g. they failed in the "
                             "sandbox); rerun them and check one episode before building",
    "normalize:unknown_problem": "the rollouts' problems are not in --problems: pass the problem file they ran on",
    "normalize": "the source holds no readable trajectory: pass the store or rollout file the agents wrote",
    "judge": "every row fell below the judge gate: lower --min-judge-score or judge the runs first",
    "format": "every row failed the format gate: check the agents' traces (a think-then-stop turn, an unpaired "
              "tool call, a recommendation that does not resolve in --catalog)",
    "axis": "no row is agentic (axis A): keep --rewrite template so axis-B rows are rewritten into agentic ones",
    "outcome": "every row failed the outcome gate: drop --require-success",
    "split": "no kept row falls in the train partition: lower --eval-fraction / --validation, or pass a --split "
             "whose train partition holds these problems",
}


def _empty(normalize: StageReport, stages: list[StageReport], rows: AssignedRows | None, *,
           selected: bool = False) -> DataError:
    """The one error of an empty corpus: which stage and reason rejected the most rows (with counts), and a hint.
    ``rows`` (the split's routing) counts kept rows that fell in a partition other than train."""
    counts: dict[tuple[str, str], int] = {}
    if not normalize.kept:
        if not normalize.seen:
            what = "the selected records hold" if selected else "the source holds"
            return DataError(f"the corpus is empty: {what} no trajectory (0 records read)",
                             hint="widen --since / --until" if selected else
                             "pass a store or rollout file that holds the agents' runs")
        counts = {("normalize", r): n for r, n in normalize.rejected.items()}
        head = f"the corpus is empty: normalisation kept none of the {normalize.seen} records"
    else:
        for s in stages:
            for r, n in s.rejected.items():
                if s.stage.endswith("axis") and r == "axis_b":
                    continue  # routed to the rewriter, not lost: the rewrite stages count what became of them
                counts[(s.stage, r)] = counts.get((s.stage, r), 0) + n
        for part, kept in (rows or {}).items():
            if part != "train" and kept:
                counts[("split", f"in_{part}")] = len(kept)
        head = (f"the corpus has no SFT train row: normalisation kept {normalize.kept} of {normalize.seen} "
                f"records, none reached sft_train")
    if not counts:
        return DataError(head, hint="rerun with --json to see every stage's counts")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    (stage, reason), n = ranked[0]
    rest = "; ".join(f"{s} {r} {k}" for (s, r), k in ranked[1:4])
    detail = f"most rejected by {stage} {reason} ({n} of {sum(counts.values())})" + (f"; then {rest}" if rest else "")
    base = stage.removeprefix("rewrite:").removeprefix("export:")
    hint = _EMPTY_HINTS.get(f"{base}:{reason}") or _EMPTY_HINTS.get(base) or \
        "rerun with --json to see every stage's counts, and fix the source or relax that gate"
    return DataError(f"{head} ({detail})", hint=hint)


def _provenance(t: Trajectory) -> dict[str, Any]:
    """One ``provenance.jsonl`` line: where an exported row came from (kept out of the training rows)."""
    return {"traj_id": t.traj_id, "source": t.source, "problem_id": t.problem_id, "cluster_id": t.cluster_id,
            "suite": t.suite, "bucket": t.bucket, "success": t.success, "judge_score": t.judge_score,
            "axis": t.axis, "axis_source": t.axis_source, "rewritten": t.rewritten, "provenance": t.provenance}


def _rewrite(rows: list[Trajectory], how: str, catalog: str | os.PathLike[str] | None
             ) -> tuple[list[Trajectory], StageReport]:
    from shoparena.corpus.rewrite import LLMRewriter, TemplateRewriter, catalog_observer, rewrite_all

    observe = catalog_observer(catalog) if catalog is not None else None
    rewriter: Any = TemplateRewriter(observe=observe) if how == "template" else LLMRewriter(how, observe=observe)
    return rewrite_all(rows, rewriter)


def _redact(url: str) -> str:
    """A store URL without its password."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url
