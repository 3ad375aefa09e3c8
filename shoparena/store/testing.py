"""Synthetic trajectory records of a realistic size, for tests, benches and third-party store checks.

:func:`synthetic_record` is deterministic in ``(i, seed)``: the same arguments give the same content (and, once
sealed, the same record id and idempotency key), which is what the crash and idempotency tests rely on.
"""

from __future__ import annotations

import random

from shoparena.store.types import PipelineVersion, TrajectoryRecord

PIPELINE = PipelineVersion(scorer="shoparena-rule/1", scorer_mode="strict", similarity="lexical",
                           catalog_sha256="c" * 64, judge="rubric", judge_prompt_version="rubric/1",
                           package_version="0.1.0")
_WORDS = ("violin", "bow", "bronze", "cymbal", "mesh", "sneaker", "denim", "jeans", "floral", "dress", "maple",
          "drum", "stick", "strings", "acoustic", "light", "gauge", "pack", "breathable", "retro", "waist")
AXES = ("A", "B", "mixed", "none")
STATUSES = ("SUCCESS", "SUCCESS", "SUCCESS", "FAILED", "TIMED_OUT")


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def synthetic_record(i: int, *, seed: int = 0, size: int = 20_000, eval_run_id: str | None = None,
                     pipeline: PipelineVersion = PIPELINE) -> TrajectoryRecord:
    """An unsealed record of about ``size`` bytes of canonical JSON: a ReAct-style steps list (think, tool call,
    observation with product hits), the matching messages and a gateway call log."""
    rng = random.Random(f"{seed}:{i}")
    n_steps = max(1, round(size / 3_200))
    steps, messages, calls = [], [{"role": "user", "content": _text(rng, 30)}], []
    for s in range(n_steps):
        query = _text(rng, 4)
        hits = [{"product_id": str(rng.randrange(10**9)), "title": _text(rng, 10), "price": rng.randrange(50, 5000),
                 "shop_id": str(rng.randrange(10**6))} for _ in range(8)]
        think = _text(rng, 60)
        steps.append({"step": s, "think": think, "tool_call": [{"name": "find_product", "arguments": {"q": query}}],
                      "obs": hits})
        messages.append({"role": "assistant", "content": f"<think>{think}</think>",
                         "tool_calls": [{"type": "function", "function": {"name": "find_product",
                                                                          "arguments": f'{{"q": "{query}"}}'}}]})
        messages.append({"role": "tool", "content": str(hits)[:600]})
        calls.append({"seq": s, "route": "/search/find_product", "args": {"q": query}, "status": 200,
                      "latency_ms": rng.randrange(1, 50), "n_hits": len(hits), "origin": rng.choice(["llm", "py"])})
    success = rng.random() < 0.5
    score = rng.choice((0.1, 0.3, 0.5, 0.7, 0.9))
    return TrajectoryRecord(
        eval_run_id=eval_run_id or f"run-{seed}-{i // 50}", agent_id=f"agent-{i % 3}", agent_version="v1",
        agent_code_sha256="a" * 64, miner_hotkey="5Miner", validator_hotkey="5Validator",
        problem_id=f"p{i:06d}", suite="open", cluster_id=f"c{i % 7}", bucket=rng.choice(["simple", "shop", "voucher"]),
        status=rng.choice(STATUSES), steps=steps, messages=messages, call_log=calls, axis=rng.choice(AXES),
        outcome={"success": success, "gt": success, "rule": {"title": 1.0, "price": 0.5}, "mode": "strict"},
        success=success, judge={"score": score, "gate": 2, "cited_spans": [[0, 10, "violin bow"]],
                                "judge": "rubric", "prompt_version": "rubric/1"},
        judge_score=score, coefficient=0.9, pipeline=pipeline, started_at=1_700_000_000_000 + i,
        finished_at=1_700_000_001_000 + i,
    )
