"""Every ``docs/<name>.md §N`` that code, a recipe or a document cites resolves to a document in the repository.

Code cites the contract documents under ``docs/`` (``docs/shoppingbench.md``, ``docs/arena.md``,
``docs/training.md``, ``docs/paper.md`` and the design notes beside them) instead of notes a reader cannot open.
This test reads every ``.py`` file of the repository, every YAML recipe and every Markdown document, collects each
citation and checks that

* the cited file exists under ``docs/``;
* each cited section (``§7.2``, ``§6b``, both ends of a range ``§10.2–10.3``, every member of a list
  ``§2, §6, §8``) is a Markdown heading of that file (``### 7.2 Per-item scores``) or a line labelled with it
  (``**9.17**`` / ``- **§9.17**``);
* each cited appendix (``docs/paper.md §3 / Appendix A.2``) is named by a heading of that file;
* each cited sub-point (``§7 bug #2``, ``§3 row 4``, ``§12 design point 2``, ``§7.3 worked example``) is
  labelled inside the cited section's text.

The parser is exercised on planted bad citations below, so a broken checker cannot pass silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_DIRS = {"runs", "build", "dist", "node_modules", "__pycache__"}
SOURCE_SUFFIXES = {".py", ".yaml", ".yml", ".md"}  # code, recipes, and the documents citing one another

# ``docs/<name>.md`` optionally closed by RST backticks, then the reference chain that follows it.
_FILE = re.compile(r"docs/([A-Za-z0-9_./-]+?\.md)(?:``|`)?")
_SECTION = r"§\s?(\d+[a-z]?(?:\.\d+)*)"
_APPENDIX = r"Appendix\s+([A-Z](?:\.\d+)*)"
# One reference (a section, a range, or an appendix) and the separators allowed between references of one chain.
_REF = re.compile(rf"\s*(?:{_SECTION}(?:\s?[–-]\s?(?:§\s?)?(\d+[a-z]?(?:\.\d+)*))?|{_APPENDIX})")
_SEP = re.compile(r"\s*(?:,|/|;|and)\s*(?=§|Appendix)")
_SUBPOINT = re.compile(
    r"\s*,?\s*(?:\(?(bugs?\s+#\d+(?:/#\d+)*)|(row\s+\d+)|(design,?\s+point\s+\d+)|(worked example))",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^#{1,6}\s+(?:§\s?)?(\d+[a-z]?(?:\.\d+)*)\.?(?:\s|$)")
_LABEL = re.compile(r"^\s*(?:[-*]\s+)?\*\*§?(\d+[a-z]?(?:\.\d+)*)\.?\*\*")
_APPENDIX_HEADING = re.compile(r"^#{1,6}\s.*\bAppendix\s+([A-Z](?:\.\d+)*)\b")


@dataclass(frozen=True)
class Citation:
    """One cited document reference found in a source file."""

    source: str
    line: int
    doc: str
    sections: tuple[str, ...]
    appendices: tuple[str, ...]
    subpoints: tuple[tuple[str, str], ...]  # (section, label) pairs such as ("7", "bug #2")


def parse_citations(text: str, source: str = "<text>") -> list[Citation]:
    """Return every ``docs/<name>.md [§…]`` citation in ``text``."""
    found: list[Citation] = []
    for match in _FILE.finditer(text):
        doc = match.group(1)
        pos = match.end()
        sections: list[str] = []
        appendices: list[str] = []
        subpoints: list[tuple[str, str]] = []
        while True:
            ref = _REF.match(text, pos)
            if ref is None or not (ref.group(1) or ref.group(3)):
                break
            if ref.group(1):
                sections.append(ref.group(1))
                if ref.group(2):
                    sections.append(ref.group(2))
            else:
                appendices.append(ref.group(3))
            pos = ref.end()
            sub = _SUBPOINT.match(text, pos)
            if sub and sections and ref.group(1):
                label = next(g for g in sub.groups() if g)
                for one in _expand_subpoint(label):
                    subpoints.append((sections[-1], one))
                pos = sub.end()
            sep = _SEP.match(text, pos)
            if sep is None:
                break
            pos = sep.end()
        line = text.count("\n", 0, match.start()) + 1
        found.append(Citation(source, line, doc, tuple(sections), tuple(appendices), tuple(subpoints)))
    return found


def _expand_subpoint(label: str) -> list[str]:
    """``bugs #4/#5`` -> ``bug #4``, ``bug #5``; ``design, point 2`` -> ``design point 2``."""
    label = re.sub(r"\s+", " ", label.strip()).lower()
    if label.startswith("bug"):
        return [f"bug #{n}" for n in re.findall(r"#(\d+)", label)]
    return [label.replace("design, point", "design point")]


@dataclass
class DocIndex:
    """The sections, appendices and section texts of one Markdown document."""

    sections: dict[str, str]
    appendices: set[str]


