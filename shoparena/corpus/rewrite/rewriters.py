"""The two rewriters: :class:`TemplateRewriter` (offline, deterministic) and :class:`LLMRewriter` (any
``shoparena.llm`` model URI writes the reasoning, the template covers every step it gets wrong).

Both build the same trace from a :class:`~shoparena.corpus.rewrite.trace.RewritePlan`: the head (system / user)
verbatim, then per real call one assistant turn (``content: ""``, ``reasoning_content``, one ``tool_calls`` entry
with the call's id, name and exact argument string) and the tool message with the exact observation; the last two
calls are the original ``recommend_product`` and ``terminate``. Only the reasoning text is new.

The rewritten row: ``source="rewrite"``, ``rewritten=True``, ``axis="A"``, ``axis_source="rewrite"``, a content
``traj_id`` (:func:`~shoparena.corpus.types.trajectory_id` of the new messages and tools), the original's problem,
bucket, cluster, suite, success, judge score, coefficient and outcome, ``provenance`` = the original's plus
``rewritten_from`` and ``rewriter``, ``call_log=None`` (the original's log attributes these calls to axis B; it
stays with the original row) and ``extras["rewrite"]`` = per-row figures (steps, LLM-written steps, template
fallbacks by reason, where the calls came from).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections import Counter
from typing import Any, Literal

from shoparena.corpus.rewrite.reasoning import grounding_errors, sources_for, template_reasoning
from shoparena.corpus.rewrite.trace import STAGE, Observer, RewritePlan, plan_rewrite
from shoparena.corpus.types import Rejection, Trajectory, trajectory_id
from shoparena.env.types import AssistantMessage

__all__ = ["DEFAULT_MAX_LENGTH", "LLMRewriter", "TemplateRewriter", "build_messages", "estimate_tokens"]

DEFAULT_MAX_LENGTH = 14336
"""The format gate's default ``max_length`` (tokens); a longer rewrite is rejected (``too_long``)."""


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """The format gate's conservative token estimate when ``shoparena.corpus.filter`` provides it, else the same
    rule locally (digits one token each, other bytes three to a token, plus per-message / per-call overhead)."""
    try:
        from shoparena.corpus.filter.tokens import estimate_tokens as gate_estimate
    except ImportError:  # the filter package is optional to the rewriter
        data = json.dumps([messages, tools], ensure_ascii=False).encode()
        digits = sum(data.count(d) for d in b"0123456789")
        return digits + (len(data) - digits + 2) // 3 + 20 * len(messages) + 120
    return int(gate_estimate(messages, tools))


def _prefix(plan: RewritePlan, reasonings: list[str]) -> list[dict[str, Any]]:
    """The head plus one assistant turn and one tool message per given reasoning (steps in order)."""
    out = [dict(m) for m in plan.head]
    for call, reasoning in zip(plan.steps(), reasonings, strict=False):
        out.append({"role": "assistant", "content": "", "reasoning_content": reasoning,
                    "tool_calls": [{"id": call.id, "type": "function",
                                    "function": {"name": call.name, "arguments": call.arguments}}]})
        out.append({"role": "tool", "tool_call_id": call.id, "content": call.observation})
    return out


def build_messages(plan: RewritePlan, reasonings: list[str]) -> list[dict[str, Any]]:
    """The agentic trace of ``plan`` with ``reasonings[k]`` before step ``k`` (module docstring)."""
    if len(reasonings) != len(plan.steps()):
        raise ValueError(f"{len(reasonings)} reasonings for {len(plan.steps())} steps")
    return _prefix(plan, reasonings)


def _finish(t: Trajectory, plan: RewritePlan, reasonings: list[str], rewriter: str, figures: dict[str, Any],
            max_length: int | None) -> Trajectory | Rejection:
    messages = build_messages(plan, reasonings)
    if max_length is not None and (n := estimate_tokens(messages, plan.tools)) > max_length:
        return Rejection(stage=STAGE, reason="too_long", message=f"the rewrite is about {n} tokens > {max_length}",
                         where=t.traj_id, traj_id=t.traj_id)
    return dataclasses.replace(
        t, traj_id=trajectory_id(messages, plan.tools, t.problem_id), source="rewrite", messages=messages,
        tools=plan.tools, axis="A", axis_source="rewrite", call_log=None, rewritten=True,
        provenance={**t.provenance, "rewritten_from": t.traj_id, "rewriter": rewriter},
        extras={"rewrite": {"steps": len(reasonings), "calls_from": plan.calls_from, **figures}})


