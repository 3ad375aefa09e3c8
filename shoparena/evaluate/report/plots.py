"""The one way the project draws a chart: dependency-free SVG, shared by the evaluation report and the web pages.

Three charts cover what both show: :func:`line_chart` (series of points, optional interval bands, dashed series,
separators: pass@k curves, training losses, the web's score / weight / emission histories), :func:`bar_chart`
(grouped bars with interval whiskers: ASR per bucket) and :func:`stacked_bars` (horizontal stacks: the corpus
funnel, kept and rejected by reason). Each returns SVG markup as text: inline in ``report.html`` and the web pages
(``standalone=False``, nothing but SVG elements), or a file beside ``report.md`` (``standalone=True`` adds the XML
namespace a separate file needs).

Every label is escaped (the inputs are untrusted), coordinates are rounded to 0.1 px and nothing depends on the
clock or the platform's fonts, so the same data give byte-identical SVG. No script, no external reference.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["PALETTE", "Bars", "Series", "bar_chart", "line_chart", "stacked_bars", "time_ticks"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
_FONT = 'font-family="system-ui, sans-serif"'
_LEGEND_ROW = 16
_CHAR_W = 6.2  # an estimate of the average glyph width at font-size 11, for layout only


@dataclass(frozen=True)
class Series:
    """One line: ``points`` ``(x, y)``; ``band`` ``(x, low, high)`` shaded under it; ``dashed`` for a second
    measure of the same thing (pass^k beside pass@k); ``color`` defaults to the palette by position."""

    name: str
    points: Sequence[tuple[float, float]]
    band: Sequence[tuple[float, float, float]] = ()
    dashed: bool = False
    color: str | None = None


@dataclass(frozen=True)
class Bars:
    """One series of a grouped bar chart: a value (``None``: no bar) and an optional interval per category."""

    name: str
    values: Sequence[float | None]
    intervals: Sequence[tuple[float, float] | None] = field(default_factory=tuple)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(x: float) -> str:
    r = round(x, 1)
    return str(int(r)) if r == int(r) else str(r)


def _open(width: float, height: float, title: str, standalone: bool) -> list[str]:
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    out = [f'<svg{ns} viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" height="{_n(height)}" '
           f'role="img" aria-label="{_e(title)}" {_FONT} font-size="11">']
    if title:  # the web pages caption their charts themselves
        out.append(f'<text x="{_n(width / 2)}" y="14" text-anchor="middle" font-size="13" fill="#1b1f24">'
                   f'{_e(title)}</text>')
    return out


def _legend(entries: Sequence[tuple[str, str, bool]], left: float, top: float) -> list[str]:
    out = []
    for i, (name, color, dashed) in enumerate(entries):
        y = top + i * _LEGEND_ROW
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        out.append(f'<line x1="{_n(left)}" y1="{_n(y - 4)}" x2="{_n(left + 18)}" y2="{_n(y - 4)}" '
                   f'stroke="{color}" stroke-width="3"{dash}/>'
                   f'<text x="{_n(left + 24)}" y="{_n(y)}" fill="#1b1f24">{_e(name)}</text>')
    return out


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    return [lo] if hi <= lo else [lo + (hi - lo) * i / n for i in range(n + 1)]


def _step(span: float, n: int = 5, *, integer: bool = False) -> float:
    """A 1-2-2.5-5 step that cuts ``span`` into about ``n`` parts (≥ 1 on an integer axis)."""
    raw = span / n if span > 0 else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return max(1.0, round(step)) if integer else step


def _nice_ticks(lo: float, hi: float, *, integer: bool = False) -> list[float]:
    """Ticks at multiples of :func:`_step` inside ``[lo, hi]``."""
    step = _step(hi - lo, integer=integer)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _tick_label(t: float, span: float) -> str:
    return f"{t:.2f}" if span <= 5 else f"{t:.4g}"


def time_ticks(x0: float, x1: float, n: int = 4) -> list[tuple[float, str]]:
    """Ticks of a time axis in unix seconds, labelled ``MM-DD HH:MM`` (UTC)."""
    return [(t, time.strftime("%m-%d %H:%M", time.gmtime(t))) for t in _ticks(x0, x1, n)]


def line_chart(series: Sequence[Series], *, title: str, x_label: str = "", y_label: str = "",
               y_range: tuple[float, float] | None = (0.0, 1.0), x_ticks: Sequence[tuple[float, str]] | None = None,
               separators: Sequence[float] = (), width: int = 640, height: int = 240, max_series: int = 10,
               standalone: bool = False) -> str | None:
    """A line chart of ``series`` (at most ``max_series``); ``None`` when no series has a point. ``y_range``
    ``None`` fits the data; ``x_ticks`` ``(x, label)`` replace the five numeric ticks; ``separators`` are x
    positions of thin vertical rules (where one training stage ends)."""
    items = [s for s in series if s.points][:max_series]
    if not items:
        return None
    pad_l, pad_r, pad_t, pad_b = 52, 14, 30, 34 + (12 if x_label else 0)
    legend_h = _LEGEND_ROW * len(items) + 4
    total_h = height + legend_h
    xs = [x for s in items for x, _ in s.points]
    ys = [y for s in items for _, y in s.points] + [v for s in items for _, lo, hi in s.band for v in (lo, hi)]
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range if y_range is not None else (min(ys), max(ys))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    if x_ticks:
        pad_r = max(pad_r, int(_CHAR_W * len(str(x_ticks[-1][1])) / 2) + 4)
    y_ticks = _ticks(y0, y1)
    if y_range is None:  # fitted: widened to whole steps, a tick at each
        step = _step(y1 - y0)
        y0, y1 = math.floor(y0 / step) * step, math.ceil(y1 / step) * step
        y_ticks = [round(y0 + i * step, 10) for i in range(round((y1 - y0) / step) + 1)]
    right, bottom = width - pad_r, height - pad_b

    def sx(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * (right - pad_l)

    def sy(y: float) -> float:
        return bottom - (min(max(y, y0), y1) - y0) / (y1 - y0) * (bottom - pad_t)

    out = _open(width, total_h, title, standalone)
    for t in y_ticks:
        out.append(f'<line x1="{_n(pad_l)}" y1="{_n(sy(t))}" x2="{_n(right)}" y2="{_n(sy(t))}" stroke="#eee"/>'
                   f'<text x="{_n(pad_l - 6)}" y="{_n(sy(t) + 4)}" text-anchor="end" fill="#555">'
                   f'{_e(_tick_label(t, y1 - y0))}</text>')
    integer = all(float(x).is_integer() for x in xs)
    ticks = x_ticks if x_ticks is not None else [(t, f"{t:g}") for t in _nice_ticks(x0, x1, integer=integer)]
    for t, label in ticks:
        out.append(f'<text x="{_n(sx(t))}" y="{_n(bottom + 16)}" text-anchor="middle" fill="#555">{_e(label)}</text>')
    out.append(f'<line x1="{_n(pad_l)}" y1="{_n(bottom)}" x2="{_n(right)}" y2="{_n(bottom)}" stroke="#999"/>'
               f'<line x1="{_n(pad_l)}" y1="{_n(pad_t)}" x2="{_n(pad_l)}" y2="{_n(bottom)}" stroke="#999"/>')
    for x in separators:
        out.append(f'<line x1="{_n(sx(x))}" y1="{_n(pad_t)}" x2="{_n(sx(x))}" y2="{_n(bottom)}" stroke="#bbb" '
                   'stroke-width="0.8"/>')
    if x_label:
        out.append(f'<text x="{_n((pad_l + right) / 2)}" y="{_n(bottom + 30)}" text-anchor="middle" fill="#555">'
                   f'{_e(x_label)}</text>')
    if y_label:
        out.append(f'<text transform="translate(12 {_n((pad_t + bottom) / 2)}) rotate(-90)" text-anchor="middle" '
                   f'fill="#555">{_e(y_label)}</text>')
    legend = []
    for k, s in enumerate(items):
        color = s.color or PALETTE[k % len(PALETTE)]
        legend.append((s.name, color, s.dashed))
        if s.band:
            band = sorted(s.band)
            edge = [f"{_n(sx(x))},{_n(sy(hi))}" for x, _, hi in band] + \
                   [f"{_n(sx(x))},{_n(sy(lo))}" for x, lo, _ in reversed(band)]
            out.append(f'<polygon points="{" ".join(edge)}" fill="{color}" fill-opacity="0.15" stroke="none"/>')
        pts = sorted(s.points)
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="'
                   + " ".join(f"{_n(sx(x))},{_n(sy(y))}" for x, y in pts) + '"/>')
        if len(pts) <= 60:
            out.extend(f'<circle cx="{_n(sx(x))}" cy="{_n(sy(y))}" r="{2 if s.dashed else 3}" fill="{color}">'
                       f'<title>{_e(f"{s.name}: {y:.4g}")}</title></circle>' for x, y in pts)
    out.extend(_legend(legend, pad_l, height + _LEGEND_ROW - 2))
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(categories: Sequence[str], series: Sequence[Bars], *, title: str, y_label: str = "",
              y_range: tuple[float, float] = (0.0, 1.0), width: int | None = None, height: int = 260,
              standalone: bool = False) -> str | None:
    """Grouped bars, one group per category and one bar per series, with interval whiskers and the value above
    each bar; ``None`` without a category or a series."""
    if not categories or not series:
        return None
    pad_l, pad_r, pad_t, pad_b = 52, 14, 36, 30
    group = max(60.0, 26.0 * len(series) + 16)
    width = width or int(max(360, pad_l + pad_r + group * len(categories)))
    legend_h = _LEGEND_ROW * len(series) + 4
    y0, y1 = y_range
    right, bottom = width - pad_r, height - pad_b
    step = (right - pad_l) / len(categories)
    bar_w = min(24.0, (step - 12) / len(series))

    def sy(y: float) -> float:
        return bottom - (min(max(y, y0), y1) - y0) / (y1 - y0) * (bottom - pad_t)

    out = _open(width, height + legend_h, title, standalone)
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{_n(pad_l)}" y1="{_n(sy(t))}" x2="{_n(right)}" y2="{_n(sy(t))}" stroke="#eee"/>'
                   f'<text x="{_n(pad_l - 6)}" y="{_n(sy(t) + 4)}" text-anchor="end" fill="#555">{t:.2f}</text>')
    out.append(f'<line x1="{_n(pad_l)}" y1="{_n(bottom)}" x2="{_n(right)}" y2="{_n(bottom)}" stroke="#999"/>')
    if y_label:
        out.append(f'<text transform="translate(12 {_n((pad_t + bottom) / 2)}) rotate(-90)" text-anchor="middle" '
                   f'fill="#555">{_e(y_label)}</text>')
    for j, cat in enumerate(categories):
        center = pad_l + step * (j + 0.5)
        out.append(f'<text x="{_n(center)}" y="{_n(bottom + 16)}" text-anchor="middle" fill="#555">{_e(cat)}</text>')
        for i, s in enumerate(series):
            v = s.values[j] if j < len(s.values) else None
            if v is None or not math.isfinite(v):
                continue
            color = PALETTE[i % len(PALETTE)]
            x = center - bar_w * len(series) / 2 + bar_w * i
            out.append(f'<rect x="{_n(x + 1)}" y="{_n(sy(v))}" width="{_n(bar_w - 2)}" '
                       f'height="{_n(max(0.0, bottom - sy(v)))}" fill="{color}">'
                       f'<title>{_e(f"{s.name}, {cat}: {v:.3f}")}</title></rect>')
            ci = s.intervals[j] if j < len(s.intervals) else None
            top = v
            if ci is not None:
                mid = x + bar_w / 2
                lo, hi = ci
                top = max(v, hi)
                out.append(f'<path d="M{_n(mid)} {_n(sy(lo))}V{_n(sy(hi))}M{_n(mid - 4)} {_n(sy(lo))}'
                           f'H{_n(mid + 4)}M{_n(mid - 4)} {_n(sy(hi))}H{_n(mid + 4)}" stroke="#333" fill="none"/>')
            out.append(f'<text x="{_n(x + bar_w / 2)}" y="{_n(sy(top) - 4)}" text-anchor="middle" font-size="9" '
                       f'fill="#333">{v:.2f}</text>')
    out.extend(_legend([(s.name, PALETTE[i % len(PALETTE)], False) for i, s in enumerate(series)], pad_l,
                       height + _LEGEND_ROW - 2))
    out.append("</svg>")
    return "\n".join(out)


def stacked_bars(labels: Sequence[str], segments: Sequence[tuple[str, Sequence[float]]], *, title: str,
                 x_label: str = "", width: int = 680, standalone: bool = False,
                 colors: Sequence[str] | None = None) -> str | None:
    """Horizontal stacked bars, one row per label, one segment per ``(name, values)`` in order; ``None`` without
    a row. ``colors`` per segment default to grey for the first (what is kept) and the palette after."""
    if not labels or not segments:
        return None
    label_w = min(220.0, 12 + _CHAR_W * max(len(str(x)) for x in labels))
    pad_r, pad_t, row_h = 16, 30, 22
    bottom = pad_t + row_h * len(labels)
    height = bottom + 26 + (12 if x_label else 0)
    legend_h = _LEGEND_ROW * len(segments) + 4
    totals = [sum(vals[i] for _, vals in segments if i < len(vals)) for i in range(len(labels))]
    x1 = max([*totals, 1.0]) * 1.03
    right = width - pad_r

    def sx(x: float) -> float:
        return label_w + x / x1 * (right - label_w)

    palette = list(colors) if colors else ["#555"] + [PALETTE[(i + 4) % len(PALETTE)] for i in range(len(segments))]
    out = _open(width, height + legend_h, title, standalone)
    for t in _nice_ticks(0.0, x1 / 1.03, integer=True):
        out.append(f'<line x1="{_n(sx(t))}" y1="{_n(pad_t)}" x2="{_n(sx(t))}" y2="{_n(bottom)}" stroke="#eee"/>'
                   f'<text x="{_n(sx(t))}" y="{_n(bottom + 14)}" text-anchor="middle" fill="#555">{t:.4g}</text>')
    for i, label in enumerate(labels):
        y = pad_t + row_h * i
        out.append(f'<text x="{_n(label_w - 6)}" y="{_n(y + row_h / 2 + 4)}" text-anchor="end" fill="#1b1f24">'
                   f'{_e(label)}</text>')
        left = 0.0
        for k, (name, vals) in enumerate(segments):
            v = vals[i] if i < len(vals) else 0.0
            if v <= 0:
                continue
            out.append(f'<rect x="{_n(sx(left))}" y="{_n(y + 3)}" width="{_n(sx(left + v) - sx(left))}" '
                       f'height="{row_h - 6}" fill="{palette[k % len(palette)]}">'
                       f'<title>{_e(f"{label}: {name} {v:.4g}")}</title></rect>')
            left += v
    if x_label:
        out.append(f'<text x="{_n((label_w + right) / 2)}" y="{_n(bottom + 30)}" text-anchor="middle" fill="#555">'
                   f'{_e(x_label)}</text>')
    out.extend(_legend([(name, palette[k % len(palette)], False) for k, (name, _) in enumerate(segments)],
                       label_w, height + _LEGEND_ROW - 2))
    out.append("</svg>")
    return "\n".join(out)