def index_document(text: str) -> DocIndex:
    """Map each numbered heading or labelled line to the text up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    sections: dict[str, str] = {}
    appendices: set[str] = set()
    starts: list[tuple[int, int, str]] = []  # (line index, heading level, section id)
    for i, line in enumerate(lines):
        appendix = _APPENDIX_HEADING.match(line)
        if appendix:
            appendices.add(appendix.group(1))
        heading = _HEADING.match(line)
        if heading:
            starts.append((i, len(line) - len(line.lstrip("#")), heading.group(1)))
            continue
        label = _LABEL.match(line)
        if label:
            starts.append((i, 7, label.group(1)))
    for n, (i, level, sid) in enumerate(starts):
        end = len(lines)
        for j, other_level, _ in starts[n + 1 :]:
            if other_level <= level:
                end = j
                break
        sections.setdefault(sid, "\n".join(lines[i:end]))
    return DocIndex(sections, appendices)


def check_citation(citation: Citation, docs_dir: Path, cache: dict[str, DocIndex | None]) -> list[str]:
    """Return one problem line per reference of ``citation`` that does not resolve (empty when all do)."""
    where = f"{citation.source}:{citation.line}: docs/{citation.doc}"
    if citation.doc not in cache:
        path = docs_dir / citation.doc
        cache[citation.doc] = index_document(path.read_text(encoding="utf-8")) if path.is_file() else None
    index = cache[citation.doc]
    if index is None:
        return [f"{where}: no such file"]
    problems = [f"{where} §{s}: no such section" for s in citation.sections if s not in index.sections]
    problems += [
        f"{where} Appendix {a}: no such appendix" for a in citation.appendices if a not in index.appendices
    ]
    for section, label in citation.subpoints:
        body = index.sections.get(section)
        flat = re.sub(r"\s+", " ", body).lower() if body is not None else ""
        if body is not None and not re.search(re.escape(label) + r"(?!\d)", flat):
            problems.append(f"{where} §{section} {label}: not labelled in that section")
    return problems


def python_sources(root: Path) -> list[Path]:
    """Every ``.py`` / ``.yaml`` / ``.md`` file of the repository outside hidden folders, virtual environments and run outputs (this file
    is left out: its planted citations name documents that exist only in a temporary folder)."""
    out: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_dir():
                if entry.name.startswith(".") or entry.name in SKIP_DIRS or entry.name.endswith(".egg-info"):
                    continue
                stack.append(entry)
            elif entry.suffix in SOURCE_SUFFIXES and entry != Path(__file__).resolve():
                out.append(entry)
    return out


def repository_citations() -> list[Citation]:
    """All citations in the repository's sources and documents."""
    cites: list[Citation] = []
    for path in python_sources(ROOT):
        cites += parse_citations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return cites


def test_repository_cites_only_existing_documents_and_sections() -> None:
    cites = repository_citations()
    assert len(cites) > 100, "the scan found suspiciously few citations: is the parser broken?"
    cache: dict[str, DocIndex | None] = {}
    problems = [p for c in cites for p in check_citation(c, DOCS, cache)]
    assert not problems, "unresolved citations:\n" + "\n".join(problems)


def test_the_four_contract_documents_are_cited() -> None:
    cited = {c.doc for c in repository_citations() if c.sections}
    assert {"shoppingbench.md", "arena.md", "training.md", "paper.md"} <= cited


# ── the checker itself, on planted documents and citations ───────────────────────────────────────────────────

_PLANTED_DOC = """\
# Title
## 1. First
### 1.2 Second
text
## 6b. Lettered
## 7. Catalogue
- **Bug #2** dropout in sampling; **bug #12** defaults.
**9.17** a labelled item
## 8. Next
### Appendix A.2 (paper) gates
"""


@pytest.fixture()
def planted_docs(tmp_path: Path) -> Path:
    (tmp_path / "good.md").write_text(_PLANTED_DOC, encoding="utf-8")
    return tmp_path


def _problems(text: str, docs_dir: Path) -> list[str]:
    cache: dict[str, DocIndex | None] = {}
    return [p for c in parse_citations(text) for p in check_citation(c, docs_dir, cache)]


@pytest.mark.parametrize(
    "text",
    [
        "see docs/good.md §1.2.",
        "(docs/good.md §1, §1.2, §6b)",
        "``docs/good.md`` §1.2; ``docs/good.md`` §8 / Appendix A.2",
        "docs/good.md §1–§1.2 and docs/good.md §8–8",
        "docs/good.md §7 bug #2",
        "docs/good.md §9.17",
        "docs/good.md without a section",
    ],
)
def test_checker_accepts_resolvable_citations(text: str, planted_docs: Path) -> None:
    assert _problems(text, planted_docs) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see docs/missing.md §1", "no such file"),
        ("see docs/missing.md", "no such file"),
        ("docs/good.md §1.3", "§1.3: no such section"),
        ("docs/good.md §1, §4", "§4: no such section"),
        ("docs/good.md §6c", "§6c: no such section"),
        ("docs/good.md §1.2–1.5", "§1.5: no such section"),
        ("``docs/good.md`` §8 / Appendix B.1", "Appendix B.1: no such appendix"),
        ("docs/good.md §7 bug #3", "bug #3: not labelled"),
        ("docs/good.md §7 bug #1", "bug #1: not labelled"),
        ("docs/good.md §8, bugs #2/#4", "bug #2: not labelled"),
        ("docs/good.md §9.18", "§9.18: no such section"),
    ],
)
def test_checker_rejects_bad_citations(text: str, expected: str, planted_docs: Path) -> None:
    problems = _problems(text, planted_docs)
    assert problems and any(expected in p for p in problems), problems


def test_parser_reads_ranges_lists_and_subpoints() -> None:
    (cite,) = parse_citations("x (docs/arena.md §10.2–10.3, §14.1; docs-free text §99)")
    assert cite.doc == "arena.md" and cite.sections == ("10.2", "10.3", "14.1")
    (cite,) = parse_citations("``docs/training.md`` §8, bugs #4/#5): every token")
    assert cite.sections == ("8",) and cite.subpoints == (("8", "bug #4"), ("8", "bug #5"))
    (cite,) = parse_citations("docs/arena.md §12 design, point 2)")
    assert cite.subpoints == (("12", "design point 2"),)
