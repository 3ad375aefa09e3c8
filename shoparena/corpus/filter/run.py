"""The filter pipeline: :func:`run_filters` chains the stages and returns a :class:`FilterResult`.

Order — judge → format → axis → dedup/rank → outcome:

1. **judge** first: one float per row, the cheapest gate, and it removes most of the firehose;
2. **format** next: per-row structure, independent of every other row; the axis-B rows the split sends to the
   rewriter have therefore passed it already (the rewriter's output goes through the same gate again);
3. **axis** before ranking, so axis-B (and mixed) rows never take one of a problem's ``per_problem`` slots;
4. **dedup/rank**, the only stage that needs all rows of a problem (it collects; every stage before it streams);
5. **outcome** last: the ranking is purely structural (as in the paper), so the same structural selection feeds
   both the SFT set (``require_success``) and the preference set (failed rows collected with ``allow_failed``).
   The price: with ``require_success`` a problem whose best-structured rows failed yields no SFT row even if a
   lower-ranked row succeeded — pre-filter the input on ``success`` when that is what you want.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shoparena.corpus.filter.config import FilterConfig
from shoparena.corpus.filter.gates import AxisSplit, FormatGate, JudgeGate, OutcomeGate
from shoparena.corpus.filter.rank import DedupRank
from shoparena.corpus.types import Rejection, StageReport, Trajectory

__all__ = ["FilterResult", "build_stages", "run_filters"]


@dataclass(slots=True)
class FilterResult:
    kept: list[Trajectory] = field(default_factory=list)
    """Rows that passed every stage: problems in sorted order, each problem's rows in pick order."""
    axis_b: list[Trajectory] = field(default_factory=list)
    """Axis-B rows that passed the judge and format gates, for the rewriter (input order)."""
    failed: list[Trajectory] = field(default_factory=list)
    """With ``require_success`` and ``allow_failed``: structurally kept rows that failed (preference data)."""
    reports: list[StageReport] = field(default_factory=list)
    """One per stage, in pipeline order; every stage's ``seen == kept + sum(rejected)``, and each stage sees what
    the previous one kept."""
    rejections: list[Rejection] = field(default_factory=list)
    """Every dropped (or routed) row with its stage and reason; :class:`Rejection` items in the input (from
    normalisation) are passed through here first-come."""

    def summary(self) -> dict[str, Any]:
        return {"kept": len(self.kept), "axis_b": len(self.axis_b), "failed": len(self.failed),
                "stages": [r.to_dict() | {"notes": _plain_notes(r.notes)} for r in self.reports]}


def _plain_notes(notes: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in notes.items():
        if k == "scores":
            continue
        if isinstance(v, dict):
            v = {kk: dict(vv) if isinstance(vv, dict) else vv for kk, vv in v.items()}
        out[k] = v
    return out


def build_stages(config: FilterConfig, sink: list[Rejection], *, known_ids: Callable[[str], bool] | None = None
                 ) -> tuple[JudgeGate, FormatGate, AxisSplit, DedupRank, OutcomeGate]:
    """The five stages, in pipeline order, sharing one rejection sink."""
    return (JudgeGate(config, sink), FormatGate(config, sink, known_ids=known_ids), AxisSplit(config, sink),
            DedupRank(config, sink), OutcomeGate(config, sink))


def _rows_only(rows: Iterable[Trajectory | Rejection], sink: list[Rejection]) -> Iterator[Trajectory]:
    for r in rows:
        if isinstance(r, Trajectory):
            yield r
        elif isinstance(r, Rejection):
            sink.append(r)
        else:
            sink.append(Rejection(stage="filter", reason="not_a_trajectory",
                                  message=f"input item is a {type(r).__name__}, not a Trajectory", where="?"))


def run_filters(rows: Iterable[Trajectory | Rejection], config: FilterConfig | None = None, *,
                known_ids: Callable[[str], bool] | None = None) -> FilterResult:
    """Run judge → format → axis → dedup/rank → outcome over ``rows`` (streamed up to dedup/rank).

    ``known_ids`` answers whether a product id exists in the catalog (e.g. ``lambda p: index.doc_of(p) >= 0`` on a
    :class:`~shoparena.catalog.index.SearchIndex`); without it recommended ids are only checked for shape.
    """
    config = config or FilterConfig()
    result = FilterResult()
    stages = build_stages(config, result.rejections, known_ids=known_ids)
    stream: Iterable[Trajectory] = _rows_only(rows, result.rejections)
    for stage in stages:
        stream = stage.run(stream)
    result.kept = list(stream)
    result.axis_b = stages[2].axis_b
    result.failed = stages[4].failed
    result.reports = [s.report for s in stages]
    return result
