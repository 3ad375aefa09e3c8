"""The evaluation report: ``report.md`` and a self-contained ``report.html`` rendered from stored files only.

Three steps, one module each: :mod:`~shoparena.evaluate.report.load` reads and checks the inputs
(``<out>/evaluation.json``, a training manifest, a corpus manifest), :mod:`~shoparena.evaluate.report.sections`
builds the :class:`~shoparena.evaluate.report.document.Document` (a typed list of headings, paragraphs, tables and
figures: what the report says) and :mod:`~shoparena.evaluate.report.render` renders it twice, as Markdown and as
HTML. The charts are SVG drawn by :mod:`~shoparena.evaluate.report.plots`, the drawing the web pages share.

``report.md`` references its charts as ``report_*.svg`` files beside it; ``report.html`` inlines them, inlines its
CSS and loads nothing from anywhere. Every string read from a file is escaped (the inputs are untrusted), nothing
depends on the clock: the same inputs give byte-identical files, each written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from shoparena.evaluate.report.load import ReportInputs, load_inputs
from shoparena.evaluate.report.render import to_html, to_markdown
from shoparena.evaluate.report.sections import PLOTS, build

__all__ = ["PLOTS", "ReportInputs", "build", "load_inputs", "to_html", "to_markdown", "write_report"]

_OLD_PLOTS = ("report_buckets.png", "report_passk.png", "report_loss.png", "report_funnel.png")
"""Chart files earlier versions wrote (matplotlib PNGs): removed with the other stale charts."""


def _write(path: Path, data: bytes) -> None:
    from shoparena._io import atomic_write

    with atomic_write(path, "wb") as fh:
        fh.write(data)


def write_report(out: str | os.PathLike[str], *, train_manifest: str | os.PathLike[str] | None = None,
                 corpus_manifest: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """Render ``<out>/report.md`` (+ ``report_*.svg``) and ``<out>/report.html`` from ``<out>/evaluation.json``,
    the training manifest (a ``manifest.json`` or its directory) and the corpus manifest (default: the
    ``manifest.json`` of the training manifest's ``corpus`` when it exists). Returns ``(md, html)``. A missing
    input file → :class:`NotFoundError`; a malformed one → :class:`DataError`; nothing is written then."""
    root = Path(out)
    doc = build(load_inputs(root, train_manifest=train_manifest, corpus_manifest=corpus_manifest))
    figures = {f.name: f.svg for f in doc.figures}
    for name, svg in figures.items():
        _write(root / name, svg.encode("utf-8"))
    for name in (*PLOTS, *_OLD_PLOTS):
        if name not in figures:
            (root / name).unlink(missing_ok=True)
    md_path, html_path = root / "report.md", root / "report.html"
    _write(md_path, to_markdown(doc).encode("utf-8"))
    _write(html_path, to_html(doc).encode("utf-8"))
    return md_path, html_path
