"""``shoparena run``: the evaluation core without the judge and the store, on the non-hermetic ``process`` sandbox.

:func:`run_agents` turns a :class:`RunConfig` into the core's :class:`~shoparena.validator.types.ValidatorConfig`
(sandbox ``process``, no judge) and runs :func:`~shoparena.validator.core.evaluate_problems`: the same gateway,
sanitised problem view, search flavour, per-(problem, sample) seeds and scorer as ``shoparena validate``, so the
same agent, model and seed give the same trajectories and the same ASR through both. Every agent call's steps go
to ``rollouts.jsonl`` (upstream step lists, scorable by ``shoparena score``), the gateway's call log to
``calls.jsonl`` (each search call attributed to axis A or B), one status line per run to ``runs.jsonl``, each
sample's score (:class:`~shoparena.scoring.types.ProblemScore` without its items) to ``scores.jsonl``; the
summary (ASR, per bucket, pass@k) is saved as ``summary.json`` with the config that produced it. Each problem
runs in its own process group, killed with everything it forked when the problem ends. While the run is in
progress every finished episode is appended and fsynced to ``episodes.partial.jsonl`` (after a header naming the
run's config and problems), so a killed run resumes (``resume=True``) with only its missing episodes. A finished
run of the same config on other problems lends this run its episodes on the problems they share (``reuse``, see
:func:`finished_episodes`): an evaluation grows to more problems without running the old ones again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from shoparena.errors import BackendError, DataError, NotFoundError
from shoparena.tasks.types import Problem
from shoparena.types import Mode
from shoparena.validator.core import AgentSpec, ProblemResult, ValidatorConfig
from shoparena.validator.types import EpisodeTokens

__all__ = [
    "RunConfig", "RunSummary", "finished_episodes", "read_run_file", "run_agents", "run_lines", "run_records",
    "validator_config",
]


# ── reading a run back (the one reader of the files written below) ───────────────────────────────────────────


def run_lines(data: bytes, path: Path) -> list[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a run's JSONL bytes (``path`` only names them); a line
    that is not JSON → :class:`DataError` naming it. Lines end at ``\n`` only: a model's text may hold U+2028 or
    U+0085 raw inside a JSON string, which ``str.splitlines`` would take for line ends."""
    rows = []
    for i, raw in enumerate(data.split(b"\n"), 1):
        line = raw.decode("utf-8", errors="replace")
        if line.strip():
            try:
                rows.append((i, json.loads(line)))
            except ValueError:
                raise DataError(f"{path}: line {i} is not JSON") from None
    return rows


def read_run_file(path: Path) -> list[Any]:
    """The values of one of a run's JSONL files (``runs.jsonl``, ``rollouts.jsonl``, ``calls.jsonl``,
    ``scores.jsonl``): a missing file → :class:`NotFoundError`, a line that is not JSON → :class:`DataError`."""
    if not path.is_file():
        raise NotFoundError(f"{path}: missing (not a finished run)")
    return [v for _, v in run_lines(path.read_bytes(), path)]


def run_records(data: bytes, path: Path) -> list[dict[str, Any]]:
    """The status lines of a run's ``runs.jsonl`` bytes, each checked to be an object with a string ``problem_id``,
    an integer ``sample`` ≥ 0 and a boolean ``success`` (a line that is not → :class:`DataError` naming it)."""
    out = []
    for i, rec in run_lines(data, path):
        if (not isinstance(rec, dict) or not isinstance(rec.get("problem_id"), str)
                or not isinstance(rec.get("success"), bool) or type(rec.get("sample")) is not int
                or rec["sample"] < 0):
            raise DataError(f"{path}: line {i} is not a run record (a JSON object with problem_id, sample and "
                            "success)")
        out.append(rec)
    return out


