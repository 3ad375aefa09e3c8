"""Rewrite a batch of rows: :func:`rewrite_all` (synchronous) and :func:`arewrite_all` (many rows in flight on one
event loop, for network backends). Output order follows input order; every row is either rewritten or counted as
a :class:`~shoparena.corpus.types.Rejection` in the stage report — bad input never raises."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from shoparena.corpus.rewrite.trace import STAGE
from shoparena.corpus.types import Rejection, StageReport, Trajectory

__all__ = ["Rewriter", "arewrite_all", "rewrite_all"]


class Rewriter(Protocol):
    """What :func:`rewrite_all` needs of a rewriter (both built-in rewriters qualify)."""

    name: str

    def rewrite(self, t: Trajectory) -> Trajectory | Rejection: ...

    async def arewrite(self, t: Trajectory) -> Trajectory | Rejection: ...


def _safe_rewrite(rewriter: Rewriter, t: Any) -> Trajectory | Rejection:
    if not isinstance(t, Trajectory):
        return Rejection(stage=STAGE, reason="not_a_trajectory", message=f"got {type(t).__name__}", where="?")
    try:
        return rewriter.rewrite(t)
    except Exception as exc:  # malformed row shapes: a counted rejection, never a crash
        return Rejection(stage=STAGE, reason="malformed", message=f"{type(exc).__name__}: {exc}", where=t.traj_id,
                         traj_id=t.traj_id)


def _report(rewriter: Rewriter, results: list[Trajectory | Rejection]) -> tuple[list[Trajectory], StageReport,
                                                                              list[Rejection]]:
    report = StageReport(stage=STAGE)
    kept: list[Trajectory] = []
    rejected: list[Rejection] = []
    llm_steps = steps = 0
    fallbacks: Counter[str] = Counter()
    for r in results:
        report.seen += 1
        if isinstance(r, Rejection):
            report.reject(r.reason, r.where)
            rejected.append(r)
            continue
        report.kept += 1
        kept.append(r)
        figures = r.extras.get("rewrite", {})
        steps += int(figures.get("steps", 0))
        llm_steps += int(figures.get("llm_steps", 0))
        fallbacks.update(figures.get("fallbacks") or {})
    report.notes = {"rewriter": rewriter.name, "steps": steps, "llm_steps": llm_steps,
                    "template_fallbacks": dict(sorted(fallbacks.items())),
                    "rejections": [{"reason": r.reason, "where": r.where, "message": r.message} for r in rejected[:20]]}
    return kept, report, rejected


def rewrite_all(rows: Iterable[Trajectory], rewriter: Rewriter) -> tuple[list[Trajectory], StageReport]:
    """Rewrite every row; the report counts rows seen / kept / rejected by reason, and in ``notes`` the rewriter,
    the steps written, how many the model wrote and the template fallbacks by reason (plus the first rejections)."""
    kept, report, _ = _report(rewriter, [_safe_rewrite(rewriter, t) for t in rows])
    return kept, report


async def arewrite_all(rows: Iterable[Trajectory], rewriter: Rewriter, *, concurrency: int = 8
                       ) -> tuple[list[Trajectory], StageReport]:
    """:func:`rewrite_all` with up to ``concurrency`` rows in flight (``rewriter.arewrite``)."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(t: Any) -> Trajectory | Rejection:
        if not isinstance(t, Trajectory):
            return _safe_rewrite(rewriter, t)
        async with sem:
            try:
                return await rewriter.arewrite(t)
            except Exception as exc:  # as in rewrite_all
                return Rejection(stage=STAGE, reason="malformed", message=f"{type(exc).__name__}: {exc}",
                                 where=t.traj_id, traj_id=t.traj_id)

    results = await asyncio.gather(*(one(t) for t in rows))
    kept, report, _ = _report(rewriter, list(results))
    return kept, report
