"""The one chart drawing (evaluate/report/plots.py): SVG text, labels escaped, deterministic, nothing external."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from shoparena.evaluate.report.plots import Bars, Series, bar_chart, line_chart, stacked_bars

EVIL = '<script>alert("x")</script>'
NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def test_nothing_to_draw_is_none() -> None:
    assert line_chart([Series("a", [])], title="t") is None
    assert bar_chart([], [Bars("a", [])], title="t") is None
    assert stacked_bars([], [("kept", [])], title="t") is None


def test_labels_are_escaped_and_nothing_is_loaded() -> None:
    charts = [
        line_chart([Series(EVIL, [(1, 0.2), (2, 0.4)], band=[(1, 0.1, 0.3), (2, 0.3, 0.5)])], title=EVIL,
                   x_label=EVIL, y_label=EVIL, standalone=True),
        bar_chart([EVIL, "shop"], [Bars(EVIL, [0.5, None], [(0.4, 0.6), None])], title=EVIL, standalone=True),
        stacked_bars([EVIL], [("kept", [3]), (EVIL, [2])], title=EVIL, standalone=True),
    ]
    for svg in charts:
        assert svg is not None and EVIL not in svg and "&lt;script&gt;" in svg
        root = _parse(svg)
        assert root.tag == f"{NS}svg"
        for el in root.iter():
            assert not any(k.endswith("href") or k.startswith("on") for k in el.attrib)
        assert "<script" not in svg.lower()


def test_deterministic_and_standalone_only_when_asked() -> None:
    series = [Series("a", [(1, 0.25), (2, 0.5)]), Series("b", [(1, 0.1), (2, 0.9)], dashed=True)]
    one, two = line_chart(series, title="t"), line_chart(series, title="t")
    assert one == two and "xmlns" not in one and 'stroke-dasharray="5 3"' in one
    assert line_chart(series, title="t", standalone=True).startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert one.count("<polyline") == 2 and one.count("<circle") == 4


def test_values_outside_the_range_stay_inside_the_plot() -> None:
    svg = line_chart([Series("a", [(0, -3.0), (1, 7.0)])], title="t", height=200)
    ys = [float(c.get("cy")) for c in _parse(svg.replace("<svg ", f'<svg xmlns="{NS[1:-1]}" ', 1)).iter(f"{NS}circle")]
    assert all(0 <= y <= 200 for y in ys)
    fitted = line_chart([Series("a", [(0, -3.0), (1, 7.0)])], title="t", y_range=None)
    labels = re.findall(r'text-anchor="end" fill="#555">([^<]*)<', fitted)
    assert labels == ["-4", "-2", "0", "2", "4", "6", "8"]  # fitted: widened to whole steps, a tick at each
