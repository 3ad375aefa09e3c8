"""The two renderers of a report :class:`~shoparena.evaluate.report.document.Document`: Markdown (figures as
``report_*.svg`` files beside it) and a self-contained HTML page (inline CSS, figures as inline SVG, no script,
nothing loaded from anywhere). Every string is escaped in both: the inputs are untrusted."""

from __future__ import annotations

import html

from shoparena.evaluate.report.document import Document, Figure, Heading, Para, Table

__all__ = ["to_html", "to_markdown"]


def _md_text(s: str) -> str:
    """One line of Markdown text: no raw HTML (``< > &`` escaped), no cell break (``|``), no link (``](``)."""
    s = html.escape(" ".join(str(s).split()), quote=False).replace("\\", "\\\\")
    return s.replace("|", "\\|").replace("](", "]\\(")


def to_markdown(doc: Document) -> str:
    out: list[str] = ["# " + _md_text(doc.title), ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + _md_text(b.text), ""]
        elif isinstance(b, Para):
            out += [("> " if b.note else "") + _md_text(b.text), ""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_md_text(h) for h in b.headers) + " |")
            out.append("|" + "|".join(":---" if i in b.text else "---:" for i in range(len(b.headers))) + "|")
            out += ["| " + " | ".join(_md_text(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Figure):
            out += [f"![{_md_text(b.alt)}]({b.name})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1f24; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.88rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.55rem; vertical-align: top; }
th { background: #f3f5f7; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
p.note { color: #57606a; font-style: italic; }
figure { margin: 0.6rem 0 1.2rem; } figure svg { max-width: 100%; height: auto; }
""".strip()


def to_html(doc: Document) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{e(doc.title)}</title>",
           f"<style>\n{CSS}\n</style>", "</head>", "<body>", f"<h1>{e(doc.title)}</h1>"]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(('<p class="note">' if b.note else "<p>") + f"{e(b.text)}</p>")
        elif isinstance(b, Table):
            out.append("<table>")
            out.append("<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in b.headers) + "</tr></thead>")
            out.append("<tbody>")
            for row in b.rows:
                out.append("<tr>" + "".join(f"<td>{e(c)}</td>" if i in b.text else f'<td class="n">{e(c)}</td>'
                                            for i, c in enumerate(row)) + "</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, Figure):
            out.append(f"<figure>\n{b.inline}\n</figure>")  # built by plots.py: every label in it is escaped
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
