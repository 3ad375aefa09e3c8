"""The one evaluation core: sandbox → rule score → (judge) → (record), for ``shoparena validate`` and ``run``.

docs/arena.md §6. :func:`evaluate_problems` is the loop both faces sit on: one gateway (search in the ``oro`` flavour +
inference, every call logged) served on a Unix socket for the sandbox, one run token per (problem, sample), the
sanitised problem view (:func:`~shoparena.validator.sandbox.sanitise.sanitise`), one seed per (problem, sample)
(:func:`sample_seed`), and, as each problem finishes, one envelope → result step (:func:`_finish_problem`): the
rule score (strict by default), a judge verdict when a judge is given (``SUCCESS`` envelopes only, §7.1), and a
sealed trajectory record when provenance is given. ``shoparena run`` passes neither (:mod:`.run`);
:func:`evaluate` passes both and writes the records to the trajectory store as problems finish, so a validator
killed mid-run loses nothing committed, and a restart with the same evaluation id (derived from the agent code,
the problems and the pipeline) skips problems already recorded.

Model URIs are checked before any problem runs (:func:`~shoparena.llm.check.check_models`); an inference call
the model backend failed (the gateway's 502) makes that problem ``FAILED`` with the reason, never a success.
Judge infrastructure failures never become scores: a problem whose verdict failed gets no record (a retry judges
it again), and a run where more than half of at least three judge calls failed is ``FAILED`` (ORO's rule), as is
a run whose judge could not be reached at all (reason ``judge_unavailable: …``).
The summary carries ORO's score components and ``final = success_rate × coeff(q)``, folded with the agentic-richness
incentive when ``richness_weight`` > 0 (:func:`shoparena.scoring.richness.fold`; weight 0 is ORO's score and
today's pipeline version, byte for byte).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from shoparena import __version__
from shoparena.scoring.richness import fold, richness, richness_of_record, scorer_id
from shoparena.scoring.types import ProblemScore, ScoreReport
from shoparena.store.types import PipelineVersion, TrajectoryRecord
from shoparena.tasks.types import Problem
from shoparena.types import Mode
from shoparena.validator.judge.types import Verdict, coefficient
from shoparena.validator.output import check_envelope
from shoparena.validator.sandbox.types import Envelope, Outcome, Sandbox
from shoparena.validator.types import AgentSpec, EvaluationSummary, ProblemLine, ValidatorConfig

__all__ = ["SEARCH_FLAVOR", "AgentSpec", "EvaluationSummary", "ProblemLine", "ProblemResult", "Provenance",
           "ValidatorConfig", "aggregate_scores", "evaluate", "evaluate_problems", "open_sandbox", "sample_seed"]

SCORER_ID = "shoparena-rule/1"
SEARCH_FLAVOR = "oro"
SANDBOX_UNAVAILABLE = "sandbox_unavailable"
"""Prefix of an evaluation's ``failure_reason`` when the sandbox, not the agent, failed on some problems."""
"""The search service every agent sees (ORO's: Lucene special characters as spaces, capacity 10,000)."""


