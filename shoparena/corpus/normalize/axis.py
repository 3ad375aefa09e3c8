"""The text-only axis heuristic (:func:`text_axis`) for imported traces that carry no gateway call log.

Store rows are attributed from their call log (ground truth of who issued each search); this module only
guesses from what a trainer would see, so it cannot tell a Python search loop that *logs* its searches as
assistant tool calls (the pipeline agent's store records look agentic in text) from a real agent.
"""

from __future__ import annotations

from typing import Any

import orjson

from shoparena.corpus.types import Axis
from shoparena.env.tools import NON_SEARCH_TOOLS
from shoparena.llm.subtasks import MARKER, parse_intent

__all__ = ["NON_SEARCH_TOOLS", "text_axis"]

"""Tools that do not search the catalog (or the web); every other tool call counts as a search."""


def _subtask_answer(text: str) -> bool:
    """Does an assistant turn only answer a sub-task (``shoparena.llm.subtasks``): a bare JSON object that is an
    intent classification (``bucket``/``items``/``queries``) or a match score (``score``/``reason``)?"""
    s = text.strip()
    if s.startswith("```"):
        s = s.strip("`").removeprefix("json").strip()
    if not (s.startswith("{") and s.endswith("}")):
        return False
    try:
        obj = orjson.loads(s)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(obj, dict):
        return False
    if "score" in obj and set(obj) <= {"score", "reason"}:
        return True
    return parse_intent(s) is not None and set(obj) <= {"bucket", "items", "queries"}


def text_axis(messages: list[dict[str, Any]]) -> Axis:
    """Who issued the searches, judged from the messages alone.

    Evidence for **A** (the LLM searched): an assistant message emits a tool call to a search tool (anything but
    ``recommend_product``, ``terminate``, ``python_execute``, ``calculate_voucher``).
    Evidence for **B** (Python searched): a ``tool`` result that answers no call of the assistant turn before it
    (no such turn, a turn without calls, or an id no call carries); an assistant turn without tool calls whose text
    is only a sub-task answer — a JSON intent (``bucket``/``items``/``queries``) or match score
    (``score``/``reason``); a system or user message carrying the sub-task marker (``### shoparena subtask:``).
    Result: A only ⇒ ``"A"``; B only ⇒ ``"B"``; both ⇒ ``"mixed"``; neither ⇒ ``"none"``.
    """
    agentic = python = False
    open_ids: list[str] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            calls = m.get("tool_calls") or ()
            open_ids = [str(tc.get("id") or "") for tc in calls]
            if any((tc.get("function") or {}).get("name") not in NON_SEARCH_TOOLS for tc in calls):
                agentic = True
            if not calls and isinstance(m.get("content"), str) and _subtask_answer(m["content"]):
                python = True
        elif role == "tool":
            tid = str(m.get("tool_call_id") or "")
            if tid and tid in open_ids:
                open_ids.remove(tid)
            else:
                python = True
        elif role in ("system", "user") and MARKER in str(m.get("content") or ""):
            python = True
    if agentic:
        return "mixed" if python else "A"
    return "B" if python else "none"
