"""The episode runner (docs/shoppingbench.md §5.3): the only place the agent loop lives.

:class:`EpisodeLoop` is a sans-IO state machine — ``next_request()`` gives the ``(messages, tools)`` to send,
``submit(reply)`` / ``fail(exc)`` feed the answer back, ``finish()`` returns the :class:`Episode`. The two
drivers :func:`run_episode` (sync) and :func:`arun_episode` (awaits async policies, calls sync ones
directly) only move replies between a policy and the loop, so both share every rule:

- all calls of a step execute, even when one is ``terminate``; then the episode stops;
- the last ``recommend_product`` wins (no early stop on recommend);
- upstream stops on the first completely empty parse (recorded); ORO skips empty replies and stops after
  3 in a row; ``max_steps`` 30 (upstream) / 25 (ORO);
- tool errors are observations; a policy exception ends the episode with ``stop_reason="error"``;
- every step gets an ms ``extra_info.timestamp``; the first also ``execution_time`` (seconds, episode).

The policy sees only messages built from the query text — never rewards, vouchers or ids.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from shoparena.catalog.types import SearchBackend
from shoparena.env.prompts import detect_task, system_prompt
from shoparena.env.protocol_native import coerce_reply, parse_reply_native
from shoparena.env.protocol_tags import Parsed, TagHistory, make_call, parse_reply_tags, render_content
from shoparena.env.records import last_recommendation, make_step, step_to_messages, steps_to_messages
from shoparena.env.tools import ToolContext, get_toolset
from shoparena.env.types import (
    AssistantMessage,
    AsyncPolicy,
    Episode,
    EpisodeConfig,
    EpisodeError,
    Policy,
    StopReason,
    Timings,
    Usage,
)
from shoparena.errors import ConfigError

Clock = Callable[[], float]
Request = tuple[list[dict[str, Any]], list[dict[str, Any]]]

#: Per-profile defaults for the ``None`` fields of :class:`EpisodeConfig`.
PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "upstream4": {"max_steps": 30, "empty_limit": 1, "record_empty": True, "tag_flavor": "upstream"},
    "oro7": {"max_steps": 25, "empty_limit": 3, "record_empty": False, "tag_flavor": "oro"},
    "oro_sft4": {"max_steps": 25, "empty_limit": 3, "record_empty": False, "tag_flavor": "oro"},
}
AUTO_RECOMMEND_THINK = "Auto-recommending best available candidates."


def resolve_config(config: EpisodeConfig | None = None, **overrides: Any) -> EpisodeConfig:
    """``config`` with ``overrides`` applied and the profile's defaults filled in."""
    base = (config or EpisodeConfig()).model_dump(exclude_none=True)
    try:
        cfg = EpisodeConfig.model_validate({**base, **overrides})
    except ValidationError as exc:
        raise ConfigError(f"invalid episode configuration: {exc}") from exc
    defaults = {k: v for k, v in PROFILE_DEFAULTS[cfg.profile].items() if getattr(cfg, k) is None}
    return cfg.model_copy(update=defaults) if defaults else cfg


def _problem_fields(problem: Any) -> tuple[str, str]:
    """``(problem_id, query)`` from a Problem, a mapping or a bare query string — nothing else leaks."""
    if isinstance(problem, str):
        return "", problem
    if isinstance(problem, Mapping):
        return str(problem.get("problem_id") or problem.get("id") or ""), str(problem["query"])
    return str(getattr(problem, "problem_id", "") or ""), str(problem.query)


