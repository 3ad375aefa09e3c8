"""The LLM judge: the 4-gate prompt sent to a pool of chat models, answers parsed, citations verified.

Call policy (docs/arena.md §7.3): temperature 0, ``max_tokens`` 3072, 90 s per call, at most 8 attempts per verdict
needed. A 429 / 5xx / timeout / connection failure rotates to the next model after a backoff
(``min(backoff_s · 2^n, max_backoff_s)``); 401 / 403 aborts (the token is bad for every model); 400 / 404 / 422 and
an *unparseable* 200 blacklist that model for the rest of the evaluation (this judge object's life). A parseable
answer whose value is off the rubric or whose quotes do not occur verbatim in the rendered trace gets one retry
on the same model with the problem spelled out, then the pool rotates. When no verdict comes out, the verdict is
``ok=False`` with the reasons: never a score. After ``circuit_after`` consecutive failed verdicts the judge fails
fast until one succeeds (ORO's circuit breaker).

An unreachable judge fails fast, so a validator never stalls on it: ``openai:`` models are called with a
``connect_timeout_s`` connect timeout and no client-side retries (this policy is the only retry loop), a connection
failure is retried after a short backoff (``connect_backoff_s``, doubling), one verdict never takes longer than
``deadline_s``, and after ``unreachable_after`` connection failures in a row (any model, across verdicts) the judge
is *unavailable*: that verdict and every later one fail at once with an error starting ``judge_unavailable:`` (the
validator reports the run FAILED with that reason).

``panel > 1`` asks that many distinct models and combines them: the verdict's score is the median (the lower
middle value for an even count), ``agreement`` records every model's score, the majority value (if any) and
whether all agreed. With ``enforce_g1`` (default) a verdict can never pass G1 when the call log shows no inference
call with ≥ 30 completion tokens: the log, not the model's reading of it, decides G1.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from shoparena.errors import ConfigError, ShopArenaError
from shoparena.llm.types import ChatBackend, Sampling, backend_schemes, get_backend
from shoparena.validator.judge.calls import normalise_calls
from shoparena.validator.judge.parse import AnswerError, JudgeAnswer, parse_answer, resolve_quotes
from shoparena.validator.judge.prompt import PROMPT_VERSION, build_messages, citation_feedback
from shoparena.validator.judge.render import RenderedTrace, render_trace
from shoparena.validator.judge.types import GATE_SCORES, CitedSpan, Verdict

__all__ = ["UNAVAILABLE", "LLMJudge", "LLMJudgeConfig"]

_RETRY = {408, 409, 425, 429, 500, 502, 503, 504, 529}
_ABORT = {401, 403}


class LLMJudgeConfig(BaseModel):
    """How the LLM judge calls its models (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = 8
    """Model calls allowed per verdict needed (``panel`` verdicts → ``panel × max_attempts``)."""
    max_tokens: int = 3072
    timeout_s: float = 90.0
    backoff_s: float = 5.0
    max_backoff_s: float = 10.0
    panel: int = 1
    """Distinct models whose verdicts are combined (1: the first valid verdict, ORO's policy)."""
    feedback_retries: int = 1
    """Retries on the same model after an off-rubric value or unresolvable quotes."""
    enforce_g1: bool = True
    circuit_after: int | None = 3
    connect_timeout_s: float = 5.0
    """Seconds to establish a connection to an ``openai:`` model."""
    connect_backoff_s: float = 0.5
    """First wait after a connection failure (doubles, capped by ``max_backoff_s``)."""
    unreachable_after: int | None = 3
    """Connection failures in a row after which the judge is unavailable for the rest of its life."""
    deadline_s: float = 600.0
    """Wall-clock budget of one verdict: calls, backoffs and retries together."""


UNAVAILABLE = "judge_unavailable"
"""Prefix of a verdict error meaning no judge model could be reached (not a judgment about the trace)."""


def _resolve(spec: str, config: LLMJudgeConfig) -> ChatBackend:
    """The backend of a model URI; ``openai:`` ones fail fast (connect timeout, no client retries)."""
    scheme, _, rest = spec.partition(":")
    if scheme == "openai":
        from shoparena.llm.openai_backend import OpenAIBackend, parse_openai_pool_uri

        target = parse_openai_pool_uri(rest)
        options: dict[str, Any] = {"timeout": config.timeout_s, "connect_timeout": config.connect_timeout_s,
                                   "max_retries": 0}
        if len(target.base_urls) == 1:
            return OpenAIBackend(target.base_urls[0], target.model, **options)
        from shoparena.llm.pool import PooledOpenAIBackend

        return PooledOpenAIBackend(target.base_urls, target.model, cooloff=target.cooloff, **options)
    return get_backend(spec)


_CONNECT_ERRORS = {"ConnectError", "ConnectTimeout", "ClientConnectorError", "ConnectionTimeoutError",
                   "ClientConnectorDNSError", "gaierror"}


def _connect_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says no connection could be made."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionError) or type(cur).__name__ in _CONNECT_ERRORS:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


class _Model:
    """A pool member: a model URI resolved on first use (an ``hf:`` backend loads weights), or a backend."""

    def __init__(self, spec: str | ChatBackend, name: str, config: LLMJudgeConfig) -> None:
        self.spec, self.name, self.config = spec, name, config
        self._backend: ChatBackend | None = None if isinstance(spec, str) else spec

    @property
    def backend(self) -> ChatBackend:
        if self._backend is None:
            self._backend = _resolve(str(self.spec), self.config)
        return self._backend


class LLMJudge:
    """docs/arena.md §7 with a pool of chat models (module docstring)."""

    prompt_version = PROMPT_VERSION

    def __init__(self, models: Sequence[str | ChatBackend], config: LLMJudgeConfig | None = None, *,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        if not models:
            raise ValueError("the LLM judge needs at least one model")
        self.config = config or LLMJudgeConfig()
        self.models: list[_Model] = []
        for m in models:
            if isinstance(m, str) and m.partition(":")[0] not in backend_schemes():
                raise ConfigError(f"judge model {m!r} is not a model URI",
                                  hint="use openai:<base_url>/<model>, hf:<path> or policy:<name>")
            name = m if isinstance(m, str) else str(getattr(m, "name", type(m).__name__))
            taken = {x.name for x in self.models}
            unique = next(n for n in (name, *(f"{name}#{k}" for k in range(2, len(models) + 2))) if n not in taken)
            self.models.append(_Model(m, unique, self.config))
        if self.config.panel > len(self.models):
            raise ValueError(f"panel {self.config.panel} needs as many models; the pool has {len(self.models)}")
        self.name = "llm:" + ",".join(m.name for m in self.models)
        self.blacklist: set[str] = set()
        self.failed_in_a_row = 0
        self.connect_failures = 0
        """Connection failures in a row (any model, across verdicts)."""
        self.unavailable: str | None = None
        """Set (the ``judge_unavailable: …`` error) once ``unreachable_after`` connection failures ran in a row."""
        self._sleep = sleep

    async def judge(self, query: str, steps: list[dict[str, Any]], calls: list[dict[str, Any]]) -> Verdict:
        trace = render_trace(query, steps, calls)
        cfg = self.config
        if self.unavailable is not None:
            self.failed_in_a_row += 1
            return self._failure(trace, 0, self.unavailable, {}, [])
        if cfg.circuit_after is not None and self.failed_in_a_row >= cfg.circuit_after:
            return self._failure(trace, 0, f"circuit open after {self.failed_in_a_row} failed verdicts in a row",
                                 {}, [])
        got, attempts, errors, aborted = await self._collect(trace)
        if len(got) < cfg.panel:
            self.failed_in_a_row += 1
            why = self.unavailable or ("aborted: " + errors[-1] if aborted else (
                f"{len(got)} of {cfg.panel} valid verdicts after {attempts} attempts"))
            return self._failure(trace, attempts, why, {n: a.score for n, (a, _) in got.items()}, errors)
        self.failed_in_a_row = 0
        return self._combine(trace, calls, got, attempts, errors)

    async def _collect(self, trace: RenderedTrace) -> tuple[dict[str, tuple[JudgeAnswer, list[CitedSpan]]], int,
                                                             list[str], bool]:
        cfg = self.config
        base = build_messages(trace)
        sampling = Sampling(temperature=0.0, max_tokens=cfg.max_tokens)
        got: dict[str, tuple[JudgeAnswer, list[CitedSpan]]] = {}
        errors: list[str] = []
        followups: dict[str, list[dict[str, Any]]] = {}
        retries: Counter[str] = Counter()
        attempts = pos = waits = connect_waits = 0
        deadline = time.monotonic() + cfg.deadline_s
        while len(got) < cfg.panel and attempts < cfg.max_attempts * cfg.panel:
            left = deadline - time.monotonic()
            if left <= 0:
                errors.append(f"no verdict within the deadline of {cfg.deadline_s:g} s")
                break
            pool = [m for m in self.models if m.name not in self.blacklist and m.name not in got]
            if not pool:
                errors.append("no usable model left in the pool")
                break
            model = pool[pos % len(pool)]
            attempts += 1
            try:
                backend = model.backend
            except ShopArenaError as exc:  # a model that cannot be loaded: no retry will fix it
                errors.append(f"{model.name}: {type(exc).__name__}: {exc.message[:200]}")
                self.blacklist.add(model.name)
                continue
            try:
                reply = await asyncio.wait_for(
                    backend.chat(base + followups.get(model.name, []), None, sampling), min(cfg.timeout_s, left))
            except Exception as exc:  # a judge's infrastructure failure is data, never a crash or a score
                status = getattr(exc, "status", None)
                errors.append(f"{model.name}: {type(exc).__name__}: {getattr(exc, 'message', str(exc))[:200]}")
                if status is None and _connect_failure(exc):
                    self.connect_failures += 1
                    if cfg.unreachable_after is not None and self.connect_failures >= cfg.unreachable_after:
                        self.unavailable = (f"{UNAVAILABLE}: {self.connect_failures} connection failures in a row; "
                                            f"last: {errors[-1]}")
                        return got, attempts, errors, True
                    pos += 1
                    await self._sleep(min(cfg.connect_backoff_s * 2 ** connect_waits, cfg.max_backoff_s,
                                          max(0.0, deadline - time.monotonic())))
                    connect_waits += 1
                    continue
                self.connect_failures = 0
                if status in _ABORT:
                    return got, attempts, errors, True
                if status is not None and status not in _RETRY:
                    self.blacklist.add(model.name)  # not served, or rejects the request: the next slides in
                else:
                    pos += 1
                    await self._sleep(min(cfg.backoff_s * 2 ** waits, cfg.max_backoff_s,
                                          max(0.0, deadline - time.monotonic())))
                    waits += 1
                continue
            self.connect_failures = 0
            text = reply.content or ""
            if '"reasoning_quality"' not in text and reply.reasoning_content:
                text = reply.reasoning_content + "\n" + text
            try:
                answer = parse_answer(text)
                spans = resolve_quotes(trace.text, answer)
            except AnswerError as exc:
                errors.append(f"{model.name}: {exc.kind}: {str(exc)[:200]}")
                if exc.kind == "unparseable":
                    self.blacklist.add(model.name)
                elif retries[model.name] < cfg.feedback_retries:
                    retries[model.name] += 1
                    followups[model.name] = [{"role": "assistant", "content": text[:4000]},
                                             {"role": "user", "content": citation_feedback([str(exc)])}]
                else:
                    followups.pop(model.name, None)
                    pos += 1
                continue
            got[model.name] = (answer, spans)
        return got, attempts, errors, False

    def _combine(self, trace: RenderedTrace, calls: list[Any], got: dict[str, tuple[JudgeAnswer, list[CitedSpan]]],
                 attempts: int, errors: list[str]) -> Verdict:
        scores = {name: a.score for name, (a, _) in got.items()}
        ordered = sorted(scores.values())
        median = ordered[(len(ordered) - 1) // 2]
        value, count = Counter(ordered).most_common(1)[0]
        agreement: dict[str, Any] = {"scores": scores, "median": median,
                                     "majority": value if count * 2 > len(ordered) else None,
                                     "agreed": len(set(ordered)) == 1, "failures": errors}
        chosen = next(name for name, s in scores.items() if s == median)
        answer, spans = got[chosen]
        score, gate, explanation = median, answer.gate, answer.explanation
        if self.config.enforce_g1 and score > GATE_SCORES[1] and not any(
                c.substantial for c in normalise_calls(calls)):
            agreement["g1_enforced_from"] = score
            score, gate = GATE_SCORES[1], 1
            explanation = (f"Gate 1 failed: the call log has no inference call with ≥ 30 completion tokens "
                           f"(the model answered {median}).")
            spans = [trace.span(s.start, s.end, 1) for s in trace.sections if s.kind in ("summary", "warning")]
        return Verdict(ok=True, score=score, gate=gate, explanation=explanation[:500], spans=spans,
                       judge="llm:" + ",".join(scores), prompt_version=self.prompt_version,
                       trace_sha256=trace.sha256, attempts=attempts, agreement=agreement)

    def _failure(self, trace: RenderedTrace, attempts: int, why: str, partial: dict[str, float],
                 errors: list[str]) -> Verdict:
        return Verdict(ok=False, explanation="", judge=self.name, prompt_version=self.prompt_version,
                       trace_sha256=trace.sha256, attempts=attempts, error=why,
                       agreement={"scores": partial, "failures": errors})
