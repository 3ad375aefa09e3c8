"""The validator's evaluation of one agent version on a problem set: sandbox → rule score → judge → records.

arena.md §6. A gateway (search + inference, every call logged) is served on a Unix socket for the sandbox; each
problem gets its own run token; the agent runs in the sandbox one process per problem; as each problem finishes
its envelope is scored by the rule scorer (strict by default), judged (``SUCCESS`` envelopes only, §7.1) and
written to the trajectory store as one append-only record with its call log and full provenance. Records are
written as problems finish, so a validator killed mid-run loses nothing committed, and a restart with the same
evaluation id (derived from the agent code, the problems and the pipeline) skips problems already recorded.

Judge infrastructure failures never become scores: a problem whose verdict failed gets no record (a retry judges
it again), and a run where more than half of at least three judge calls failed is ``FAILED`` (ORO's rule), as is
a run whose judge could not be reached at all (reason ``judge_unavailable: …``).
The summary carries ORO's score components and ``final = success_rate × coeff(q)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoparena import __version__
from shoparena.store.types import PipelineVersion, TrajectoryRecord
from shoparena.tasks.types import Problem
from shoparena.validator.judge.types import Verdict, coefficient, final_score
from shoparena.validator.sandbox.types import Outcome, SandboxLimits

__all__ = ["AgentSpec", "EvaluationSummary", "ProblemLine", "ValidatorConfig", "evaluate"]

SCORER_ID = "shoparena-rule/1"
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ValidatorConfig(BaseModel):
    """How a validator evaluates; part of it becomes the records' pipeline version."""

    model_config = _FROZEN

    model: str = "policy:expert"
    """The default inference model (``SHOPARENA_MODEL`` in the sandbox); always allowed."""
    models: tuple[str, ...] = ()
    """Further models agents may ask for by name (the gateway allowlist is ``model`` plus these)."""
    judge: str = "rubric"
    """``rubric`` or ``llm:<model-uri>[,<model-uri>…]``."""
    sandbox: str = "bubblewrap"
    allow_non_hermetic: bool = False
    """Permit the ``process`` sandbox (validator-logic tests only; never for untrusted code)."""
    workers: int | None = None
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    scorer_mode: Literal["upstream", "strict"] = "strict"
    similarity: str = "lexical"
    validator_hotkey: str | None = None
    temperature: float = 0.0
    seed: int = 0


class AgentSpec(BaseModel):
    """What is evaluated: one version of one miner's agent file."""

    model_config = _FROZEN

    path: str
    agent_id: str
    agent_version: str = "v1"
    miner_hotkey: str | None = None


class ProblemLine(BaseModel):
    model_config = _FROZEN

    problem_id: str
    bucket: str
    status: str
    success: bool
    judge_score: float | None
    judge_ok: bool | None
    recorded: bool
    seconds: float


class EvaluationSummary(BaseModel):
    """ORO's score components (arena.md §6) plus the run's bookkeeping."""

    model_config = _FROZEN

    eval_run_id: str
    status: Literal["SUCCESS", "FAILED"]
    failure_reason: str | None = None
    ground_truth_rate: float
    success_rate: float
    format_score: float
    field_matching: float
    total_problems: int
    successful_problems: float
    scored_problems: int
    reasoning_quality: float | None
    reasoning_coefficient: float | None
    final_score: float | None
    judge_inference_failed: int
    judge_inference_total: int
    records_written: int
    records_skipped: int
    """Problems already recorded by an earlier attempt of this evaluation (resume)."""
    sandbox: str
    problems: list[ProblemLine]
    seconds: float


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


def _axis(calls: list[dict[str, Any]]) -> str:
    axes = {c.get("axis") for c in calls if c.get("kind") == "search" and c.get("status") == 200}
    axes.discard(None)
    if not axes:
        return "none"
    return axes.pop() if len(axes) == 1 else "mixed"