class EpisodeLoop:
    """One episode's state. Drive it with ``next_request`` / ``submit`` / ``fail``, then ``finish``."""

    def __init__(self, problem: Any, backend: SearchBackend | None, config: EpisodeConfig,
                 clock: Clock = time.time) -> None:
        self.cfg = cfg = config
        self.problem_id, self.query = _problem_fields(problem)
        self.clock = clock
        self.toolset = get_toolset(cfg.profile, web_search=cfg.web_search, python_execute=cfg.python_execute)
        self.ctx = ToolContext(backend, shop_fallbacks=cfg.profile == "oro7", sku_bug_parity=cfg.sku_bug_parity)
        self.system = system_prompt(protocol=cfg.protocol, profile=cfg.profile, toolkit_text=self.toolset.text(),
                                    query=self.query, react=cfg.react, override=cfg.system_prompt)
        self.tags = cfg.protocol == "tags"
        self.history = TagHistory(self.query, cfg.tag_flavor or "upstream") if self.tags else None
        self.native: list[dict[str, Any]] = [] if self.tags else [
            {"role": "system", "content": self.system}, {"role": "user", "content": self.query}]
        self.offered = [] if self.tags else self.toolset.specs()
        self.steps: list[dict[str, Any]] = []
        self.step_no = self.empties = self.inference_total = self.failures = self.n_calls = 0
        self.stop: StopReason | None = None
        self.error: EpisodeError | None = None
        self.recommended = False
        self.candidates: dict[str, None] = {}
        self.usage: list[Usage] = []
        self.policy_s = self.tools_s = 0.0
        self.started = clock()
        self._sent_at = self.started
        self._request: list[dict[str, Any]] = []

    # ── driving ──
    def next_request(self) -> Request | None:
        """The next ``(messages, tools)`` for the policy, or None when the episode is over."""
        if self.stop is not None:
            return None
        if self.step_no >= (self.cfg.max_steps or 0):
            self.stop = "max_steps"
            return None
        self.step_no += 1
        self._request = self.history.messages(self.system) if self.history else list(self.native)
        self._sent_at = self.clock()
        return self._request, self.offered

    def fail(self, exc: BaseException) -> None:
        """The policy raised: the episode ends with ``stop_reason="error"`` (recorded, not re-raised)."""
        self.policy_s += self.clock() - self._sent_at
        self._error(exc)

    def _error(self, exc: BaseException) -> None:
        self.inference_total += 1
        self.failures += 1
        self.error = EpisodeError(type=type(exc).__name__, message=str(exc))
        self.stop = "error"

    def submit(self, reply: AssistantMessage | Mapping[str, Any] | str) -> None:
        """Parse one reply, execute its calls, record the step."""
        now = self.clock()
        self.policy_s += now - self._sent_at
        try:
            msg = coerce_reply(reply)
        except (TypeError, ValueError) as exc:  # an unusable reply ends the episode like a raise
            self._error(exc)
            return
        self.inference_total += 1
        if msg.usage is not None:
            self.usage.append(msg.usage)
        parse = parse_reply_tags if self.tags else parse_reply_native
        parsed = parse(msg, self.toolset.names)
        if parsed.empty:
            self.failures += 1
            self.empties += 1
            if self.cfg.record_empty:
                self._record(parsed, [])
            if self.empties >= (self.cfg.empty_limit or 1):
                self.stop = "empty_output"
            return
        self.empties = 0
        t0 = self.clock()
        results = [self.toolset.execute(c["name"], c["parameters"], self.ctx) for c in parsed.calls]
        self.tools_s += self.clock() - t0
        self._record(parsed, results)
        if any(c["name"] == "terminate" for c in parsed.calls):
            self.stop = "terminate"

    def _record(self, parsed: Parsed, results: list[Any], *, auto: bool = False) -> None:
        step = make_step(parsed, results, step=self.step_no, query=self.query,
                         timestamp=int(self.clock() * 1000), flavor=self.cfg.record_flavor,
                         problem_id=self.problem_id or None,
                         prompt=self._request if self.cfg.record_prompt and not auto else None)
        if auto:
            step["extra_info"]["auto_recommend"] = True
        self.steps.append(step)
        self.n_calls += len(parsed.calls)
        if self.history is not None:
            obs = [{"tool_call_id": c["tool_call_id"], "results": r} for c, r in zip(parsed.calls, results, strict=True)]
            self.history.add_turn(parsed.think, parsed.calls, obs, parsed.response)
        else:
            self.native.extend(step_to_messages(step, meta=False))
        for call, result in zip(parsed.calls, results, strict=True):
            self._track(call["name"], result)

    def _track(self, name: str, result: Any) -> None:
        """ORO's bookkeeping for the auto-recommend rescue."""
        if name == "recommend_product" and not (isinstance(result, dict) and "error" in result):
            self.recommended = True
        elif name == "find_product" and isinstance(result, list):
            for p in result:
                if isinstance(p, dict) and p.get("product_id"):
                    self.candidates.setdefault(str(p["product_id"]), None)
        elif name == "find_products_in_same_shop" and isinstance(result, dict) and result.get("found"):
            for p in result.get("products") or []:
                if isinstance(p, dict) and p.get("product_id"):
                    self.candidates.setdefault(str(p["product_id"]), None)

    def _auto_recommend(self) -> None:
        ids = list(self.candidates)
        product_ids = ids[0] if detect_task(self.query) == "product" else ",".join(ids)
        parsed = Parsed(think=AUTO_RECOMMEND_THINK, calls=[make_call("recommend_product", {"product_ids": product_ids})])
        parsed.content = render_content(parsed.think, parsed.calls, "")
        results = [self.toolset.execute("recommend_product", parsed.calls[0]["parameters"], self.ctx)]
        self.step_no = len(self.steps) + 1
        self._record(parsed, results, auto=True)

    def finish(self) -> Episode:
        """Close the episode (auto-recommend first when enabled) and build the record."""
        if self.stop is None:
            self.stop = "max_steps"
        if self.cfg.auto_recommend and self.stop != "error" and not self.recommended and self.candidates:
            self._auto_recommend()
        ended = self.clock()
        total = ended - self.started
        if self.steps:
            self.steps[0]["extra_info"]["execution_time"] = total
        return Episode.model_construct(
            problem_id=self.problem_id, query=self.query, config=self.cfg, steps=self.steps,
            messages=steps_to_messages(self.steps, query=self.query, system=self.system),
            tools=self.toolset.specs(), recommendation=last_recommendation(self.steps), stop_reason=self.stop,
            error=self.error, inference_total=self.inference_total, inference_failure_count=self.failures,
            n_tool_calls=self.n_calls, usage=_sum_usage(self.usage),
            timings=Timings(started_ms=int(self.started * 1000), ended_ms=int(ended * 1000), total_s=total,
                            policy_s=self.policy_s, tools_s=self.tools_s),
        )


