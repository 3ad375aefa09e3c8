"""The trajectory viewer's data: one stored record turned into what a person reads to see why it scored what it
scored — the conversation step by step (reasoning, tool calls with arguments, observations as product tables,
the response), the rule scorer's verdict item by item and axis by axis (title / price / service / SKU &
attributes) with the shop and budget rules, the judge's verdict with its cited spans located in place, and the
gateway call log (axis A: the model emitted the search, B: Python issued it; timings; token counts).

Cited spans index into the judge's rendered trace (:func:`shoparena.validator.judge.render.render_trace`), which
is re-rendered here from the record. Every displayed piece of agent text is a *section* of that trace, split into
segments at span boundaries; each segment carries the ids of the spans covering it. Pages escape each segment and
wrap highlighted ones in ``<mark>``: no markup from the record ever reaches a page unescaped. A span whose quoted
text is not what the re-rendered trace holds at its offsets is flagged ``verbatim: false`` (records judged with a
renderer before version 2, which kept JSON key order, re-render differently once the store has sorted their keys).
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from shoparena.env.records import step_results
from shoparena.validator.judge.render import RenderedTrace, Section, render_trace

__all__ = ["AXES", "record_view", "segments"]

AXES = ("title", "price", "service", "sku & attrs")
MAX_TABLE_ROWS = 50
MAX_CELL = 400
_PRODUCT_COLUMNS = ("product_id", "title", "price", "shop_id", "service", "sold_count", "attributes", "sku_options",
                    "short_description", "description")


def segments(text: str, start: int, end: int, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``text[start:end]`` cut at every span edge inside it: ``[{"text", "spans": [span ids covering it]}]``."""
    edges = {start, end}
    for s in spans:
        for x in (s["start"], s["end"]):
            if start < x < end:
                edges.add(x)
    cuts = sorted(edges)
    out = []
    for a, b in pairwise(cuts):
        cover = [s["id"] for s in spans if s["start"] <= a and b <= s["end"]]
        out.append({"text": text[a:b], "spans": cover, "anchor": None})
    return out


def _anchor(sections: list[dict[str, Any] | None], spans: list[dict[str, Any]]) -> None:
    """Give the first displayed segment of each span the page anchor ``cite-<id>`` (sections in page order)."""
    for s in spans:
        s["anchor"] = None
    for sec in sections:
        for seg in (sec or {}).get("segments", []):
            for k in seg["spans"]:
                if spans[k]["anchor"] is None:
                    spans[k]["anchor"] = seg["anchor"] = f"cite-{k}"


def _query(record: dict[str, Any]) -> str:
    steps = record.get("steps") or []
    if steps and isinstance(steps[0], dict) and isinstance(steps[0].get("extra_info"), dict):
        q = steps[0]["extra_info"].get("query")
        if q:
            return str(q)
    for m in record.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