def evaluate(agent: AgentSpec, problems: Sequence[Problem], catalog: str | os.PathLike[str], store: Any,
             config: ValidatorConfig, *, progress: Callable[[ProblemLine], None] | None = None) -> EvaluationSummary:
    """Evaluate ``agent`` on ``problems`` against the catalog's index; write records to ``store``."""
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.catalog.search import SearchService
    from shoparena.env.records import steps_to_messages
    from shoparena.errors import ConfigError
    from shoparena.llm.gateway import Gateway, Limits
    from shoparena.scoring.aggregate import aggregate
    from shoparena.scoring.scorer import Scorer
    from shoparena.scoring.similarity import get_similarity
    from shoparena.validator.judge import get_judge
    from shoparena.validator.sandbox import get_sandbox, sanitise

    t0 = time.perf_counter()
    options: dict[str, Any] = {} if config.sandbox == "docker" else {"forbidden": [Path(catalog).resolve()]}
    sandbox = get_sandbox(config.sandbox, allow_non_hermetic=config.allow_non_hermetic, **options)
    if not sandbox.hermetic and not config.allow_non_hermetic:
        raise ConfigError(f"sandbox {sandbox.name!r} does not isolate the agent",
                          hint="use --sandbox bubblewrap (or docker); allow it only for tests of trusted code")
    judge = get_judge(config.judge)
    agent_file = Path(agent.path).resolve()
    code_sha = _sha256_file(agent_file)
    index = SearchIndex.open(index_path(catalog))
    similarity = get_similarity(config.similarity)
    pipeline = PipelineVersion(scorer=SCORER_ID, scorer_mode=config.scorer_mode, similarity=similarity.name,
                               catalog_sha256=index.catalog_sha256, judge=judge.name,
                               judge_prompt_version=judge.prompt_version, package_version=__version__)
    run_id = eval_run_id(agent, code_sha, problems, pipeline, config.validator_hotkey)
    done = {r.problem_id for r in store.query(eval_run_id=run_id, pipeline_version=pipeline.key())}
    todo = [p for p in problems if p.problem_id not in done]
    scorer = Scorer(index, mode=config.scorer_mode, similarity=similarity)
    allowed = {config.model, *config.models}
    gateway = Gateway(SearchService(index, flavor="oro"), allowed_models=allowed,
                      limits=Limits().model_copy(update={"rate_per_s": None}))
    sock_dir = Path(tempfile.mkdtemp(prefix="shoparena-val-"))  # 0700: only the validator (and bwrap) reach it
    by_id = {p.problem_id: p for p in problems}
    tokens: dict[str, str] = {}
    started: dict[str, int] = {}
    for p in todo:
        tokens[p.problem_id] = gateway.open_run(f"{run_id}/{p.problem_id}", problem_id=p.problem_id,
                                                models=allowed).token

    def env_for(problem_id: str) -> dict[str, str]:
        started[problem_id] = int(time.time() * 1000)
        return {"SHOPARENA_RUN_TOKEN": tokens[problem_id], "SHOPARENA_MODEL": config.model,
                "SHOPARENA_TEMPERATURE": repr(config.temperature), "SHOPARENA_SEED": str(config.seed)}

    scores: dict[str, Any] = {}
    verdicts: dict[str, Verdict] = {}
    lines: list[ProblemLine] = []
    written = 0
    loop = asyncio.new_event_loop()  # one loop for every judge call (LLM clients are bound to their loop)
    try:
        with gateway.serve(uds=str(sock_dir / "gateway.sock"), uds_mode=0o666) as srv:
            outcomes = sandbox.run(agent_file, [sanitise(p) for p in todo], gateway_socket=Path(srv.uds or ""),
                                   env_for=env_for, limits=config.limits,
                                   workers=config.workers or os.cpu_count() or 1)
            for outcome in outcomes:
                line, record = _finish_problem(outcome, by_id, gateway, tokens, started, scorer, judge, loop,
                                               scores, verdicts, agent, code_sha, config, pipeline, run_id,
                                               steps_to_messages)
                if record is not None and store.append(record):
                    written += 1
                lines.append(line.model_copy(update={"recorded": record is not None}))
                if progress is not None:
                    progress(lines[-1])
    finally:
        leftover = asyncio.all_tasks(loop)  # e.g. an LLM judge's client, closed when its task is cancelled
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        loop.close()
        shutil.rmtree(sock_dir, ignore_errors=True)

    for r in store.query(eval_run_id=run_id, pipeline_version=pipeline.key()):
        if r.problem_id not in scores:  # recorded by an earlier attempt: take its stored outcome and verdict
            scores[r.problem_id] = scorer_from_record(r)
            if r.judge is not None:
                verdicts[r.problem_id] = Verdict.model_validate(r.judge)
    report = aggregate([s for s in scores.values()], mode=config.scorer_mode, suite_size=len(problems))
    judged = [v for v in verdicts.values()]
    failed = sum(1 for v in judged if not v.ok)
    ok_scores = [v.score for v in judged if v.ok and v.score is not None]
    q = sum(ok_scores) / len(ok_scores) if ok_scores else None
    status: Literal["SUCCESS", "FAILED"] = "SUCCESS"
    reason = None
    unreachable = next((v.error for v in judged if not v.ok and (v.error or "").startswith("judge_unavailable")),
                       None)  # the judge could not be reached at all: FAILED whatever the count
    if unreachable or (len(judged) >= 3 and failed * 2 > len(judged)):
        status, reason = "FAILED", f"judge failed on {failed} of {len(judged)} problems; retry the evaluation"
        if unreachable:
            reason = f"judge_unavailable: {reason} ({unreachable.removeprefix('judge_unavailable: ')})"
    return EvaluationSummary(
        eval_run_id=run_id, status=status, failure_reason=reason,
        ground_truth_rate=report.ground_truth_rate, success_rate=report.success_rate,
        format_score=report.format_score, field_matching=report.field_matching,
        total_problems=len(problems), successful_problems=report.successful_problems,
        scored_problems=report.scored_problems, reasoning_quality=None if q is None else round(q, 4),
        reasoning_coefficient=coefficient(q), final_score=final_score(report.success_rate, q),
        judge_inference_failed=failed, judge_inference_total=len(judged), records_written=written,
        records_skipped=len(done), sandbox=sandbox.name, problems=lines,
        seconds=round(time.perf_counter() - t0, 2),
    )


