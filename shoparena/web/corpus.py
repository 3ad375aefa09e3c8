"""The corpus and evaluation page's data: the funnel of a ``shoparena corpus build`` (each stage's rows seen,
kept and rejected by reason, read from its ``manifest.json``) and the evaluation reports found under the
reports directory (``shoparena evaluate --report`` writes a self-contained ``report.html``).

Files are read only from the directories the site was started with; a report is addressed by its index in the
sorted list found there, never by a path from the request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shoparena.errors import DataError, NotFoundError
from shoparena.web.site import Site

__all__ = ["corpus_page", "report_file", "reports"]

MAX_REPORTS = 50


def _funnel(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for s in manifest.get("counts") or []:
        if not isinstance(s, dict):
            continue
        rejected = s.get("rejected") if isinstance(s.get("rejected"), dict) else {}
        out.append({"stage": str(s.get("stage")), "seen": s.get("seen"), "kept": s.get("kept"),
                    "rejected": dict(sorted(((str(k), v) for k, v in rejected.items()), key=lambda kv: -kv[1])),
                    "rejected_total": sum(v for v in rejected.values() if isinstance(v, int))})
    return out


def reports(site: Site) -> list[dict[str, Any]]:
    """The evaluation reports under the reports directory (up to two levels deep), sorted by path."""
    if site.reports is None:
        return []
    found = sorted({*site.reports.glob("report.html"), *site.reports.glob("*/report.html"),
                    *site.reports.glob("*/*/report.html")})[:MAX_REPORTS]
    return [{"index": i, "name": str(p.parent.relative_to(site.reports)) if p.parent != site.reports else ".",
             "bytes": p.stat().st_size} for i, p in enumerate(found)]


def report_file(site: Site, index: int) -> Path:
    """The ``index``-th report's file; :class:`NotFoundError` when there is none."""
    if site.reports is None:
        raise NotFoundError("no reports directory")
    found = sorted({*site.reports.glob("report.html"), *site.reports.glob("*/report.html"),
                    *site.reports.glob("*/*/report.html")})[:MAX_REPORTS]
    if not 0 <= index < len(found):
        raise NotFoundError(f"no report {index}")
    return found[index]


def verification(site: Site, root: Path) -> list[str]:
    """Why the corpus at ``root`` fails verification (empty: verified), checked as ``corpus show`` and
    ``evaluate --split`` do: every file against the sealed ``manifest.json``, and ``split.json`` against its own
    seal. Hashing every export is the cost of a page, so the answer is kept while no file changes (by path, size
    and mtime)."""
    from shoparena.corpus.export.manifest import read_manifest
    from shoparena.corpus.split import SplitManifest
    from shoparena.errors import ShopArenaError

    key = tuple((str(p.relative_to(root)), st.st_size, st.st_mtime_ns)
                for p in sorted(root.rglob("*")) if p.is_file() and (st := p.stat()))
    with site.lock:
        cached = site.cache.get("corpus_verification")
    if cached is not None and cached[0] == key:
        return list(cached[1])
    problems: list[str] = []
    try:
        read_manifest(root, verify=True)
    except ShopArenaError as exc:
        problems.append(str(exc))
    split = root / "split.json"
    if not split.is_file():
        problems.append("split.json not found: the corpus holds no sealed split")
    else:
        try:
            SplitManifest.load(split)
        except ShopArenaError as exc:
            problems.append(str(exc))
    with site.lock:
        site.cache["corpus_verification"] = (key, tuple(problems))
    return problems


def corpus_page(site: Site) -> dict[str, Any]:
    """``{corpus: {dir, funnel, exports, manifest_hash, verified, verification} | None, reports: [...]}``;
    ``verified`` is false (and ``verification`` says why) for a corpus whose files or split do not match their
    seals: its funnel is shown as read, not vouched for."""
    corpus = None
    if site.corpus is not None:
        path = site.corpus / "manifest.json"
        if path.is_file():
            try:
                manifest = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise DataError(f"{path} is not a readable manifest: {exc}") from None
            exports = manifest.get("exports") if isinstance(manifest.get("exports"), dict) else {}
            corpus = {"dir": site.corpus.name, "funnel": _funnel(manifest),
                      "exports": {str(k): {"rows": v.get("rows") if isinstance(v, dict) else None}
                                  for k, v in sorted(exports.items())},
                      "manifest_hash": manifest.get("manifest_hash")}
            problems = verification(site, site.corpus)
            corpus.update(verified=not problems, verification=problems)
        else:
            corpus = {"dir": site.corpus.name, "funnel": [], "exports": {}, "manifest_hash": None,
                      "missing": "manifest.json not found", "verified": False,
                      "verification": ["manifest.json not found"]}
    return {"corpus": corpus, "reports": reports(site)}