class TemplateRewriter:
    """Offline, deterministic axis-B → axis-A rewriter: the reasoning is :func:`template_reasoning`.

    ``observe`` answers calls that only the call log holds (see :func:`plan_rewrite`); ``verify_call_log`` checks
    the trace's searches against the log; ``max_length`` is the format gate's token limit (None: no check)."""

    name = "template/1"

    def __init__(self, *, observe: Observer | None = None, verify_call_log: bool = True,
                 max_length: int | None = DEFAULT_MAX_LENGTH) -> None:
        self.observe = observe
        self.verify_call_log = verify_call_log
        self.max_length = max_length

    def rewrite(self, t: Trajectory) -> Trajectory | Rejection:
        plan = plan_rewrite(t, observe=self.observe, verify_call_log=self.verify_call_log)
        if isinstance(plan, Rejection):
            return plan
        reasonings = [template_reasoning(plan, k) for k in range(len(plan.steps()))]
        return _finish(t, plan, reasonings, self.name, {"llm_steps": 0, "fallbacks": {}}, self.max_length)

    async def arewrite(self, t: Trajectory) -> Trajectory | Rejection:
        return self.rewrite(t)


_INSTRUCT = """You rewrite one step of a shopping assistant's trace into agentic form. The assistant is about to make \
the tool call shown under "Next call" (it has already been decided and will be made exactly as shown). Write the \
assistant's reasoning just before that call, in two to four plain sentences, first person: what the previous \
observation showed that matters (product ids, titles, prices, attributes) and which requirement of the request \
the next call checks. Use only facts stated in the request, the observations and the call; when you quote a title \
or a phrase, put it in double quotes exactly as written there. Write no JSON, no tool-call markup and nothing else."""

_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "<response>", "<|im_")
_ECHO = ("request:", "next call:", "calls made so far", "the reasoning before the next call", "observation:")
"""The instruct prompt's own scaffolding: a reply repeating it is an echo of the prompt, not reasoning."""

FallbackReason = Literal["backend_error", "empty", "not_prose", "markup", "echo", "too_long", "ungrounded",
                         "call_mismatch"]
"""Why a step's model text was replaced by the template reasoning (counted per reason)."""


def _reasoning_of(reply: AssistantMessage) -> str:
    if reply.reasoning_content and reply.reasoning_content.strip():
        return reply.reasoning_content.strip()
    content = reply.content or ""
    m = _THINK.search(content)
    if m:
        return m.group(1).strip()
    return content.replace("</think>", "").strip()


