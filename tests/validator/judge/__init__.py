"""Builders for hand-made trajectories and their gateway call logs (upstream step format, docs/shoppingbench.md §6.1),
and chat-backend stand-ins whose answers the LLM-judge tests control."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

from shoparena.env.types import AssistantMessage
from shoparena.llm.types import Sampling

QUERY = "I need a full size violin bow under 500 pesos, ideally handmade."

BOW = {"product_id": "3706669986", "shop_id": "3450032", "price": 256.0, "service": ["COD"], "sold_count": 2,
       "title": "Heart String Violin Bows Full Size Handmade Horsetail Hair Violin Bow", "brand": "heart string"}
SET = {"product_id": "1203344556", "shop_id": "3450032", "price": 2499.0, "service": ["COD"], "sold_count": 31,
       "title": "Violin 4/4 Solid Spruce Top Beginner Violin Set with Case and Bow"}
CYMBAL = {"product_id": "591486855", "shop_id": "3450032", "price": 4350.0, "service": [], "sold_count": 5,
          "title": "Arborea Hybrid ghost crash cymbals cymbal B20 cast bronze"}
SEARCH_RESULT = [BOW, SET, CYMBAL]

#: The reasoning of the last step, one per rubric outcome (the first steps are the same for all).
THINKS = {
    0.3: "Let me recommend the first result.",
    0.5: "The search returned 3 results; the handmade bow matches the request.",
    0.7: "3706669986 costs ₱256 and matches the full size requirement.",
    0.9: "3706669986 (₱256) is cheaper than 1203344556 (₱2,499), which is over the budget.",
}


def step(think: str, calls: list[tuple[str, dict[str, Any], Any]] = (), response: str = "",
         index: int = 0) -> dict[str, Any]:
    """One upstream step: think, tool calls with their observations, response."""
    message: dict[str, Any] = {}
    if think:
        message["think"] = think
    if calls:
        message["tool_call"] = [{"name": n, "parameters": p, "tool_call_id": f"c{index}-{i}"}
                                for i, (n, p, _) in enumerate(calls)]
        message["obs"] = [{"tool_call_id": f"c{index}-{i}", "results": r} for i, (_, _, r) in enumerate(calls)]
    if response:
        message["response"] = response
    content = (f"<think>{think}</think>\n" if think else "") + "<tool_call>" + json.dumps(
        [{"name": n, "parameters": p} for n, p, _ in calls]) + "</tool_call>"
    return {"completion": {"reasoning_content": "", "content": content, "message": message},
            "extra_info": {"step": index + 1, "query": QUERY, "timestamp": 1767225600000 + index}}


def trajectory(final_think: str, first_think: str = "Searching the catalog for a full size violin bow.") -> list:
    """Search, then the final reasoning with a recommendation, then terminate."""
    return [
        step(first_think, [("find_product", {"q": "violin bow full size", "page": 1}, SEARCH_RESULT)], index=0),
        step(final_think, [("recommend_product", {"product_ids": "3706669986"},
                            "Having recommended the products to the user: 3706669986.")], index=1),
        step("Done.", [("terminate", {"status": "success"}, "The interaction has been completed.")], index=2),
    ]


def inference(seq: int, tokens: int | None, content: str | None = "", reasoning: str | None = None,
              status: int = 200) -> dict[str, Any]:
    return {"run_id": "r", "seq": seq, "kind": "inference", "method": "POST", "path": "/inference/chat/completions",
            "params": {"temperature": 0.0, "model": "policy:expert", "messages_sha256": "0" * 64},
            "model": "policy:expert", "problem_id": "p", "started_at": 0, "duration_ms": 900.0, "status": status,
            "error": None, "usage": None if tokens is None else {"prompt_tokens": 400, "completion_tokens": tokens,
                                                                  "total_tokens": 400 + tokens},
            "result_product_ids": None, "tool_calls": [], "content": content, "reasoning_content": reasoning,
            "axis": None, "via": None, "attributed_to": None}


def search(seq: int, tool: str, params: dict[str, Any], ids: list[str] | None) -> dict[str, Any]:
    return {"run_id": "r", "seq": seq, "kind": "search", "method": "GET", "path": f"/search/{tool}",
            "params": {k: str(v) for k, v in params.items()}, "model": None, "problem_id": "p", "started_at": 0,
            "duration_ms": 3.0, "status": 200, "error": None, "usage": None, "result_product_ids": ids,
            "tool_calls": None, "content": None, "reasoning_content": None, "axis": "A", "via": None,
            "attributed_to": seq - 1}


def call_log(steps: list[dict[str, Any]], tokens: int = 120, *, with_inference: bool = True,
             record_text: bool = True) -> list[dict[str, Any]]:
    """The log an honest LLM agent leaves for ``steps``: per step one inference call whose completion is the
    step's content, then its search calls (ids returned as in the observations)."""
    log: list[dict[str, Any]] = []
    for s in steps:
        if with_inference:
            content = s["completion"]["content"] if record_text else None
            log.append(inference(len(log), tokens, content, None if not record_text else ""))
        msg = s["completion"]["message"]
        for call, obs in zip(msg.get("tool_call", []), msg.get("obs", []), strict=True):
            res = obs["results"]
            ids = [r["product_id"] for r in res] if isinstance(res, list) else None
            if call["name"] in ("find_product", "view_product_information"):
                log.append(search(len(log), call["name"], call["parameters"], ids))
    return log


# -- LLM-judge stand-ins ------------------------------------------------------------------------------------------

Answer = str | BaseException | Callable[[list[dict[str, Any]]], str]


class StandIn:
    """A chat backend that plays back answers (text, an exception to raise, or a function of the messages)."""

    def __init__(self, name: str, *answers: Answer, delay: float = 0.0) -> None:
        self.name, self.answers, self.delay = name, list(answers), delay
        self.requests: list[tuple[list[dict[str, Any]], Sampling | None]] = []

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        self.requests.append((messages, sampling))
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return AssistantMessage(content=answer(messages) if callable(answer) else answer)


def block(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(text outside the DATA block, text inside it), found by the nonce-carrying markers."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    m = re.search(r"^<<<TRACE ([0-9a-f]{16})>>>\n(.*)\n<<<END TRACE \1>>>$", user, re.S | re.M)
    assert m, "no DATA block"
    outside = messages[0]["content"] + user[:m.start()] + user[m.end():]
    return outside, m.group(2)


def verdict_json(score: float, *quotes: str, gate: int | None = None) -> str:
    return json.dumps({"reasoning_quality": score, "gate": gate, "explanation": f"score {score}",
                       "evidence": [{"gate": 1, "quote": q} for q in quotes]})


def quoting(score: float) -> Callable[[list[dict[str, Any]]], str]:
    """An answer that cites the call-log summary line of the trace it was given."""
    def answer(messages: list[dict[str, Any]]) -> str:
        _, trace = block(messages)
        line = next(x for x in trace.splitlines() if x.startswith("Summary: "))
        return verdict_json(score, line[len("Summary: "):])
    return answer
