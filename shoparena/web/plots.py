"""The web pages' charts: drawn by :mod:`shoparena.evaluate.report.plots`, the one SVG drawing the evaluation
report uses too, and handed to the templates as markup (every label in it is escaped there; numbers and escaped
text only, no script, nothing from a CDN)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from shoparena.evaluate.report.plots import Series, line_chart, time_ticks
from shoparena.evaluate.report.sections import funnel_chart

__all__ = ["funnel_plot", "line_plot"]


def line_plot(series: dict[str, list[tuple[float, float]]], *, width: int = 640, height: int = 220,
              y_range: tuple[float, float] | None = (0.0, 1.0), max_series: int = 10) -> Markup | None:
    """A line chart of ``series`` over time (x: unix seconds) as inline SVG; ``None`` when there is nothing to
    draw. Values outside ``y_range`` widen it to the data."""
    items = [(name, sorted(pts)) for name, pts in series.items() if pts][:max_series]
    if not items:
        return None
    xs = [x for _, pts in items for x, _ in pts]
    ys = [y for _, pts in items for _, y in pts]
    if y_range is not None and (min(ys) < y_range[0] or max(ys) > y_range[1]):
        y_range = None
    x0, x1 = min(xs), max(xs)
    svg = line_chart([Series(name=name, points=pts) for name, pts in items], title="", y_range=y_range,
                     x_ticks=time_ticks(x0, x1) if x1 > x0 else time_ticks(x0 - 1, x0 + 1), width=width,
                     height=height)
    return None if svg is None else Markup(svg)  # built by plots.py: every label escaped


def funnel_plot(funnel: list[dict[str, Any]]) -> Markup | None:
    """The corpus funnel (the rows of :func:`shoparena.web.corpus.corpus_page`) as the report draws it; stages
    whose counts are not numbers are left out."""
    rows = [{"stage": str(s.get("stage")), "kept": s["kept"],
             "rejected": {str(k): v for k, v in (s.get("rejected") or {}).items()
                          if isinstance(v, int | float) and not isinstance(v, bool)}}
            for s in funnel if isinstance(s.get("kept"), int | float) and not isinstance(s.get("kept"), bool)]
    svg = funnel_chart(rows) if rows else None
    return None if svg is None else Markup(svg)
