"""Step records ↔ canonical OpenAI messages, record flavours, the ORO envelope (docs/shoppingbench.md §6).

Step → one assistant message (``content`` ← response, ``reasoning_content`` ← think, ``tool_calls[]`` with
``id`` ← tool_call_id and ``arguments`` ← JSON of parameters) followed by one ``role: "tool"`` message per
call that has an observation (``content`` ← JSON of the result). The first user message is the query.

The conversion is lossless both ways. What a step holds beyond the messages (timestamps and other
``extra_info``, raw ``content``, API ``reasoning_content``, ``prompt``, a non-default flavour) rides in an
optional ``step_meta`` key of the assistant message, written only when it differs from what the messages
imply — plain messages carry none. Strip it with :func:`strip_meta` before sending messages to an API.

The converters take checked step records: anything from outside (an agent's output, a rollout file, a stored
body) goes through :func:`shoparena.env.output.validate_steps` first, and never raises here once it passed.

Canonical forms (what round-trips exactly): empty message parts are omitted from ``completion.message``
(upstream ``Message.to_dict``); tool contents and arguments are ``json.dumps(…, ensure_ascii=False)``.
"""

from __future__ import annotations

import json
from typing import Any

from shoparena.env.output import OutputDefect, validate_steps
from shoparena.env.protocol_tags import Parsed, render_content, tool_call_id
from shoparena.env.tools import ArgError, arg_ids
from shoparena.env.types import ENVELOPE_KEYS as ENVELOPE_KEYS
from shoparena.env.types import Episode, RecordFlavor
from shoparena.errors import DataError
from shoparena.types import STATUSES

META = "step_meta"
_MISSING = object()


def dumps(obj: Any) -> str:
    """Canonical JSON of tool arguments and tool message contents."""
    return json.dumps(obj, ensure_ascii=False)