def scorer_from_record(record: TrajectoryRecord) -> Any:
    """The stored outcome as a ProblemScore (resumed evaluations aggregate recorded problems too)."""
    from shoparena.scoring.types import ProblemScore

    return ProblemScore.model_validate(record.outcome)


def _finish_problem(outcome: Outcome, by_id: dict[str, Problem], gateway: Any, tokens: dict[str, str],
                    started: dict[str, int], scorer: Any, judge: Any, loop: asyncio.AbstractEventLoop,
                    scores: dict[str, Any],
                    verdicts: dict[str, Verdict], agent: AgentSpec, code_sha: str, config: ValidatorConfig,
                    pipeline: PipelineVersion, run_id: str, to_messages: Callable[..., Any]
                    ) -> tuple[ProblemLine, TrajectoryRecord | None]:
    env = outcome.envelope
    problem = by_id[env.problem_id]
    calls = [r.model_dump(mode="json") for r in gateway.close_run(tokens[env.problem_id])]
    score = scorer.score_steps(problem, env.model_dump())
    scores[problem.problem_id] = score
    steps = env.dialogue or []
    verdict: Verdict | None = None
    if env.status == "SUCCESS" and steps:
        verdict = loop.run_until_complete(judge.judge(problem.query, steps, calls))
        verdicts[problem.problem_id] = verdict
    line = ProblemLine(problem_id=problem.problem_id, bucket=problem.bucket, status=env.status,
                       success=score.success, judge_score=verdict.score if verdict else None,
                       judge_ok=verdict.ok if verdict else None, recorded=False, seconds=outcome.wall_s)
    if verdict is not None and not verdict.ok:
        return line, None  # never a silent 0: no record; a retry of the evaluation judges it again
    record = TrajectoryRecord(
        eval_run_id=run_id, agent_id=agent.agent_id, agent_version=agent.agent_version, agent_code_sha256=code_sha,
        miner_hotkey=agent.miner_hotkey, validator_hotkey=config.validator_hotkey, problem_id=problem.problem_id,
        suite=problem.suite, cluster_id=problem.cluster_id, bucket=problem.bucket, status=env.status, steps=steps,
        messages=to_messages(steps, query=problem.query) if steps else [], call_log=calls, axis=_axis(calls),
        outcome=score.model_dump(mode="json"), success=score.success,
        judge=verdict.model_dump(mode="json") if verdict else None,
        judge_score=verdict.score if verdict else None,
        coefficient=coefficient(verdict.score) if verdict else None, pipeline=pipeline,
        started_at=(int(outcome.started_at * 1000) if outcome.started_at is not None
                    else started.get(problem.problem_id)), finished_at=int(time.time() * 1000),
    )
    return line, record.sealed(int(time.time() * 1000))
