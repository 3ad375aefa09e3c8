"""Server-side line plots: series of ``(time, value)`` points scaled into an SVG viewport. The templates draw the
returned geometry as inline SVG (numbers and escaped labels only; no script, nothing from a CDN)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["line_plot"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def line_plot(series: dict[str, list[tuple[float, float]]], *, width: int = 640, height: int = 220,
              y_range: tuple[float, float] | None = (0.0, 1.0), max_series: int = 10) -> dict[str, Any] | None:
    """Geometry of a line plot of ``series`` (x: unix seconds); None when there is nothing to draw."""
    items = [(name, pts) for name, pts in series.items() if pts][:max_series]
    if not items:
        return None
    pad_l, pad_r, pad_t, pad_b = 48, 12, 10, 28
    xs = [x for _, pts in items for x, _ in pts]
    ys = [y for _, pts in items for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range if y_range is not None else (min(ys), max(ys))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1

    def sx(x: float) -> float:
        return round(pad_l + (x - x0) / (x1 - x0) * (width - pad_l - pad_r), 1)

    def sy(y: float) -> float:
        return round(height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b), 1)

    lines = []
    for k, (name, pts) in enumerate(items):
        pts = sorted(pts)
        lines.append({"name": name, "color": PALETTE[k % len(PALETTE)],
                      "points": " ".join(f"{sx(x)},{sy(y)}" for x, y in pts),
                      "dots": [{"x": sx(x), "y": sy(y), "label": f"{name}: {y:.4g}"} for x, y in pts]})
    return {"width": width, "height": height, "lines": lines,
            "x_ticks": [{"x": sx(t), "label": time.strftime("%m-%d %H:%M", time.gmtime(t))} for t in _ticks(x0, x1)],
            "y_ticks": [{"y": sy(t), "label": f"{t:.2f}"} for t in _ticks(y0, y1)],
            "left": pad_l, "bottom": height - pad_b, "right": width - pad_r, "top": pad_t}