def _sum_usage(usages: list[Usage]) -> Usage | None:
    if not usages:
        return None
    total: dict[str, int | None] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        values = [getattr(u, key) for u in usages if getattr(u, key) is not None]
        total[key] = sum(values) if values else None
    return Usage(**total)


def _is_async(policy: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(policy, "respond", None))


def run_episode(problem: Any, policy: Policy | AsyncPolicy, backend: SearchBackend | None, config: EpisodeConfig | None = None,
                *, clock: Clock = time.time, **overrides: Any) -> Episode:
    """Run one episode synchronously. ``overrides`` are :class:`EpisodeConfig` fields (``protocol=``,
    ``profile=``, ``max_steps=``, ``empty_limit=``, ``auto_recommend=`` …). An ``async`` policy is run
    with ``asyncio.run`` when no event loop is running (use :func:`arun_episode` inside one)."""
    if _is_async(policy):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(arun_episode(problem, policy, backend, config, clock=clock, **overrides))
        raise ConfigError("run_episode got an async policy inside a running event loop",
                          hint="await arun_episode(...) instead")
    loop = EpisodeLoop(problem, backend, resolve_config(config, **overrides), clock)
    respond = policy.respond
    while (request := loop.next_request()) is not None:
        try:
            reply = respond(*request)
        except Exception as exc:  # a crashing policy is data, not a crash of the runner
            loop.fail(exc)
            continue
        loop.submit(reply)
    return loop.finish()


async def arun_episode(problem: Any, policy: Policy | AsyncPolicy, backend: SearchBackend | None,
                       config: EpisodeConfig | None = None, *, clock: Clock = time.time,
                       **overrides: Any) -> Episode:
    """Run one episode on the current event loop: ``async`` policies are awaited, sync ones called
    directly. Tools run in-process between awaits. Cancellation propagates."""
    loop = EpisodeLoop(problem, backend, resolve_config(config, **overrides), clock)
    respond = policy.respond
    while (request := loop.next_request()) is not None:
        try:
            reply = respond(*request)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:
            loop.fail(exc)
            continue
        loop.submit(reply)
    return loop.finish()