def _cell(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_CELL else text[:MAX_CELL] + "…"


def observation(value: Any) -> dict[str, Any]:
    """A tool result as a product table (rows of products) or as text."""
    rows = value.get("results") if isinstance(value, dict) and isinstance(value.get("results"), list) else value
    if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
        keys = {k for r in rows for k in r}
        cols = [c for c in _PRODUCT_COLUMNS if c in keys] + sorted(keys - set(_PRODUCT_COLUMNS))
        shown = rows[:MAX_TABLE_ROWS]
        return {"kind": "table", "columns": cols, "rows": [[_cell(r.get(c, "")) for c in cols] for r in shown],
                "total": len(rows)}
    return {"kind": "text", "text": _cell(value) if value is not None else ""}


def _sec(trace: RenderedTrace, spans: list[dict[str, Any]], s: Section | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"segments": segments(trace.text, s.start, s.end, spans), "truncated": s.truncated,
            "provenance": s.provenance}


def _steps(record: dict[str, Any], trace: RenderedTrace, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[tuple[str, int | None, int | None], Section] = {}
    for s in trace.sections:
        by.setdefault((s.kind, s.step, s.index), s)
    out = []
    for i, step in enumerate(record.get("steps") or []):
        if not isinstance(step, dict):
            continue
        comp = step.get("completion") if isinstance(step.get("completion"), dict) else {}
        msg = comp.get("message") if isinstance(comp.get("message"), dict) else {}
        calls = [c for c in msg.get("tool_call") or [] if isinstance(c, dict)]
        try:
            results = step_results(msg)
        except (TypeError, AttributeError, KeyError):
            results = [(False, None)] * len(calls)
        tools = []
        for j, (call, (has, value)) in enumerate(zip(calls, results, strict=False)):
            tools.append({"name": str(call.get("name") or "?"), "arguments": call.get("parameters", {}),
                          "tool_call_id": call.get("tool_call_id"),
                          "rendered": _sec(trace, spans, by.get(("tool", i, j))),
                          "result_rendered": _sec(trace, spans, by.get(("result", i, j))),
                          "observation": observation(value) if has else None})
        think = str(msg.get("think") or comp.get("reasoning_content") or "")
        out.append({"index": i + 1, "think": _sec(trace, spans, by.get(("think", i, None))), "think_full": think,
                    "tool_calls": tools, "response": _sec(trace, spans, by.get(("response", i, None))),
                    "response_full": str(msg.get("response") or "")})
    return out


def _check(outcome: dict[str, Any]) -> dict[str, Any]:
    items = []
    for it in outcome.get("items") or []:
        axes = {a: (it.get("axes") or {}).get(a) for a in AXES}
        items.append({"position": it.get("position"), "gt_product_id": it.get("gt_product_id"),
                      "product_id": it.get("product_id"), "resolved": it.get("resolved"), "hit": it.get("hit"),
                      "exact_id": it.get("short_circuit"), "rule": it.get("rule"), "gt": it.get("gt"),
                      "price": it.get("price"), "shop_id": it.get("shop_id"),
                      "title_similarity": it.get("title_similarity"), "axes": axes})
    rules = {k: outcome.get(k) for k in ("product", "shop", "budget", "bundle_total", "bundle_discounted", "kw",
                                         "format", "length")}
    return {"success": outcome.get("success"), "gt": outcome.get("gt"), "rule": outcome.get("rule"),
            "mode": outcome.get("mode"), "bucket": outcome.get("bucket"), "similarity": outcome.get("similarity"),
            "recommended_ids": outcome.get("recommended_ids") or [], "fields": outcome.get("fields") or {},
            "axis_hits": outcome.get("axis_hits") or {}, "axis_totals": outcome.get("axis_totals") or {},
            "rules": rules, "items": items, "error": outcome.get("error"), "axes": list(AXES)}


def _gateway(calls: list[dict[str, Any]], trace: RenderedTrace, spans: list[dict[str, Any]]) -> dict[str, Any]:
    lines = {s.index: s for s in trace.sections if s.kind == "call"}
    rows = []
    totals = {"calls": 0, "inference": 0, "search": 0, "axis_A": 0, "axis_B": 0, "prompt_tokens": 0,
              "completion_tokens": 0, "duration_ms": 0.0, "failed": 0}
    for c in calls:
        if not isinstance(c, dict):
            continue
        usage = c.get("usage") if isinstance(c.get("usage"), dict) else {}
        kind = str(c.get("kind") or "")
        totals["calls"] += 1
        if kind in ("inference", "search"):
            totals[kind] += 1
        if kind == "search" and c.get("axis") in ("A", "B"):
            totals[f"axis_{c['axis']}"] += 1
        totals["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
        totals["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        totals["duration_ms"] += float(c.get("duration_ms") or 0.0)
        status = c.get("status")
        totals["failed"] += int(isinstance(status, int) and status >= 400)
        returned = c.get("result_product_ids")
        params = {k: v for k, v in (c.get("params") or {}).items() if k not in ("messages_sha256", "tools_sha256")}
        rows.append({"seq": c.get("seq"), "kind": kind, "path": c.get("path"), "model": c.get("model"),
                     "axis": c.get("axis"), "status": status, "duration_ms": round(float(c.get("duration_ms") or 0), 2),
                     "started_at": c.get("started_at"), "prompt_tokens": usage.get("prompt_tokens"),
                     "completion_tokens": usage.get("completion_tokens"), "params": params,
                     "returned": None if returned is None else len(returned), "error": c.get("error"),
                     "rendered": _sec(trace, spans, lines.get(c.get("seq")))})
    totals["duration_ms"] = round(totals["duration_ms"], 2)
    return {"calls": rows, "totals": totals,
            "summary": _sec(trace, spans, next(iter(trace.of("summary")), None)),
            "warnings": [_sec(trace, spans, s) for s in trace.of("warning")]}


def _located(trace: RenderedTrace, span: dict[str, Any]) -> str | None:
    for s in trace.sections:
        if s.start <= span["start"] and span["end"] <= s.end:
            return s.kind if s.step is None else f"{s.kind} (step {s.step + 1})"
    return None


def record_view(record: dict[str, Any], seq: int) -> dict[str, Any]:
    """Everything the trajectory page shows, as plain data (the JSON API returns exactly this)."""
    query = _query(record)
    trace = render_trace(query, record.get("steps") or [], record.get("call_log") or [])
    verdict = record.get("judge") if isinstance(record.get("judge"), dict) else None
    spans: list[dict[str, Any]] = []
    for k, s in enumerate((verdict or {}).get("spans") or []):
        start, end = int(s.get("start", 0)), int(s.get("end", 0))
        if not 0 <= start < end <= len(trace.text):
            start = end = 0
        spans.append({"id": k, "start": start, "end": end, "gate": s.get("gate"), "text": str(s.get("text") or ""),
                      "verbatim": end > start and trace.text[start:end] == s.get("text")})
    for s in spans:
        s["where"] = _located(trace, s) if s["end"] > s["start"] else None
    judge = None if verdict is None else {
        "ok": verdict.get("ok"), "score": verdict.get("score"), "gate": verdict.get("gate"),
        "explanation": verdict.get("explanation") or "", "judge": verdict.get("judge"),
        "prompt_version": verdict.get("prompt_version"), "agreement": verdict.get("agreement"),
        "error": verdict.get("error"), "trace_matches": trace.sha256 == verdict.get("trace_sha256"), "spans": spans}
    meta_keys = ("record_id", "eval_run_id", "agent_id", "agent_version", "agent_code_sha256", "miner_hotkey",
                 "validator_hotkey", "problem_id", "suite", "cluster_id", "bucket", "status", "axis", "success",
                 "judge_score", "coefficient", "pipeline_version", "pipeline", "started_at", "finished_at",
                 "created_at")
    meta = {k: record.get(k) for k in meta_keys}
    meta["seq"] = seq
    st, fin = record.get("started_at"), record.get("finished_at")
    meta["duration_ms"] = fin - st if isinstance(st, int) and isinstance(fin, int) else None
    steps = _steps(record, trace, spans)
    gateway = _gateway([c for c in record.get("call_log") or [] if isinstance(c, dict)], trace, spans)
    shown: list[dict[str, Any] | None] = []
    for st in steps:
        shown.append(st["think"])
        for tc in st["tool_calls"]:
            shown += [tc["rendered"], tc["result_rendered"]]
        shown.append(st["response"])
    shown += [gateway["summary"], *gateway["warnings"], *(c["rendered"] for c in gateway["calls"])]
    _anchor(shown, spans)
    return {"record": meta, "query": query, "steps": steps, "check": _check(record.get("outcome") or {}),
            "judge": judge, "gateway": gateway, "judge_view": segments(trace.text, 0, len(trace.text), spans)}
