"""Step-record builders and tiny protocol implementations shared by the scoring tests."""

from __future__ import annotations

import json
from typing import Any

from shoparena.catalog.types import Product
from shoparena.tasks.types import Problem, RewardItem, Voucher


class DictLookup:
    """The simplest :class:`ProductLookup`: a mapping from id to product."""

    def __init__(self, products: list[Product]) -> None:
        self.products = {p.product_id: p for p in products}
        self.calls: list[str] = []

    def get(self, product_id: str) -> Product | None:
        self.calls.append(product_id)
        return self.products.get(product_id)


class FixedSimilarity:
    """A similarity whose value per (candidate, gt) pair the test chooses (default ``value``)."""

    def __init__(self, value: float = 0.0, table: dict[tuple[str, str], float] | None = None) -> None:
        self.name = f"fixed:{value}"
        self.value = value
        self.table = table or {}
        self.calls: list[tuple[str, str]] = []

    def similarity(self, candidate: str, gt: str, *, problem: Problem | None = None) -> float:
        self.calls.append((candidate, gt))
        return self.table.get((candidate, gt), self.value)


def step(
    calls: list[dict[str, Any]] | None = None,
    *,
    content: str | None = None,
    think: str = "thinking",
    response: str = "",
    timestamp: Any = 1767225600000,
    query: str | None = None,
    problem_id: str | None = None,
) -> dict[str, Any]:
    """One step record (§6.1). ``content`` defaults to a well-formed rendering of the parts."""
    calls = [c if "tool_call_id" in c else {**c, "tool_call_id": f"call{k}"} for k, c in enumerate(calls or [])]
    if content is None:
        parts = [f"<think>{think}</think>"] if think else []
        if calls:
            parts.append("<tool_call>" + json.dumps([{"name": c["name"], "parameters": c["parameters"]}
                                                      for c in calls]) + "</tool_call>")
        if response:
            parts.append(f"<response>{response}</response>")
        content = "\n".join(parts)
    extra: dict[str, Any] = {"step": 0}
    if timestamp is not None:
        extra["timestamp"] = timestamp
    extra["query"] = query if query is not None else ""
    if problem_id is not None:
        extra["problem_id"] = problem_id
    return {"completion": {"content": content,
                           "message": {"think": think, "tool_call": calls, "response": response}},
            "extra_info": extra}


def recommend(ids: Any, **kw: Any) -> dict[str, Any]:
    return step([{"name": "recommend_product", "parameters": {"product_ids": ids}}], **kw)


def terminate(**kw: Any) -> dict[str, Any]:
    return step([{"name": "terminate", "parameters": {"status": "success"}}], **kw)


def upstream_problem(row: dict[str, Any], bucket: str, problem_id: str) -> Problem:
    """A :class:`Problem` from one upstream JSONL row (what ``tasks.loader`` does, kept local to the tests)."""
    if bucket == "knowledge":
        return Problem(problem_id=problem_id, bucket="knowledge", query=row["query"],
                       knowledge_attribute=str(row["Knowledge_Attribute"]),
                       knowledge_product=Product.model_validate(row["reward"]))
    reward = row["reward"] if isinstance(row["reward"], list) else [row["reward"]]
    return Problem(
        problem_id=problem_id, bucket=bucket, query=row["query"],  # type: ignore[arg-type]
        reward=[RewardItem.model_validate(r) for r in reward],
        voucher=Voucher.model_validate(row["voucher"]) if row.get("voucher") else None,
        reward_title_embeddings=row.get("reward_title_embeddings"),
        difficulty=row.get("difficulty"), title=row.get("title"),
    )