def decode_content(content: Any) -> Any:
    """A tool message content back to the observation: JSON when it parses, else the text itself."""
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def make_step(
    parsed: Parsed, results: list[Any], *, step: int, query: str, timestamp: int,
    flavor: RecordFlavor = "upstream", problem_id: str | None = None, prompt: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One step record from a parsed reply and the observations of its calls (same order)."""
    message: dict[str, Any] = {}
    if parsed.think:
        message["think"] = parsed.think
    if parsed.calls:
        if flavor == "upstream":
            message["tool_call"] = parsed.calls
        else:
            message["tool_call"] = [{**c, "result": r} for c, r in zip(parsed.calls, results, strict=True)]
        if flavor != "oro":
            message["obs"] = [{"tool_call_id": c["tool_call_id"], "results": r}
                              for c, r in zip(parsed.calls, results, strict=True)]
    if parsed.response:
        message["response"] = parsed.response
    extra: dict[str, Any] = {"step": step, "query": query, "timestamp": timestamp}
    if problem_id is not None:
        extra["problem_id"] = problem_id
    if parsed.errors:
        extra["parse_errors"] = list(parsed.errors)
    record: dict[str, Any] = {} if prompt is None else {"prompt": prompt}
    record["completion"] = {"reasoning_content": parsed.reasoning_content, "content": parsed.content,
                            "message": message}
    record["extra_info"] = extra
    return record


def step_flavor(message: dict[str, Any]) -> RecordFlavor | None:
    """Where this step keeps its outputs; None when it has no calls (any flavour fits)."""
    calls = message.get("tool_call") or []
    has_result = any("result" in c for c in calls)
    has_obs = "obs" in message
    if has_obs and has_result:
        return "both"
    if has_result:
        return "oro"
    return "upstream" if has_obs else None


def step_results(message: dict[str, Any]) -> list[tuple[bool, Any]]:
    """``(has_output, output)`` per call: ``obs`` matched by tool_call_id in order, else ``result``."""
    calls = message.get("tool_call") or []
    if "obs" in message:
        pending = list(message.get("obs") or [])
        out = []
        for c in calls:
            j = next((k for k, o in enumerate(pending) if o.get("tool_call_id") == c.get("tool_call_id")), None)
            out.append((False, None) if j is None else (True, pending.pop(j).get("results")))
        return out
    return [(("result" in c), c.get("result")) for c in calls]


def step_to_messages(step: dict[str, Any], *, index: int = 0, query: str | None = None,
                     flavor: RecordFlavor = "upstream", meta: bool = True) -> list[dict[str, Any]]:
    """The assistant message (+ tool messages) of one step."""
    comp = step.get("completion") or {}
    msg = comp.get("message") or {}
    think, response, calls = msg.get("think") or "", msg.get("response") or "", msg.get("tool_call") or []
    asst: dict[str, Any] = {"role": "assistant", "content": response}
    if think:
        asst["reasoning_content"] = think
    if calls:
        asst["tool_calls"] = [{"id": c["tool_call_id"], "type": "function",
                               "function": {"name": c["name"], "arguments": dumps(c["parameters"])}} for c in calls]
    tools = [{"role": "tool", "tool_call_id": c["tool_call_id"], "content": dumps(value)}
             for c, (has, value) in zip(calls, step_results(msg), strict=True) if has]
    if meta:
        md = _meta(step, comp, msg, think, calls, response, index, query, flavor)
        if md:
            asst[META] = md
    return [asst, *tools]


def _meta(step: dict[str, Any], comp: dict[str, Any], msg: dict[str, Any], think: str, calls: list[dict[str, Any]],
          response: str, index: int, query: str | None, flavor: RecordFlavor) -> dict[str, Any]:
    md: dict[str, Any] = {}
    fl = step_flavor(msg)
    if fl is not None and fl != flavor:
        md["flavor"] = fl
    derived = {"step": index + 1, "query": query}
    extra = step.get("extra_info") or {}
    diff = {k: v for k, v in extra.items() if derived.get(k, _MISSING) != v}
    if diff:
        md["extra_info"] = diff
    dropped = [k for k in derived if k not in extra]
    if dropped:
        md["extra_info_drop"] = dropped
    if comp.get("content", "") != render_content(think, calls, response):
        md["content"] = comp.get("content", "")
    if comp.get("reasoning_content", "") != "":
        md["reasoning_content"] = comp.get("reasoning_content")
    if "prompt" in step:
        md["prompt"] = step["prompt"]
    return md


def steps_to_messages(steps: list[dict[str, Any]], *, query: str | None = None, system: str | None = None,
                      flavor: RecordFlavor = "upstream", meta: bool = True) -> list[dict[str, Any]]:
    """Canonical OpenAI messages of a trajectory: [system], user (the query), then per step the
    assistant message and its tool messages. ``query`` defaults to the first step's ``extra_info.query``."""
    out: list[dict[str, Any]] = [] if system is None else [{"role": "system", "content": system}]
    if query is None and steps:
        query = (steps[0].get("extra_info") or {}).get("query")
    if query is not None:
        out.append({"role": "user", "content": query})
    for i, step in enumerate(steps):
        out.extend(step_to_messages(step, index=i, query=query, flavor=flavor, meta=meta))
    return out


def messages_to_steps(messages: list[dict[str, Any]], *, flavor: RecordFlavor = "upstream") -> list[dict[str, Any]]:
    """Step records from canonical messages (leading system messages are not part of step records).
    Raises :class:`DataError` for shapes steps cannot hold (a second user turn, an orphan tool message)."""
    i, n = 0, len(messages)
    while i < n and messages[i].get("role") == "system":
        i += 1
    query = None
    if i < n and messages[i].get("role") == "user":
        query = messages[i].get("content")
        i += 1
    steps: list[dict[str, Any]] = []
    while i < n:
        asst = messages[i]
        if asst.get("role") != "assistant":
            raise DataError(f"message {i}: expected an assistant message, got role {asst.get('role')!r}",
                            hint="step records hold one user query followed by assistant/tool turns")
        j = i + 1
        while j < n and messages[j].get("role") == "tool":
            j += 1
        steps.append(_message_to_step(asst, messages[i + 1:j], len(steps), query, flavor))
        i = j
    return steps


def _message_to_step(asst: dict[str, Any], tools: list[dict[str, Any]], index: int, query: Any,
                     flavor: RecordFlavor) -> dict[str, Any]:
    md = asst.get(META) or {}
    fl = md.get("flavor", flavor)
    think, response = asst.get("reasoning_content") or "", asst.get("content") or ""
    calls = []
    for tc in asst.get("tool_calls") or []:
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        params = decode_content(args) if isinstance(args, str) else (args or {})
        if not isinstance(params, dict):
            raise DataError(f"tool call {fn.get('name')!r}: arguments are not a JSON object")
        calls.append({"name": fn.get("name"), "parameters": params,
                      "tool_call_id": tc.get("id") or tool_call_id(fn.get("name"), params)})
    by_id = all(t.get("tool_call_id") for t in tools)
    pending = list(tools)
    results: list[tuple[bool, Any]] = []
    for k, c in enumerate(calls):
        hit = (next((p for p in pending if p.get("tool_call_id") == c["tool_call_id"]), None) if by_id
               else (tools[k] if k < len(tools) else None))
        if hit is not None and by_id:
            pending.remove(hit)
        results.append((hit is not None, decode_content(hit.get("content")) if hit is not None else None))
    if by_id and pending:
        raise DataError(f"tool message(s) {[p.get('tool_call_id') for p in pending]} match no tool call")
    message: dict[str, Any] = {}
    if think:
        message["think"] = think
    if calls:
        message["tool_call"] = calls if fl == "upstream" else [
            {**c, "result": v} if has else c for c, (has, v) in zip(calls, results, strict=True)]
        obs = [{"tool_call_id": c["tool_call_id"], "results": v} for c, (has, v) in zip(calls, results, strict=True) if has]
        if fl != "oro" and obs:
            message["obs"] = obs
    if response:
        message["response"] = response
    extra: dict[str, Any] = {"step": index + 1, "query": query}
    extra.update(md.get("extra_info") or {})
    for key in md.get("extra_info_drop") or ():
        extra.pop(key, None)
    step: dict[str, Any] = {"prompt": md["prompt"]} if "prompt" in md else {}
    step["completion"] = {"reasoning_content": md.get("reasoning_content", ""),
                          "content": md.get("content", render_content(think, calls, response)), "message": message}
    step["extra_info"] = extra
    return step


def strip_meta(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without ``step_meta`` (for APIs and chat templates)."""
    return [{k: v for k, v in m.items() if k != META} if META in m else m for m in messages]


def to_flavor(steps: list[dict[str, Any]], flavor: RecordFlavor, *, drop_prompt: bool = False) -> list[dict[str, Any]]:
    """The same steps with outputs moved to ``obs`` (upstream), ``tool_call[].result`` (oro) or both."""
    out = []
    for step in steps:
        msg = step["completion"].get("message") or {}
        calls = msg.get("tool_call") or []
        results = step_results(msg)
        new_msg = {k: v for k, v in msg.items() if k not in ("tool_call", "obs", "response")}
        if calls:
            bare = [{k: v for k, v in c.items() if k != "result"} for c in calls]
            new_msg["tool_call"] = bare if flavor == "upstream" else [
                {**c, "result": v} if has else c for c, (has, v) in zip(bare, results, strict=True)]
            obs = [{"tool_call_id": c["tool_call_id"], "results": v} for c, (has, v) in zip(bare, results, strict=True) if has]
            if flavor != "oro" and obs:
                new_msg["obs"] = obs
        if msg.get("response"):
            new_msg["response"] = msg["response"]
        new = {k: v for k, v in step.items() if not (k == "prompt" and drop_prompt)}
        new["completion"] = {**step["completion"], "message": new_msg}
        out.append(new)
    return out


def last_recommendation(steps: list[dict[str, Any]]) -> str | None:
    """``product_ids`` of the last recommend_product call (the one every scorer reads, §5.3) as a comma
    string (arrays and ``product_id`` accepted); None when there is none or it carries no ids."""
    for step in reversed(steps):
        for call in reversed((step.get("completion") or {}).get("message", {}).get("tool_call") or []):
            if call.get("name") == "recommend_product":
                try:
                    return arg_ids(call.get("parameters") or {})
                except ArgError:
                    return None
    return None


# ── ORO envelope (§6.2) ───────────────────────────────────────────────────────────────────────────────


def episode_envelope(episode: Episode) -> dict[str, Any]:
    """The ORO ``output.jsonl`` line for one episode: ORO-flavoured steps, no prompts."""
    return {
        "problem_id": episode.problem_id,
        "status": "FAILED" if episode.stop_reason == "error" else "SUCCESS",
        "execution_time": episode.timings.total_s,
        "inference_failure_count": episode.inference_failure_count,
        "inference_total": episode.inference_total,
        "error": episode.error.model_dump() if episode.error else None,
        "dialogue": to_flavor(episode.steps, "oro", drop_prompt=True),
    }




def read_envelope(obj: dict[str, Any], *, check_steps: bool = True) -> dict[str, Any]:
    """Validate one ORO envelope (keys, status, error shape, and unless ``check_steps`` is False its steps, with
    :func:`shoparena.env.output.validate_steps`) and return it unchanged."""
    missing = [k for k in ("problem_id", "status", "dialogue") if k not in obj]
    extra = [k for k in obj if k not in ENVELOPE_KEYS]
    if missing or extra:
        raise DataError(f"ORO envelope: missing keys {missing}, unknown keys {extra}")
    if obj["status"] not in STATUSES:
        raise DataError(f"ORO envelope: bad status {obj['status']!r}", hint="SUCCESS, FAILED or TIMED_OUT")
    err = obj.get("error")
    if err is not None and not (isinstance(err, dict) and {"type", "message"} <= set(err)):
        raise DataError("ORO envelope: error must be null or {type, message}")
    if check_steps and obj["dialogue"] is not None:
        checked = validate_steps(obj["dialogue"])
        if isinstance(checked, OutputDefect):
            raise DataError(f"ORO envelope {str(obj['problem_id'])[:80]}: {checked.describe()}")
    return obj
