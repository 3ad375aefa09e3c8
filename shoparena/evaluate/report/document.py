"""The report as data: a typed sequence of blocks that says what the report says, rendered to Markdown and HTML
by :mod:`shoparena.evaluate.report.render` (one document, two renderers: the two files never disagree)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Block", "Document", "Figure", "Heading", "Para", "Table"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    note: bool = False
    """A remark about the report itself (rendered as a quote / in italics)."""


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    text: tuple[int, ...] = (0,)
    """The columns that are text (left-aligned); the others are numbers (right-aligned)."""


@dataclass(frozen=True)
class Figure:
    """A chart: ``svg`` is the standalone file written as ``name`` beside ``report.md``; ``inline`` the same chart
    embedded in ``report.html`` (:mod:`shoparena.evaluate.report.plots`)."""

    name: str
    alt: str
    svg: str
    inline: str


Block = Heading | Para | Table | Figure


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

    @property
    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]
