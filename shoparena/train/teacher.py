"""Stage 3: teacher SFT. Trajectories of a teacher (any model URI; offline default ``policy:expert``) through the
real harness on the train problems, the successful ones as SFT rows, the voucher bucket up-sampled (paper §4:
"a step-wise corpus with the voucher bucket up-sampled 3×"), then continued SFT of the stage's input checkpoint.

Two knobs size the stage for the paper's budget and for a learning curve (docs/training.md, "Teacher budget and
the learning curve"):

- ``bank_problems``: the teacher also runs on up to N fresh problems of the arena's banks — train-visible bank
  problems the corpus has no rows for — whose leak clusters are disjoint from every held-out partition of the
  corpus split (``eval``, ``never_touch`` and any other partition but ``train``, e.g. ``validation``). Candidates
  are refused by problem id, by cluster (the bank's and the split's), by shared GT product id or canonical query,
  and by a fresh clustering of held-out plus candidates; the chosen problems then go through the leak guard's
  proof (:func:`shoparena.tasks.guard.prove`) against the held-out problems, and any violation is a
  :class:`~shoparena.errors.LeakError`. The draw is seeded and stratified by bucket.
- ``max_rows``: after sampling, voucher up-sampling and fitting (the rows the SFT trainer would keep), a seeded
  subsample of that many teacher rows is trained. The subsamples are prefixes of one seeded permutation, so a
  smaller budget's rows are a subset of a larger one's with the same seed. ``0`` trains nothing: the stage passes
  its input checkpoint on and says so in ``stage.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from shoparena.errors import ConfigError, DataError, LeakError, NotFoundError
from shoparena.tasks.types import BUCKETS, Problem
from shoparena.train.checkpoint import checkpoint_sha256, load_stage, write_stage
from shoparena.train.harness import collect_successes, upsample
from shoparena.train.sft import SFTConfig, copy_checkpoint, in_profile, train_sft
from shoparena.train.trainer import StageProgress
from shoparena.train.types import StageResult

if TYPE_CHECKING:
    from shoparena.corpus.split import SplitManifest
    from shoparena.tasks.banks import BankSet

__all__ = ["BankDraw", "TeacherConfig", "draw_bank_problems", "find_banks", "fit_rows", "held_out_problems",
           "prove_fresh", "subsample_rows", "train_teacher"]

BankPartition = Literal["open", "retired", "held_out", "reserve"]
"""Bank partitions a teacher may draw from; ``static`` (the frozen suites and their linked problems) never."""
HELD_OUT_GROUP = "held_out"
DRAWN_GROUP = "teacher_bank"
BANK_DRAW_FILE = "bank_problems.json"


class TeacherConfig(SFTConfig):
    """Stage-3 settings: the teacher, its sampling, the voucher up-sampling, the fresh bank problems and the row
    budget; the rest is the SFT trainer's."""

    teacher: str = "policy:expert"
    n_samples: int = Field(1, ge=1)
    temperature: float | None = None
    """Default: the harness's (0 for one sample)."""
    upsample_bucket: str = "voucher"
    upsample_factor: int = Field(3, ge=1)
    max_problems: int | None = Field(None, ge=1)
    """The first N of the corpus's train problems (``grpo_train``); ``None``: all of them."""
    agent: str = "react"
    timeout_s: float = Field(300.0, gt=0)
    concurrency: int | None = Field(None, ge=1)
    bank_problems: int = Field(0, ge=0)
    """Also run the teacher on up to this many fresh bank problems (module docstring): not train problems already,
    their leak clusters disjoint from every held-out partition of the corpus split, a seeded draw stratified by
    bucket (each bucket's share of the eligible pool). ``0``: the corpus's train problems only."""
    banks: str | None = Field(None, min_length=1)
    """The saved bank set (``shoparena arena banks build``) the fresh problems come from. ``None``: the bank the
    corpus was built from (``corpus build --banks``, recorded in the corpus manifest)."""
    bank_partitions: tuple[BankPartition, ...] = ("open", "retired")
    """Bank partitions drawn from. Default: the train-visible ones; ``held_out`` / ``reserve`` are the arena's
    hidden race problems, ``static`` is never drawn."""
    max_rows: int | None = Field(None, ge=0)
    """Train on a seeded subsample of this many teacher rows (after sampling, up-sampling and fitting; fewer when
    fewer are available). ``0``: nothing is sampled or trained, the input checkpoint is passed on. ``None``: every
    row."""

    @field_validator("bank_partitions")
    @classmethod
    def _distinct(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError("bank_partitions must name at least one bank partition, each once")
        return v


# ── the fresh bank problems ──────────────────────────────────────────────────────────────────────────────────


@dataclass
class BankDraw:
    """Fresh bank problems for the teacher and why the others were refused."""

    problems: list[Problem] = field(default_factory=list)
    pool: int = 0
    """Eligible problems before the draw."""
    pool_by_bucket: dict[str, int] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
    """Reason → bank problems left out (``bank_partition``, ``train_problem``, ``held_out_problem``,
    ``held_out_cluster``, ``held_out_gt_product``, ``held_out_query``, ``fresh_cluster``, ``not_in_catalog``)."""
    refused_ids: dict[str, list[str]] = field(default_factory=dict)
    """Reason → the ids refused for it, except ``bank_partition`` and ``train_problem`` (``bank_problems.json``)."""
    checks: list[str] = field(default_factory=list)
    """The guard checks the chosen problems passed against the held-out ones."""

    def refuse(self, reason: str, pid: str) -> None:
        self.refused[reason] += 1
        if reason not in ("bank_partition", "train_problem"):
            self.refused_ids.setdefault(reason, []).append(pid)

    def summary(self) -> dict[str, Any]:
        return {"drawn": len(self.problems), "by_bucket": dict(sorted(Counter(p.bucket for p in self.problems)
                                                                     .items())),
                "pool": self.pool, "pool_by_bucket": self.pool_by_bucket, "refused": dict(sorted(self.refused.items())),
                "checks": self.checks}


def _order(seed: int | str, pid: str) -> str:
    return hashlib.sha256(f"{seed}:teacher-bank:{pid}".encode()).hexdigest()


def _quotas(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """``n`` (at most the pool) split over buckets in proportion to their pool sizes, largest remainders first
    (ties in :data:`BUCKETS` order)."""
    total = sum(sizes.values())
    n = min(n, total)
    if not total:
        return {}
    exact = {b: n * k / total for b, k in sizes.items()}
    out = {b: int(x) for b, x in exact.items()}
    rank = {b: i for i, b in enumerate(BUCKETS)}
    for b in sorted(exact, key=lambda b: (-(exact[b] - out[b]), rank.get(b, len(rank)), b))[: n - sum(out.values())]:
        out[b] += 1
    return out


def draw_bank_problems(bank: BankSet, split: SplitManifest, held_out: Mapping[str, Problem], train_ids: Collection[str], n: int,
                       seed: int | str, *, partitions: Sequence[str] = ("open", "retired"),
                       known_product: Callable[[str], bool] | None = None) -> BankDraw:
    """Up to ``n`` problems of ``bank`` (a :class:`~shoparena.tasks.banks.BankSet`) for the teacher: in one of
    ``partitions`` (never ``static``), not in ``train_ids``, not in the corpus ``split`` (a
    :class:`~shoparena.corpus.split.SplitManifest`) outside its ``train`` partition, their bank cluster holding no
    held-out problem and not a held-out cluster of the split, no GT product id or canonical query shared with a
    ``held_out`` problem (every problem of the split's partitions other than ``train``), not clustered with one by a
    fresh clustering, every GT product in the catalog (``known_product``). Per bucket (its share of the eligible
    pool) the problems are taken in ``sha256(seed, id)`` order; the choice is then proven (:func:`prove_fresh`)."""
    from shoparena.corpus.split import fresh_clusters
    from shoparena.tasks.signatures import canonical_query

    if "static" in partitions:
        raise ConfigError("the static bank partition is never drawn for training",
                          hint="teacher.bank_partitions: open, retired (train-visible), held_out, reserve")
    draw = BankDraw()
    held_part = {pid: name for name, info in split.partitions.items() if name != "train" for pid in info.problems}
    missing = sorted(set(held_part) - set(held_out))
    if missing:
        raise DataError(f"{len(missing)} held-out problems of the corpus split were not given "
                        f"({', '.join(missing[:3])}): disjointness from them cannot be proven",
                        hint="pass the bank or problem file the corpus was built from")
    held_clusters = {cid for name, info in split.partitions.items() if name != "train" for cid in info.clusters}
    held_gt = {g for p in held_out.values() for g in p.gt_ids()}
    held_query = {canonical_query(p.query) for p in held_out.values()}
    bank_map = bank.cluster_map()
    by_cluster: dict[str, list[str]] = {}
    for pid, cid in bank_map.items():
        by_cluster.setdefault(cid, []).append(pid)
    train = set(train_ids)
    wanted = set(partitions)
    candidates: dict[str, Problem] = {}
    for pid, part in bank.partition_map().items():
        p = bank.problem(pid)
        cid = bank_map[pid]
        reason = ("bank_partition" if part not in wanted
                  else "train_problem" if pid in train
                  else "held_out_problem" if pid in held_part
                  else "held_out_cluster" if cid in held_clusters or any(m in held_part for m in by_cluster[cid])
                  else "held_out_gt_product" if held_gt.intersection(p.gt_ids())
                  else "held_out_query" if canonical_query(p.query) in held_query
                  else "not_in_catalog" if known_product is not None and not all(map(known_product, p.gt_ids()))
                  else None)
        if reason is None:
            candidates[pid] = p
        else:
            draw.refuse(reason, pid)
    if candidates:  # a fresh clustering links what the stored maps may not (paraphrases, signatures)
        fresh = fresh_clusters({**held_out, **candidates}.values(), split.config.cluster)
        tainted = {fresh[pid] for pid in held_out}
        for pid in [pid for pid in candidates if fresh[pid] in tainted]:
            del candidates[pid]
            draw.refuse("fresh_cluster", pid)
    pool: dict[str, list[Problem]] = {}
    for p in candidates.values():
        pool.setdefault(p.bucket, []).append(p)
    draw.pool = len(candidates)
    draw.pool_by_bucket = {b: len(v) for b, v in sorted(pool.items())}
    for bucket, k in sorted(_quotas(draw.pool_by_bucket, n).items()):
        draw.problems += sorted(pool[bucket], key=lambda p: (_order(seed, p.problem_id), p.problem_id))[:k]
    draw.problems.sort(key=lambda p: (_order(seed, p.problem_id), p.problem_id))
    draw.checks = prove_fresh(draw.problems, held_out, split,
                              stored=({**bank_map, **split.clusters}, {**split.clusters, **bank_map}))
    return draw


def prove_fresh(chosen: Sequence[Problem], held_out: Mapping[str, Problem], split: SplitManifest, *,
                stored: Sequence[Mapping[str, str]] = ()) -> list[str]:
    """The leak guard's proof that ``chosen`` shares nothing with ``held_out`` (problem ids, leak clusters, GT
    product ids, canonical queries): on each ``stored`` cluster map (problem → cluster; default: the split's; a
    problem a map lacks is its own cluster there) and on a fresh clustering with the split's cluster config.
    Returns the checks passed; any violation raises :class:`LeakError` listing each."""
    from shoparena.corpus.split import fresh_clusters
    from shoparena.tasks.guard import prove

    if not chosen:
        return []
    problems = {**held_out, **{p.problem_id: p for p in chosen}}
    group_of = {**{pid: HELD_OUT_GROUP for pid in held_out}, **{p.problem_id: DRAWN_GROUP for p in chosen}}
    both = [p.problem_id for p in chosen if p.problem_id in held_out]
    violations = [f"disjoint_problem_id: {len(both)} chosen problems are held out: {', '.join(both[:5])}"] \
        if both else []
    for clusters in stored or (split.clusters,):
        one = {pid: clusters.get(pid, f"problem:{pid}") for pid in problems}
        violations += [f"{v.check}: {v.detail}" for v in prove(problems, group_of, one)]
    violations += [f"fresh clustering: {v.check}: {v.detail}"
                   for v in prove(problems, group_of, fresh_clusters(problems.values(), split.config.cluster))]
    if violations:
        raise LeakError(f"fresh bank problems for the teacher cross the leak-cluster guard ({len(violations)} "
                        f"violations): {violations[0]}",
                        hint="these problems share a cluster, GT product or query with the corpus's held-out "
                             "partitions; they are never trained on", violations=violations)
    return ["whole_clusters", "disjoint_problem_id", "disjoint_cluster_id", "disjoint_gt_product_id",
            "disjoint_canonical_query", "fresh_whole_clusters", "fresh_disjoint"]


def held_out_problems(corpus_dir: str | os.PathLike[str], *, banks: str | os.PathLike[str] | None = None
                      ) -> tuple[SplitManifest, dict[str, Problem]]:
    """The corpus's split and the problems of its held-out partitions (every partition but ``train``), read as the
    evaluation reads them (:func:`shoparena.corpus.problems.partition_problems`: the corpus verified against its
    manifest, the problems against the partition's frozen ids and GT-product hash) from the corpus's own problem
    source or, when it records none that exists, from ``banks``."""
    from shoparena.corpus.problems import partition_problems
    from shoparena.corpus.split import SplitManifest

    root = Path(corpus_dir)
    if not (root / "split.json").is_file():
        raise NotFoundError(f"{root}: no split.json (not a corpus directory)",
                            hint="the teacher's bank problems are chosen against the corpus's held-out partitions")
    split = SplitManifest.load(root / "split.json")
    out: dict[str, Problem] = {}
    for name, info in split.partitions.items():
        if name == "train" or not info.problems:
            continue
        try:
            found = partition_problems(root, name)
        except (NotFoundError, ConfigError):
            if banks is None:
                raise
            found = partition_problems(root, name, problems=banks)
        out.update((p.problem_id, p) for p in found)
    return split, out


def find_banks(config: TeacherConfig, corpus_dir: str | os.PathLike[str]) -> Path:
    """The bank directory of ``config.banks``, else the bank the corpus was built from (its manifest's
    ``sources.problems``); a :class:`ConfigError` with a hint when neither is a saved bank set."""
    from shoparena.artefact import resolve_input

    hint = ("set teacher.banks: DIR in the recipe (a saved bank set, `shoparena arena banks build`), or build the "
            "corpus with `shoparena corpus build --banks DIR`; teacher.bank_problems: 0 samples the train "
            "problems only")
    if config.banks is not None:
        path = Path(config.banks).expanduser()
        if not (path / "manifest.json").is_file():
            raise ConfigError(f"teacher.banks {config.banks!r}: no saved bank set there (manifest.json missing)",
                              hint=hint)
        return path
    from shoparena.corpus.export.manifest import read_manifest

    src = read_manifest(corpus_dir, verify=False).get("sources") or {}
    recorded = src.get("problems") if isinstance(src, dict) else None
    path = resolve_input(recorded, corpus_dir) if isinstance(recorded, str) and recorded else None
    if path is None or not (path / "manifest.json").is_file():
        raise ConfigError(f"teacher.bank_problems {config.bank_problems}: the corpus {corpus_dir} was not built "
                          f"from a bank set (its problems: {recorded or 'none recorded'})", hint=hint)
    return path


def _catalog_check(catalog_dir: str | os.PathLike[str]) -> Callable[[str], bool]:
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex

    index = SearchIndex.open(index_path(catalog_dir))
    return lambda pid: index.doc_of(pid) >= 0


def _bank_draw(config: TeacherConfig, train_ids: Collection[str], corpus_dir: Path | None,
               catalog_dir: str | os.PathLike[str]) -> tuple[Path, BankDraw]:
    from shoparena.tasks.banks import BankSet

    if corpus_dir is None:
        raise ConfigError("teacher.bank_problems: no corpus to prove the bank problems held-out-disjoint against",
                          hint="run the stage through `shoparena train` (run_recipe) or pass corpus_dir")
    banks = find_banks(config, corpus_dir)
    split, held = held_out_problems(corpus_dir, banks=banks)
    bank = BankSet.load(banks)
    draw = draw_bank_problems(bank, split, held, train_ids, config.bank_problems, config.seed,
                              partitions=config.bank_partitions, known_product=_catalog_check(catalog_dir))
    return banks, draw


# ── the row budget ───────────────────────────────────────────────────────────────────────────────────────────


def fit_rows(tokenizer: Any, rows: Sequence[dict[str, Any]], config: SFTConfig
             ) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The rows the SFT trainer of ``config`` keeps (its tool profile, then rendering within ``max_length`` /
    ``turn_tokens``: :func:`shoparena.train.format.encode_rows`), order kept, and the encoder's counts."""
    from shoparena.train.format import encode_rows

    kept, off = in_profile(rows, config.tools)
    fmt = config.format()
    counts: Counter[str] = Counter(off_profile=off)
    out = []
    for row in kept:
        enc = encode_rows(tokenizer, [row], fmt, validate=False)
        counts.update(enc.counts)
        if enc.samples:
            out.append(row)
    return out, counts


def subsample_rows(rows: Sequence[dict[str, Any]], n: int | None, seed: int | str) -> list[dict[str, Any]]:
    """``n`` of ``rows`` (all when ``n`` is None or not smaller), in their order: the first ``n`` positions of one
    ``seed``-ed permutation, so a smaller budget's rows are a subset of a larger one's."""
    if n is None or n >= len(rows):
        return list(rows)
    order = list(range(len(rows)))
    random.Random(f"{seed}:teacher-rows").shuffle(order)
    return [rows[i] for i in sorted(order[:n])]


# ── the stage ────────────────────────────────────────────────────────────────────────────────────────────────


def _pass_on(model_dir: Path, out: Path, metrics: dict[str, Any]) -> StageResult:
    copy_checkpoint(model_dir, out / "model")
    return write_stage(out, StageResult(stage="teacher", model_dir=out / "model",
                                        checkpoint_sha256=checkpoint_sha256(out / "model"), metrics=metrics))


def train_teacher(model_dir: str | os.PathLike[str], problems: Sequence[Problem], eval_rows: Sequence[dict[str, Any]],
                  config: TeacherConfig, out_dir: str | os.PathLike[str], *, catalog_dir: str | os.PathLike[str],
                  resume: bool = False, progress: StageProgress | None = None,
                  corpus_dir: str | os.PathLike[str] | None = None) -> StageResult:
    """Collect the teacher's successful trajectories on the train problems (plus ``config.bank_problems`` fresh
    bank problems), up-sample, keep ``config.max_rows`` of them, continue SFT into ``out_dir/model``.
    ``corpus_dir``: the corpus the train problems came from (its split and banks; ``run_recipe`` passes it), needed
    for ``bank_problems``."""
    out = Path(out_dir)
    if resume and (done := load_stage(out)) is not None:
        return done
    out.mkdir(parents=True, exist_ok=True)
    chosen = list(problems)[: config.max_problems] if config.max_problems else list(problems)
    budget: dict[str, Any] = {"max_rows": config.max_rows}
    if config.max_rows == 0:
        if progress is not None:
            progress.close()
        return _pass_on(Path(model_dir), out, {
            "teacher": config.teacher, "problems": 0, **budget, "teacher_rows_available": None,
            "teacher_rows_used": 0,
            "note": "max_rows 0: the teacher was not sampled and nothing was trained; the input checkpoint is "
                    "passed on unchanged"})
    bank_metrics: dict[str, Any] = {}
    drawn: list[Problem] = []
    if config.bank_problems:
        corpus = Path(corpus_dir) if corpus_dir is not None else None
        banks, draw = _bank_draw(config, {p.problem_id for p in problems}, corpus, catalog_dir)
        drawn = draw.problems
        (out / BANK_DRAW_FILE).write_text(json.dumps({
            "banks": str(banks), "corpus": str(corpus), **draw.summary(),
            "problem_ids": [p.problem_id for p in drawn], "refused_ids": draw.refused_ids}, indent=1) + "\n", encoding="utf-8")
        bank_metrics = {"bank_problems": {"banks": str(banks), "asked": config.bank_problems, **draw.summary()}}
    chosen += drawn
    got = collect_successes(catalog_dir, chosen, model=config.teacher, k=config.n_samples,
                            temperature=config.temperature, seed=config.seed, out_dir=out / "samples",
                            agent=config.agent, timeout_s=config.timeout_s, concurrency=config.concurrency,
                            resume=resume,
                            progress=progress.phase("teacher sampling", len(chosen) * config.n_samples)
                            if progress is not None else None)
    if progress is not None:
        progress.close()
    if not got.rows:
        raise DataError(f"the teacher {config.teacher} solved none of {len(chosen)} train problems",
                        hint="use a stronger teacher or more problems")
    fitted, fit_counts = got.rows, None
    if config.max_rows is not None:  # the budget counts rows the trainer keeps, not rows it would drop
        from shoparena.train.checkpoint import import_torch_stack

        _, transformers = import_torch_stack()
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        fitted, fit_counts = fit_rows(tokenizer, got.rows, config)
        if not fitted:
            raise DataError(f"none of the teacher's {len(got.rows)} rows fits the trainer ({dict(fit_counts)})",
                            hint="raise max_length, use truncation: keep_start, or compact observations")
    rows = upsample(fitted, config.upsample_bucket, config.upsample_factor)
    used = subsample_rows(rows, config.max_rows, config.seed)
    metrics = {"teacher": config.teacher, "teacher_asr": got.asr, "samples": dict(got.counts),
               "kept": len(got.rows), "rows_by_bucket": dict(Counter(r.get("bucket") for r in got.rows)),
               "rows_by_bucket_upsampled": dict(Counter(r.get("bucket") for r in rows)), "problems": len(chosen),
               **budget, "teacher_rows_available": len(rows), "teacher_rows_used": len(used),
               "rows_by_bucket_used": dict(Counter(r.get("bucket") for r in used)), **bank_metrics}
    if drawn:
        ids = {p.problem_id for p in drawn}
        metrics["kept_from_bank_problems"] = sum(r.get("problem_id") in ids for r in got.rows)
    if fit_counts is not None:
        metrics["fit_counts"] = dict(fit_counts)
    res = train_sft(model_dir, used, eval_rows, config, out, resume=resume, progress=progress, stage="teacher")
    return write_stage(out, res.model_copy(update={"metrics": {**res.metrics, **metrics}}))