def _same_args(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def norm(d: dict[str, Any]) -> dict[str, str]:
        return {str(k): str(v) for k, v in d.items() if v not in (None, "")}
    return norm(a) == norm(b)


class LLMRewriter:
    """A model writes the reasoning before each real call; the calls, observations and recommendation are kept
    verbatim. ``model_uri`` is any ``shoparena.llm`` URI (``openai:<url>/<model>``, ``hf:<path>``,
    ``policy:<name>``).

    Two ways to ask (``mode``):

    - ``instruct``: one request per step — an instruction, the request, the observations so far and the next real
      call; the reply text is the reasoning (for instruction-following models: ``openai:``, ``hf:``);
    - ``continue``: the rewritten trace so far is sent as the agent's own conversation (with its tools) and the
      model writes its next turn; its reasoning is used only when the call it proposes is the real next call (same
      tool, same arguments), so the reasoning really leads to that call (for agent policies: ``policy:``).

    ``auto`` picks ``continue`` for ``policy:`` URIs and ``instruct`` otherwise. Every step whose text is unusable
    — backend error, empty, JSON instead of prose, tool-call markup, an echo of the prompt, longer than ``max_chars``, a fact not in the
    request / observations / call (:func:`grounding_errors`), or (``continue``) a different call — gets the template
    reasoning instead, counted by reason in :attr:`fallbacks` and in the row's ``extras["rewrite"]``.
    """

    version = "1"

    def __init__(self, model_uri: str, *, mode: Literal["auto", "instruct", "continue"] = "auto",
                 sampling: Any = None, max_chars: int = 1500, observe: Observer | None = None,
                 verify_call_log: bool = True, max_length: int | None = DEFAULT_MAX_LENGTH) -> None:
        from shoparena.llm import Sampling, get_backend

        self.model_uri = model_uri
        self.backend = get_backend(model_uri)
        self.mode: Literal["instruct", "continue"] = (
            ("continue" if model_uri.startswith("policy:") else "instruct") if mode == "auto" else mode)
        self.sampling = sampling if sampling is not None else Sampling(temperature=0.0, seed=0, max_tokens=400)
        self.max_chars = max_chars
        self.observe = observe
        self.verify_call_log = verify_call_log
        self.max_length = max_length
        self.name = f"llm/{self.version}:{self.mode}:{model_uri}"
        self.llm_steps = 0
        self.fallbacks: Counter[str] = Counter()

    async def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> AssistantMessage:
        complete = getattr(self.backend, "complete", None)
        if callable(complete):  # offline policies answer synchronously; no event-loop hop needed
            reply: AssistantMessage = complete(messages, tools, self.sampling)
            return reply
        return await self.backend.chat(messages, tools, self.sampling)

    def _instruct_messages(self, plan: RewritePlan, k: int) -> list[dict[str, Any]]:
        steps = plan.steps()
        done = "\n".join(f"{i + 1}. {c.name} {c.arguments}\n   observation: {c.observation[:3000]}"
                         for i, c in enumerate(steps[:k])) or "(none yet)"
        nxt = steps[k]
        user = (f"Request:\n{plan.query}\n\nCalls made so far and their observations:\n{done}\n\n"
                f"Next call:\n{nxt.name} {nxt.arguments}\n\nThe reasoning before the next call:")
        return [{"role": "system", "content": _INSTRUCT}, {"role": "user", "content": user}]

    async def _step(self, plan: RewritePlan, k: int, prefix: list[dict[str, Any]]) -> tuple[str | None, str]:
        """The model's reasoning for step ``k`` (None + the fallback reason when unusable)."""
        call = plan.steps()[k]
        try:
            if self.mode == "continue":
                reply = await self._ask(prefix, plan.tools)
            else:
                reply = await self._ask(self._instruct_messages(plan, k), None)
        except Exception as exc:  # a failing backend is a counted fallback, never a crash
            return None, f"backend_error:{type(exc).__name__}"
        if self.mode == "continue":
            proposed = reply.tool_calls[0] if reply.tool_calls else None
            if proposed is None or proposed.name != call.name or not _same_args(proposed.arguments, call.args()):
                return None, "call_mismatch"
        text = _reasoning_of(reply)
        if not text:
            return None, "empty"
        if text[0] in "{[":
            return None, "not_prose"
        if any(tag in text for tag in _MARKUP):
            return None, "markup"
        if any(tag in text.lower() for tag in _ECHO):
            return None, "echo"
        if len(text) > self.max_chars:
            return None, "too_long"
        if grounding_errors(text, sources_for(plan, k)):
            return None, "ungrounded"
        return text, "ok"

    async def arewrite(self, t: Trajectory) -> Trajectory | Rejection:
        plan = plan_rewrite(t, observe=self.observe, verify_call_log=self.verify_call_log)
        if isinstance(plan, Rejection):
            return plan
        reasonings: list[str] = []
        used = 0
        fallbacks: Counter[str] = Counter()
        down = False
        for k in range(len(plan.steps())):
            # once the backend has failed on this row, its other steps fall back without asking again
            text, why = (None, "backend_error") if down else await self._step(plan, k, _prefix(plan, reasonings))
            down = down or why.startswith("backend_error")
            if text is None:
                fallbacks[why.split(":", 1)[0]] += 1
                text = template_reasoning(plan, k)
            else:
                used += 1
            reasonings.append(text)
        self.llm_steps += used
        self.fallbacks.update(fallbacks)
        return _finish(t, plan, reasonings, self.name, {"llm_steps": used, "fallbacks": dict(sorted(fallbacks.items()))},
                       self.max_length)

    def rewrite(self, t: Trajectory) -> Trajectory | Rejection:
        """Synchronous :meth:`arewrite` (not from inside a running event loop)."""
        return asyncio.run(self.arewrite(t))