def sample_seed(base: int, problem_id: str, sample: int) -> int:
    """``SHOPARENA_SEED`` of one (problem, sample): the same for ``run`` and ``validate``, independent of order."""
    digest = hashlib.blake2b(f"{base}:{problem_id}:{sample}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


@dataclass(frozen=True)
class Provenance:
    """What a trajectory record needs beside the trajectory (validate only)."""

    agent: AgentSpec
    code_sha: str
    pipeline: PipelineVersion
    run_id: str
    validator_hotkey: str | None = None


@dataclass(frozen=True)
class ProblemResult:
    """One (problem, sample) after the envelope → result step."""

    problem: Problem
    sample: int
    outcome: Outcome
    envelope: Envelope
    """The envelope as judged by the validator (a backend failure turns ``SUCCESS`` into ``FAILED``)."""
    calls: list[dict[str, Any]]
    score: ProblemScore
    """The rule scorer's result."""
    steps: list[dict[str, Any]]
    verdict: Verdict | None = None
    record: TrajectoryRecord | None = None

    @property
    def infra_failure(self) -> bool:
        """The sandbox failed, not the agent (:attr:`Outcome.infra_failure`): no score, no record, run it again."""
        return self.outcome.infra_failure


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def eval_run_id(agent: AgentSpec, code_sha: str, problems: Sequence[Problem], pipeline: PipelineVersion,
                validator_hotkey: str | None) -> str:
    """Deterministic: the same agent code, problems, pipeline and validator give the same id (so a restart
    resumes instead of duplicating)."""
    h = hashlib.sha256()
    for part in (agent.agent_id, agent.agent_version, code_sha, pipeline.key(), validator_hotkey or "",
                 *sorted(p.problem_id for p in problems)):
        h.update(part.encode())
        h.update(b"\0")
    return "ev-" + h.hexdigest()[:20]


def pipeline_version(index: Any, config: ValidatorConfig, judge: Any = None) -> PipelineVersion:
    """The scoring pipeline of ``config`` (``judge`` None: no judge, as in ``run``)."""
    from shoparena.scoring.similarity import get_similarity

    return PipelineVersion(scorer=scorer_id(SCORER_ID, config.richness_weight), scorer_mode=config.scorer_mode,
                           similarity=get_similarity(config.similarity).name, catalog_sha256=index.catalog_sha256,
                           judge=judge.name if judge is not None else "none",
                           judge_prompt_version=judge.prompt_version if judge is not None else "none",
                           package_version=__version__)


def open_sandbox(config: ValidatorConfig, catalog: str | os.PathLike[str]) -> Sandbox:
    """The sandbox ``config`` names; a non-hermetic one only with ``allow_non_hermetic``."""
    from shoparena.errors import ConfigError
    from shoparena.validator.sandbox import get_sandbox

    options: dict[str, Any] = {} if config.sandbox == "docker" else {"forbidden": [Path(catalog).resolve()]}
    sandbox = get_sandbox(config.sandbox, allow_non_hermetic=config.allow_non_hermetic, **options)
    if not sandbox.hermetic and not config.allow_non_hermetic:
        raise ConfigError(f"sandbox {sandbox.name!r} does not isolate the agent",
                          hint="use --sandbox bubblewrap (or docker); allow it only for tests of trusted code")
    return sandbox


def _axis(calls: list[dict[str, Any]]) -> str:
    axes = {c.get("axis") for c in calls if c.get("kind") == "search" and c.get("status") == 200}
    axes.discard(None)
    if not axes:
        return "none"
    return axes.pop() if len(axes) == 1 else "mixed"


def evaluate_problems(agent_file: str | os.PathLike[str], problems: Sequence[Problem], index: Any,
                      sandbox: Sandbox, config: ValidatorConfig, *, run_id: str, n_samples: int = 1,
                      judge: Any = None, provenance: Provenance | None = None,
                      done: Collection[tuple[str, int]] = ()) -> Iterator[ProblemResult]:
    """Run the agent on every problem ``n_samples`` times in ``sandbox``; yield each result as it finishes.

    Raises (before the first problem) for a model URI that cannot work. ``judge``: judge ``SUCCESS`` envelopes
    with steps; ``provenance``: build each problem's sealed record (skipped when its verdict failed); ``done``:
    ``(problem_id, sample)`` pairs already run (a resumed run), not run again — every other pair keeps its own
    seed, so the results are those of an uninterrupted run."""
    from shoparena.catalog.search import SearchService
    from shoparena.llm.check import check_models
    from shoparena.llm.gateway import Gateway, Limits
    from shoparena.scoring.scorer import Scorer
    from shoparena.scoring.similarity import get_similarity
    from shoparena.validator.sandbox import sanitise

    allowed = {config.model, *config.models}
    check_models([config.model, *config.models])
    if not problems:
        return
    agent_path = Path(agent_file).resolve()
    scorer = Scorer(index, mode=config.scorer_mode, similarity=get_similarity(config.similarity))
    limits: dict[str, Any] = {"rate_per_s": None}
    if config.episode_tokens is not None:
        limits["max_completion_tokens"] = config.episode_tokens
    gateway = Gateway(SearchService(index, mode=config.search_mode, flavor=SEARCH_FLAVOR), allowed_models=allowed,
                      limits=Limits().model_copy(update=limits))
    by_id = {p.problem_id: p for p in problems}
    views = [sanitise(p) for p in by_id.values()]
    sock_dir = Path(tempfile.mkdtemp(prefix="shoparena-val-"))  # 0700: only the validator (and bwrap) reach it
    loop = asyncio.new_event_loop() if judge is not None else None  # LLM judge clients are bound to their loop
    try:
        with gateway.serve(uds=str(sock_dir / "gateway.sock"), uds_mode=0o666) as srv:
            skip = set(done)
            for sample in range(n_samples):
                todo = [pid for pid in by_id if (pid, sample) not in skip]
                if not todo:
                    continue
                tokens = {pid: gateway.open_run(f"{run_id}/{pid}" + (f"#{sample}" if sample else ""),
                                                problem_id=pid, models=allowed).token for pid in todo}
                started: dict[str, int] = {}

                def env_for(problem_id: str, sample: int = sample, tokens: dict[str, str] = tokens,
                            started: dict[str, int] = started) -> dict[str, str]:
                    if problem_id in started:  # retried in a fresh sandbox: the dead attempt's calls are not its run
                        gateway.close_run(tokens[problem_id])
                        tokens[problem_id] = gateway.open_run(f"{run_id}/{problem_id}" + (f"#{sample}" if sample
                                                                                          else ""),
                                                              problem_id=problem_id, models=allowed).token
                    started[problem_id] = int(time.time() * 1000)
                    env = {"SHOPARENA_RUN_TOKEN": tokens[problem_id], "SHOPARENA_MODEL": config.model,
                           "SHOPARENA_TEMPERATURE": repr(config.temperature),
                           "SHOPARENA_SEED": str(sample_seed(config.seed, problem_id, sample))}
                    if config.protocol:
                        env["SHOPARENA_PROTOCOL"] = config.protocol
                    return env

                try:
                    wanted = set(todo)
                    for outcome in sandbox.run(agent_path, [v for v in views if v["problem_id"] in wanted],
                                               gateway_socket=Path(srv.uds or ""),
                                               env_for=env_for, limits=config.limits,
                                               workers=config.workers or os.cpu_count() or 1):
                        pid = outcome.envelope.problem_id
                        calls = [r.model_dump(mode="json") for r in gateway.close_run(tokens.pop(pid))]
                        yield _finish_problem(outcome, by_id[pid], sample, calls, started.get(pid), scorer,
                                              judge, loop, provenance,
                                              token_clock=config.episode_tokens is not None)
                finally:
                    for token in tokens.values():  # problems the sandbox never reported
                        gateway.close_run(token)
    finally:
        if loop is not None:
            leftover = asyncio.all_tasks(loop)  # e.g. an LLM judge's client, closed when its task is cancelled
            for task in leftover:
                task.cancel()
            if leftover:
                loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            loop.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


def aggregate_scores(scores: Sequence[Any], problems: Sequence[Problem], mode: Mode, *,
                     ks: list[int] | None = None, seed: int = 0) -> ScoreReport:
    """The :class:`~shoparena.scoring.types.ScoreReport` of per-sample scores over the suite ``problems``
    (strict: every problem counts, per bucket)."""
    from shoparena.scoring.aggregate import aggregate

    suite = dict(Counter(p.bucket for p in {p.problem_id: p for p in problems}.values()))
    return aggregate(list(scores), mode=mode, suite_size=suite, ks=ks, seed=seed)


def evaluate(agent: AgentSpec, problems: Sequence[Problem], catalog: str | os.PathLike[str], store: Any,
             config: ValidatorConfig, *, progress: Callable[[ProblemLine], None] | None = None) -> EvaluationSummary:
    """Evaluate ``agent`` on ``problems`` against the catalog's index; write records to ``store``."""
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.validator.judge import get_judge

    t0 = time.perf_counter()
    sandbox = open_sandbox(config, catalog)
    judge = get_judge(config.judge)
    agent_file = Path(agent.path).resolve()
    code_sha = _sha256_file(agent_file)
    index = SearchIndex.open(index_path(catalog))
    pipeline = pipeline_version(index, config, judge)
    run_id = eval_run_id(agent, code_sha, problems, pipeline, config.validator_hotkey)
    done = {r.problem_id for r in store.query(eval_run_id=run_id, pipeline_version=pipeline.key())}
    todo = [p for p in problems if p.problem_id not in done]
    scores: dict[str, ProblemScore] = {}
    verdicts: dict[str, Verdict] = {}
    rich: dict[str, float] = {}
    lines: list[ProblemLine] = []
    written = 0
    provenance = Provenance(agent, code_sha, pipeline, run_id, config.validator_hotkey)
    infra: dict[str, str] = {}
    for res in evaluate_problems(agent_file, todo, index, sandbox, config, run_id=run_id, judge=judge,
                                 provenance=provenance):
        if res.infra_failure:  # the validator's failure, not the agent's: never scored, reported below
            infra[res.problem.problem_id] = (res.envelope.error or {}).get("message", "")
            lines.append(ProblemLine(problem_id=res.problem.problem_id, bucket=res.problem.bucket,
                                     status="INFRA_FAILED", success=False, judge_score=None, judge_ok=None,
                                     recorded=False, seconds=res.outcome.wall_s))
            if progress is not None:
                progress(lines[-1])
            continue
        scores[res.problem.problem_id] = res.score
        if res.verdict is not None:
            verdicts[res.problem.problem_id] = res.verdict
        if res.steps:
            rich[res.problem.problem_id] = richness(res.calls, res.steps).score
        if res.record is not None and store.append(res.record):
            written += 1
        lines.append(ProblemLine(problem_id=res.problem.problem_id, bucket=res.problem.bucket,
                                 status=res.envelope.status, success=res.score.success,
                                 judge_score=res.verdict.score if res.verdict else None,
                                 judge_ok=res.verdict.ok if res.verdict else None, recorded=res.record is not None,
                                 seconds=res.outcome.wall_s, richness=rich.get(res.problem.problem_id)))
        if progress is not None:
            progress(lines[-1])

    for r in store.query(eval_run_id=run_id, pipeline_version=pipeline.key()):
        if r.problem_id not in scores:  # recorded by an earlier attempt: take its stored outcome and verdict
            scores[r.problem_id] = scorer_from_record(r)
            if r.steps:
                rich[r.problem_id] = richness_of_record(r).score
            if r.judge is not None:
                verdicts[r.problem_id] = Verdict.model_validate(r.judge)
    # problems the sandbox failed on are out of the agent's denominator (and the run is FAILED, below)
    report = aggregate_scores(list(scores.values()), [p for p in problems if p.problem_id not in infra],
                              config.scorer_mode)
    judged = list(verdicts.values())
    failed = sum(1 for v in judged if not v.ok)
    ok_scores = [v.score for v in judged if v.ok and v.score is not None]
    q = sum(ok_scores) / len(ok_scores) if ok_scores else None
    successful = [rich.get(pid, 0.0) for pid, sc in sorted(scores.items()) if sc.success]
    status: Literal["SUCCESS", "FAILED"] = "SUCCESS"
    reason = None
    unreachable = next((v.error for v in judged if not v.ok and (v.error or "").startswith("judge_unavailable")),
                       None)  # the judge could not be reached at all: FAILED whatever the count
    if unreachable or (len(judged) >= 3 and failed * 2 > len(judged)):
        status, reason = "FAILED", f"judge failed on {failed} of {len(judged)} problems; retry the evaluation"
        if unreachable:
            reason = f"judge_unavailable: {reason} ({unreachable.removeprefix('judge_unavailable: ')})"
    final = fold(report.success_rate, coefficient(q), successful, config.richness_weight)
    if status == "SUCCESS" and (final is None or (q is None and failed)):  # 1–2 judged, every verdict failed
        status, final, reason = "FAILED", None, (f"no judge verdict to weigh the run by ({failed} of "
                                                 f"{len(judged)} verdicts failed); retry the evaluation")
    if infra:  # problems the sandbox never ran to an outcome would count as the agent's zeros: the run is ours
        first = next(iter(infra.values()))
        status, final, reason = "FAILED", None, (
            f"{SANDBOX_UNAVAILABLE}: the sandbox failed on {len(infra)} of {len(problems)} problems (not the "
            f"agent's doing, after retries in fresh sandboxes): {first[:300]}; retry the evaluation"
            + (f"; also: {reason}" if reason else ""))
    return EvaluationSummary(
        eval_run_id=run_id, status=status, failure_reason=reason,
        ground_truth_rate=report.ground_truth_rate, success_rate=report.success_rate,
        format_score=report.format_score, field_matching=report.field_matching,
        total_problems=len(problems), successful_problems=report.successful_problems,
        scored_problems=report.scored_problems, reasoning_quality=None if q is None else round(q, 4),
        reasoning_coefficient=coefficient(q),
        final_score=final,
        judge_inference_failed=failed, judge_inference_total=len(judged), records_written=written,
        records_skipped=len(done), sandbox=sandbox.name, problems=lines,
        seconds=round(time.perf_counter() - t0, 2),
        richness=round(sum(successful) / len(successful), 4) if successful else None,
        richness_weight=config.richness_weight,
    )


def scorer_from_record(record: TrajectoryRecord) -> ProblemScore:
    """The stored outcome as a ProblemScore (resumed evaluations aggregate recorded problems too)."""
    return ProblemScore.model_validate(record.outcome)


def _backend_failure(env: Envelope, calls: list[dict[str, Any]]) -> Envelope:
    """A ``SUCCESS`` envelope whose run had inference calls the model backend failed (the gateway's 502) is
    ``FAILED`` with the reason: the agent never got to work, so it is no agent outcome."""
    inference = [c for c in calls if c.get("kind") == "inference"]
    failed = [c for c in inference if c.get("status") == 502]
    if not failed:
        return env
    update: dict[str, Any] = {"inference_failure_count": len(failed), "inference_total": len(inference)}
    if env.status == "SUCCESS":
        update.update(status="FAILED", error={"type": "BackendError", "message": (
            f"{len(failed)} of {len(inference)} inference calls failed in the model backend: "
            f"{failed[0].get('error') or ''}")[:2000]})
    return env.model_copy(update=update)


def budget_timeout(env: Envelope, calls: list[dict[str, Any]]) -> Envelope:
    """An episode whose run met its completion-token budget (a call refused with
    :data:`~shoparena.llm.gateway.BUDGET_SPENT`) is ``TIMED_OUT``, its steps dropped, exactly as an agent killed at
    the wall clock: the budget is the episode's clock counted in its own generated tokens, so running out of it
    scores as running out of time whatever the concurrency or the hardware. An episode that finished on the last
    tokens of its budget (nothing refused) keeps its outcome."""
    from shoparena.llm.gateway import BUDGET_SPENT

    refused = next((c for c in calls if c.get("kind") == "inference" and c.get("status") == 429
                    and str(c.get("error") or "").startswith(BUDGET_SPENT)), None)
    if refused is None or env.status == "TIMED_OUT":
        return env
    return env.model_copy(update={"status": "TIMED_OUT", "dialogue": None, "error": {
        "type": "Timeout", "message": f"the episode spent its budget: {refused.get('error')}"[:2000]}})


def _finish_problem(outcome: Outcome, problem: Problem, sample: int, calls: list[dict[str, Any]],
                    started: int | None, scorer: Any, judge: Any, loop: asyncio.AbstractEventLoop | None,
                    provenance: Provenance | None, *, token_clock: bool = False) -> ProblemResult:
    """Envelope → result, the one path of ``run`` and ``validate``: the agent's output is checked, scored,
    judged (with a judge) and made a sealed record (with provenance). ``token_clock``: the run's completion-token
    budget is the episode's clock (:func:`budget_timeout`); without it the budget is only the gateway's cost guard
    and an agent that meets it keeps what it returned."""
    from shoparena.env.records import steps_to_messages

    env, _defect = check_envelope(outcome.envelope)  # agent output is untrusted: checked once, here
    env = _backend_failure(env, calls)
    if token_clock:
        env = budget_timeout(env, calls)
    score = scorer.score_steps(problem, env.model_dump(), sample=sample)
    steps = env.dialogue or []
    verdict: Verdict | None = None
    if judge is not None and loop is not None and env.status == "SUCCESS" and steps and not outcome.infra_failure:
        verdict = loop.run_until_complete(judge.judge(problem.query, steps, calls))
    result = ProblemResult(problem=problem, sample=sample, outcome=outcome, envelope=env, calls=calls,
                           score=score, steps=steps, verdict=verdict)
    if provenance is None or (verdict is not None and not verdict.ok) or outcome.infra_failure:
        return result  # a failed verdict or sandbox is never a silent 0: no record; a retry of the evaluation runs it
    agent = provenance.agent
    record = TrajectoryRecord(
        eval_run_id=provenance.run_id, agent_id=agent.agent_id, agent_version=agent.agent_version,
        agent_code_sha256=provenance.code_sha, miner_hotkey=agent.miner_hotkey,
        validator_hotkey=provenance.validator_hotkey, problem_id=problem.problem_id, suite=problem.suite,
        cluster_id=problem.cluster_id, bucket=problem.bucket, status=env.status, steps=steps,
        messages=steps_to_messages(steps, query=problem.query) if steps else [], call_log=calls, axis=_axis(calls),
        outcome=score.model_dump(mode="json"), success=score.success,
        judge=verdict.model_dump(mode="json") if verdict else None,
        judge_score=verdict.score if verdict else None,
        coefficient=coefficient(verdict.score) if verdict else None, pipeline=provenance.pipeline,
        started_at=int(outcome.started_at * 1000) if outcome.started_at is not None else started,
        finished_at=int(time.time() * 1000),
    )
    return replace(result, record=record.sealed(int(time.time() * 1000)))
