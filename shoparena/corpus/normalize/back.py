"""Rows back to source formats: upstream step records (:func:`to_steps`), the ORO envelope (:func:`to_envelope`)
and OpenAI chat data (:func:`to_openai`); ORO SFT rows are :func:`~shoparena.corpus.normalize.to_oro_sft`.

Store records, rollouts and envelopes come back exactly as they were read (docs/shoppingbench.md §6.3, lossless both
ways) while their messages are unchanged; changed or foreign rows (rewrites, SFT imports) get step records built
from their messages by :func:`shoparena.env.records.messages_to_steps`, with tag-protocol ``content`` so
``format_reward`` applies.
"""

from __future__ import annotations

from typing import Any

from shoparena.corpus.normalize._common import fingerprint, join_meta
from shoparena.corpus.types import Trajectory
from shoparena.env.records import messages_to_steps, to_flavor
from shoparena.env.types import ENVELOPE_KEYS
from shoparena.errors import DataError

__all__ = ["to_envelope", "to_openai", "to_steps"]


def _check_steppable(messages: list[dict[str, Any]]) -> None:
    calls = 0
    seen_assistant = False
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            calls, seen_assistant = len(m.get("tool_calls") or ()), True
        elif role == "tool":
            if not seen_assistant or calls == 0:
                raise DataError(f"message {i}: a tool result no tool call asked for cannot be a step record",
                                hint="rewrite axis-B traces into agentic form first")
            calls -= 1


def to_steps(t: Trajectory) -> list[dict[str, Any]]:
    """Upstream step records of a row (the source's own flavour; ``upstream`` for rows without one). Raises
    :class:`~shoparena.errors.DataError` for conversations steps cannot hold (a second user turn, a tool result
    without a call)."""
    raw = t.extras.get("raw_steps")
    if raw is not None and t.extras.get("raw_fp") == fingerprint(t.messages):
        return raw
    _check_steppable(t.messages)
    return messages_to_steps(join_meta(t.messages, t.extras), flavor=t.extras.get("flavor", "upstream"))


def to_envelope(t: Trajectory) -> dict[str, Any]:
    """An ORO ``output.jsonl`` envelope (§6.2). Imported envelopes come back with their own fields and steps;
    other rows get ORO-flavoured steps without prompts, the stored status (``SUCCESS`` when unknown), the run's
    duration and the call log's inference counts."""
    steps = to_steps(t)
    env = t.extras.get("envelope")
    if env is not None:
        out = {k: env[k] for k in ENVELOPE_KEYS if k in env and k != "dialogue"}
        out.update({k: v for k, v in env.items() if k not in out})
        out["dialogue"] = steps
        return out
    started, finished = t.extras.get("started_at"), t.extras.get("finished_at")
    if isinstance(started, int) and isinstance(finished, int):
        execution_time: float = (finished - started) / 1000
    else:
        first = (steps[0].get("extra_info") or {}).get("execution_time") if steps else None
        execution_time = float(first) if isinstance(first, int | float) else 0.0
    inferences = [c for c in (t.call_log or ()) if isinstance(c, dict) and c.get("kind") == "inference"]
    total = len(inferences) if t.call_log else len(t.assistant_messages())
    failures = sum(1 for c in inferences if c.get("error") or (c.get("status") or 200) >= 400)
    return {"problem_id": t.problem_id or t.traj_id, "status": t.extras.get("status") or "SUCCESS",
            "execution_time": execution_time, "inference_failure_count": failures, "inference_total": total,
            "error": None, "dialogue": to_flavor(steps, "oro", drop_prompt=True)}


def to_openai(t: Trajectory) -> dict[str, Any]:
    """``{"messages", "tools"}`` in the OpenAI chat form (nested tools, arguments as JSON strings). The lists are
    new; the message dicts are the row's own."""
    return {"messages": list(t.messages), "tools": list(t.tools)}