class RunConfig(BaseModel):
    """Everything that decides a run; saved beside its output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    """A built-in agent name (react, oro7, pipeline) or the path of an agent file."""
    model: str = "policy:expert"
    n_samples: int = 1
    seed: int = 0
    temperature: float | None = None
    """Default: 0 for one sample, 0.7 when sampling several (so pass@k means something)."""
    concurrency: int | None = None
    """Problems at once; default: the number of CPU cores."""
    timeout_s: float = 300.0
    """Per agent call (ORO's per-problem limit)."""
    episode_tokens: EpisodeTokens | None = None
    """Completion tokens per episode; an episode that asks for more is timed out (``None``: the wall clock only).
    Unlike the wall clock it does not depend on how many episodes share the model."""
    search_mode: Mode = "upstream"
    score_mode: Mode = "strict"
    protocol: Literal["native", "tags"] | None = None
    """Protocol for the built-in ReAct agents (default native)."""

    def identity(self) -> dict[str, Any]:
        """The settings that decide a run's episodes: all but ``concurrency`` (every sample has its own seed), so a
        resumed or kept run may have used another."""
        return self.stored_identity(self.model_dump(mode="json"))

    @staticmethod
    def stored_identity(config: Mapping[str, Any]) -> dict[str, Any]:
        """The identity of a stored run config, as it is stored: without ``concurrency``, and without a field added
        after runs were stored where it is unset (a run made before the field existed is one with it unset)."""
        return {k: v for k, v in config.items()
                if k != "concurrency" and not (k in _LATER_FIELDS and v is None)}


_LATER_FIELDS = ("episode_tokens",)
"""Fields added to :class:`RunConfig` after runs were stored: unset, they are left out of its identity."""


class RunSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    asr: float
    asr_by_bucket: dict[str, float]
    pass_at_k: dict[str, float]
    n_problems: int
    n_samples: int
    gt_rate: float
    axis_rates: dict[str, float | None]
    statuses: dict[str, int]
    """SUCCESS / FAILED / TIMED_OUT counts over agent calls."""
    calls: dict[str, int]
    """Gateway calls by kind, and search calls by axis (``search_axis_A`` / ``search_axis_B``)."""
    seconds: float
    out: str
    skipped_problems: dict[str, Any] | None = None
    """The problem file's unusable lines (``ProblemLoadReport.to_dict``: how many, by reason, examples with their
    line numbers), when the caller loaded it."""


def validator_config(config: RunConfig) -> ValidatorConfig:
    """The evaluation core's config of a run: ``process`` sandbox, no judge, the run's sampling."""
    from shoparena.validator.sandbox.types import SandboxLimits

    temperature = config.temperature if config.temperature is not None else (0.0 if config.n_samples == 1 else 0.7)
    return ValidatorConfig(model=config.model, judge="none", sandbox="process", allow_non_hermetic=True,
                           workers=config.concurrency, limits=SandboxLimits(timeout_s=config.timeout_s),
                           episode_tokens=config.episode_tokens,
                           scorer_mode=config.score_mode, temperature=temperature, seed=config.seed,
                           search_mode=config.search_mode, protocol=config.protocol)


def _failure_steps(problem: Problem, res: ProblemResult) -> list[dict[str, Any]]:
    """The record of an agent call that produced no steps: one empty step in the step format (so ``shoparena
    score`` accepts it), so the run still joins its problem and counts as a failed sample; why it failed is in
    ``runs.jsonl``."""
    started = res.outcome.started_at
    return [{"completion": {"reasoning_content": "", "content": "", "message": {}},
             "extra_info": {"step": 1, "query": problem.query,
                            "timestamp": int((started if started is not None else time.time()) * 1000),
                            "problem_id": problem.problem_id}}]


def _joinable(steps: list[dict[str, Any]], problem_id: str) -> list[dict[str, Any]]:
    """``steps`` with ``extra_info.problem_id`` filled where the agent left it out (copies; the agent's own
    steps are written unchanged otherwise)."""
    out = []
    for step in steps:
        extra = step.get("extra_info")
        if extra is None or (isinstance(extra, dict) and "problem_id" not in extra):
            step = {**step, "extra_info": {**(extra or {}), "problem_id": problem_id}}
        out.append(step)
    return out


def _line(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS) + b"\n"


PARTIAL = "episodes.partial.jsonl"
"""Every finished episode of a run in progress, one line each, fsynced: what ``resume`` continues from."""
_PARTIAL_FORMAT = "shoparena-run-partial/1"


def _episode(res: ProblemResult) -> dict[str, Any]:
    pid = res.problem.problem_id
    return {
        "problem_id": pid, "sample": res.sample,
        "steps": _joinable(res.steps, pid) if res.steps else _failure_steps(res.problem, res),
        "calls": [{**c, "problem_id": pid, "sample": res.sample} for c in res.calls],
        "run": {"problem_id": pid, "sample": res.sample, "status": res.envelope.status,
                "error": res.envelope.error, "seconds": res.outcome.wall_s, "steps": len(res.steps),
                "calls": len(res.calls), "success": res.score.success},
        "score": res.score.model_dump(mode="json"),
    }


def _partial_header(config: RunConfig, problems: Sequence[Problem], run_id: str) -> dict[str, Any]:
    return {"format": _PARTIAL_FORMAT, "run_id": run_id, "config": config.identity(),
            "problems": [p.problem_id for p in problems]}


def _read_partial(path: Path, header: dict[str, Any], n_samples: int) -> list[dict[str, Any]]:
    """The episodes of an interrupted run with the same header; ``[]`` for another run or no file. A torn last
    line (the run was killed while writing it) is dropped; any other bad line is refused."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    if not lines:
        return []
    try:
        if orjson.loads(lines[0]) != header:
            return []
    except orjson.JSONDecodeError:
        return []
    episodes: dict[tuple[str, int], dict[str, Any]] = {}
    wanted = set(header["problems"])
    for i, raw in enumerate(lines[1:], 2):
        try:
            ep = orjson.loads(raw)
            key = (ep["problem_id"], ep["sample"])
            ok = key[0] in wanted and isinstance(key[1], int) and 0 <= key[1] < n_samples and \
                all(k in ep for k in ("steps", "calls", "run", "score"))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            ok = False
        if not ok:
            if i == len(lines):
                break  # torn tail
            raise DataError(f"{path}:{i}: not an episode of this run", hint="delete the file to start the run again")
        episodes[key] = ep
    return list(episodes.values())


def same_config(stored: Any, config: RunConfig) -> bool:
    """Whether ``stored`` (a run's ``summary.json`` ``config``) has exactly ``config``'s fields and the same values of
    those that decide its episodes (:meth:`RunConfig.identity`); anything that is not such a config is not."""
    if not isinstance(stored, dict) or set(stored) | set(_LATER_FIELDS) != set(config.model_dump()):
        return False
    try:
        return type(config).model_validate(stored).identity() == config.identity()
    except (ValueError, TypeError):
        return False


def finished_episodes(run_dir: str | os.PathLike[str], config: RunConfig, problems: Sequence[Problem],
                      scorer: Any) -> list[dict[str, Any]] | None:
    """The episodes of the finished run in ``run_dir`` on those of ``problems`` it ran; ``None`` when ``run_dir``
    holds no finished run (no ``summary.json``) or one whose config decides episodes differently.

    Each (problem, sample) has its own seed whatever the rest of the problem set (:func:`~shoparena.validator.core.
    sample_seed`), so these are the episodes this run would have produced. Each is re-scored from its stored steps
    with ``scorer`` (its items, which ``scores.jsonl`` leaves out, come back); a stored score the re-score does not
    reproduce (another catalog, another scorer) or files that do not line up are refused (:class:`DataError`)."""
    d = Path(run_dir)
    try:
        stored = json.loads((d / "summary.json").read_text(encoding="utf-8"))["config"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{d / 'summary.json'}: not a run summary ({e})") from None
    if not isinstance(stored, dict):
        raise DataError(f"{d / 'summary.json'}: not a run summary (its config is {type(stored).__name__})")
    if not same_config(stored, config):
        return None
    files = {name: d / f"{name}.jsonl" for name in ("runs", "rollouts", "scores", "calls")}
    try:
        rows = {name: read_run_file(path) for name, path in files.items()}
    except (OSError, NotFoundError, DataError) as e:
        raise DataError(f"{d}: the finished run's files cannot be read ({e})",
                        hint="reuse only a complete run directory") from None
    if not len(rows["runs"]) == len(rows["rollouts"]) == len(rows["scores"]):
        raise DataError(f"{d}: runs, rollouts and scores do not line up ({len(rows['runs'])}, "
                        f"{len(rows['rollouts'])}, {len(rows['scores'])} lines)")
    calls: dict[tuple[str, int], list[dict[str, Any]]] = {}
    by_id = {p.problem_id: p for p in problems}
    out: list[dict[str, Any]] = []
    try:
        for c in rows["calls"]:
            calls.setdefault((c["problem_id"], c["sample"]), []).append(c)
        for i, (run, steps, score) in enumerate(zip(rows["runs"], rows["rollouts"], rows["scores"], strict=True), 1):
            pid, sample = run["problem_id"], run["sample"]
            if pid not in by_id or not isinstance(sample, int) or not 0 <= sample < config.n_samples:
                continue
            dialogue = steps if run["steps"] else []  # a run without steps is stored with one placeholder step
            envelope = {"problem_id": pid, "status": run["status"], "error": run["error"], "dialogue": dialogue}
            again = scorer.score_steps(by_id[pid], envelope, sample=sample)
            if again.model_dump(mode="json", exclude={"items"}) != score or score.get("problem_id") != pid:
                raise DataError(f"{files['scores']}:{i}: the stored score of {pid} sample {sample} is not what "
                                "its steps score here", hint="reuse a run made on the same catalog and scorer")
            out.append({"problem_id": pid, "sample": sample, "steps": steps, "calls": calls.get((pid, sample), []),
                        "run": run, "score": again.model_dump(mode="json")})
    except (KeyError, TypeError, ValueError) as e:  # (DataError is none of these: it passes through)
        raise DataError(f"{d}: not the files of a finished run ({type(e).__name__}: {e})") from None
    return out


def run_agents(catalog: str | os.PathLike[str], problems: Sequence[Problem], config: RunConfig,
               out: str | os.PathLike[str], progress: Callable[[int], None] | None = None, *,
               resume: bool = False, reuse: Sequence[str | os.PathLike[str]] = (),
               skipped: dict[str, Any] | None = None) -> RunSummary:
    """Run ``config.agent`` on every problem ``config.n_samples`` times; write and score everything in ``out``.

    Each finished episode is appended (and fsynced) to ``out/episodes.partial.jsonl`` as it arrives; with
    ``resume``, the episodes an interrupted run of the same config on the same problems left there are kept and
    only the others run (each episode has its own seed, so the result is that of an uninterrupted run). ``reuse``:
    finished runs' directories whose episodes on these problems are kept too (:func:`finished_episodes`; nothing
    from one that is not a finished run of the same config; the first to hold an episode lends it). The run's files
    are written, and the partial file removed, once every episode is in. ``skipped``: the problem file's unusable
    lines, recorded in the summary."""
    from shoparena.agents.loading import agent_path
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.scoring.types import ProblemScore
    from shoparena.validator.core import (
        aggregate_scores,
        eval_run_id,
        evaluate_problems,
        open_sandbox,
        pipeline_version,
    )

    t0 = time.perf_counter()
    out_dir = Path(out)
    agent_file = agent_path(config.agent)
    vconfig = validator_config(config)
    sandbox = open_sandbox(vconfig, catalog)
    index = SearchIndex.open(index_path(catalog))
    code_sha = hashlib.sha256(agent_file.read_bytes()).hexdigest()
    run_id = eval_run_id(AgentSpec(path=str(agent_file), agent_id=agent_file.stem), code_sha, problems,
                         pipeline_version(index, vconfig), None)
    order = {p.problem_id: i for i, p in enumerate(problems)}
    header = _partial_header(config, problems, run_id)
    partial = out_dir / PARTIAL
    episodes = _read_partial(partial, header, config.n_samples) if resume else []
    if reuse:
        from shoparena.scoring.scorer import Scorer
        from shoparena.scoring.similarity import get_similarity

        scorer = Scorer(index, mode=vconfig.scorer_mode, similarity=get_similarity(vconfig.similarity))
        have = {(ep["problem_id"], ep["sample"]) for ep in episodes}
        for lender in reuse:
            for ep in finished_episodes(lender, config, problems, scorer) or []:
                if (ep["problem_id"], ep["sample"]) not in have:
                    have.add((ep["problem_id"], ep["sample"]))
                    episodes.append(ep)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(partial, "wb") as fh:  # rewritten whole: the header and the kept episodes, then appended to
        fh.write(_line(header) + b"".join(_line(ep) for ep in episodes))
        fh.flush()
        os.fsync(fh.fileno())
        if progress is not None and episodes:
            progress(len(episodes))
        done = {(ep["problem_id"], ep["sample"]) for ep in episodes}
        infra: list[str] = []
        for res in evaluate_problems(agent_file, problems, index, sandbox, vconfig, run_id=run_id,
                                     n_samples=config.n_samples, done=done):
            if res.infra_failure:  # the sandbox failed, not the agent: no episode, so --resume runs it again
                infra.append((res.envelope.error or {}).get("message", ""))
                continue
            ep = _episode(res)
            fh.write(_line(ep))
            fh.flush()
            os.fsync(fh.fileno())
            episodes.append(ep)
            if progress is not None:
                progress(1)
    if infra:
        raise BackendError(f"the sandbox failed on {len(infra)} episode(s), not the agent (after retries in fresh "
                           f"sandboxes): {infra[0][:300]}",
                           hint="run the same command again with --resume: the finished episodes are kept")
    episodes.sort(key=lambda e: (order[e["problem_id"]], e["sample"]))
    scores = [ProblemScore.model_validate(e["score"]) for e in episodes]
    with open(out_dir / "rollouts.jsonl", "wb") as rollouts, open(out_dir / "calls.jsonl", "wb") as calls, \
            open(out_dir / "runs.jsonl", "wb") as runs, open(out_dir / "scores.jsonl", "wb") as score_file:
        for ep, score in zip(episodes, scores, strict=True):
            rollouts.write(_line(ep["steps"]))
            calls.writelines(_line(c) for c in ep["calls"])
            runs.write(_line(ep["run"]))
            score_file.write(_line(score.model_dump(mode="json", exclude={"items"})))
    ks = sorted({k for k in (1, 2, 4, 8, 16) if k <= config.n_samples} | {config.n_samples})
    agg = aggregate_scores(scores, problems, config.score_mode, ks=ks, seed=config.seed)
    call_counts: Counter[str] = Counter()
    for ep in episodes:
        for rec in ep["calls"]:
            call_counts[rec["kind"]] += 1
            if rec["kind"] == "search" and rec.get("axis"):
                call_counts[f"search_axis_{rec['axis']}"] += 1
    summary = RunSummary(
        asr=agg.asr, asr_by_bucket=agg.asr_by_bucket, pass_at_k=agg.pass_at_k, n_problems=len(problems),
        n_samples=config.n_samples, gt_rate=agg.gt_rate, axis_rates=agg.axis_rates,
        statuses=dict(Counter(ep["run"]["status"] for ep in episodes)), calls=dict(call_counts),
        seconds=round(time.perf_counter() - t0, 2), out=str(out_dir), skipped_problems=skipped,
    )
    (out_dir / "summary.json").write_text(json.dumps({"kind": "harness-run", "summary": summary.model_dump(),
                                                      "config": config.model_dump(),
                                                      "score": agg.model_dump(mode="json")}, indent=2) + "\n",
                                          encoding="utf-8")
    partial.unlink(missing_ok=True)
    return summary
