"""The rule engine: a registry of rules (id, severity, summary) and the per-file context they share.

Each rule is one small function ``(ctx) -> Iterable[Finding]`` registered with :func:`rule`; the security rules
live in :mod:`~shoparena.arena.gate.security`, the integrity rules in :mod:`~shoparena.arena.gate.integrity`,
format rules are applied by :func:`~shoparena.arena.gate.check.check_submission` before anything else. The
context parses, resolves and folds once; rules only read it. Findings with the same rule and key (the same GT id,
the same banned name) are merged into one violation at their first line, listing the other lines.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from shoparena.arena.gate.astutil import walk
from shoparena.arena.gate.fold import UNKNOWN, Folder
from shoparena.arena.gate.phrases import PhraseIndex
from shoparena.arena.gate.resolve import Resolver
from shoparena.arena.gate.types import GateConfig, Severity, Violation


class Rule(NamedTuple):
    id: str
    severity: Severity
    summary: str
    needs_bank: bool = False
    """Only runs when a :class:`PhraseIndex` (or extra product ids) is given."""
    needs_ast: bool = True
    """Skipped when the file does not parse (text-only rules still run then)."""


class Finding(NamedTuple):
    rule: str
    line: int
    key: str
    """What was found (a GT id, a qualified name…); findings with the same rule and key are merged."""
    message: str


Check = Callable[["Context"], Iterable[Finding]]
MAX_PER_RULE = 20
"""Distinct findings listed per rule; the rest are summarised in one violation."""
RULES: dict[str, Rule] = {}
_CHECKS: list[tuple[Rule, Check]] = []


def declare(rule_id: str, severity: Severity, summary: str, **kw: bool) -> Rule:
    """Register a rule id without a check function (format rules, rules emitted by a shared pass)."""
    if rule_id in RULES:
        raise ValueError(f"rule {rule_id!r} declared twice")
    RULES[rule_id] = Rule(rule_id, severity, summary, **kw)
    return RULES[rule_id]


def rule(rule_id: str, severity: Severity, summary: str, **kw: bool) -> Callable[[Check], Check]:
    """Decorator: register ``fn`` as the check of a new rule."""
    def register(fn: Check) -> Check:
        _CHECKS.append((declare(rule_id, severity, summary, **kw), fn))
        return fn
    return register


class TextSource(NamedTuple):
    """A text the integrity rules scan: the raw source, a string constant, or a folded expression's value."""

    text: str
    line: int
    """Line of the text's first character."""
    kind: str
    """``source`` | ``literal`` | ``folded``."""
    line_starts: list[int] | None = None
    """Offsets of the line starts (the raw source only: bisecting beats counting newlines in 1 MB)."""

    def line_at(self, offset: int) -> int:
        if self.line_starts is not None:
            return bisect.bisect_right(self.line_starts, offset)
        return self.line + self.text.count("\n", 0, offset)


@dataclass
class Context:
    """Everything the rules read about one submission."""

    source: str
    tree: ast.Module | None
    config: GateConfig = field(default_factory=GateConfig)
    index: PhraseIndex | None = None
    extra_ids: frozenset[str] = frozenset()
    cache: dict[str, object] = field(default_factory=dict)
    """Results of passes shared by several rules (keyed by pass name)."""

    def __post_init__(self) -> None:
        self.nodes, self.parents = walk(self.tree) if self.tree is not None else ([], {})
        self.by_type: dict[type, list[ast.AST]] = defaultdict(list)
        for node in self.nodes:
            self.by_type[type(node)].append(node)
        self.folder = Folder(self.by_type) if self.tree is not None else None
        self.resolver = Resolver(self.tree, self.folder, self.by_type, self.parents) \
            if self.tree is not None and self.folder else None
        self._line_starts = [0, *(m.end() for m in re.finditer("\n", self.source))]

    def of_type(self, *types: type) -> list[ast.AST]:
        """Nodes of exactly these AST classes (each class in source order)."""
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        return [n for t in types for n in self.by_type.get(t, [])]

    @property
    def has_bank(self) -> bool:
        return self.index is not None or bool(self.extra_ids)

    def is_gt_id(self, value: str) -> bool:
        return (self.index is not None and value in self.index.ids) or value in self.extra_ids

    def gt_problem(self, value: str) -> str | None:
        return self.index.ids.get(value) if self.index is not None else None

    @cached_property
    def texts(self) -> list[TextSource]:
        """The raw source, every string constant whose value does not stand verbatim in the source (escapes,
        implicit concatenation), and the value of every foldable compound expression."""
        out = [TextSource(self.source, 1, "source", self._line_starts)]
        if self.tree is None or self.folder is None:
            return out
        skipped: set[int] = set()
        compound = (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript, ast.ListComp, ast.GeneratorExp)
        for node in self.nodes:
            parent = self.parents.get(id(node))
            if parent is not None and id(parent) in skipped:
                skipped.add(id(node))  # inside a folded expression: its value is scanned whole
                continue
            kind = type(node)
            if kind is ast.Constant:
                value = node.value
                if isinstance(value, str | bytes) and value and not self._verbatim(node):
                    out.append(TextSource(_as_text(value), node.lineno, "literal"))
            elif kind in compound:
                value = self.folder.fold(node)
                if value is not UNKNOWN:
                    skipped.add(id(node))
                    for text in flatten(value):
                        out.append(TextSource(text, node.lineno, "folded"))
        return out

    def _verbatim(self, node: ast.Constant) -> bool:
        """True when the constant's text stands as-is in its source lines (the raw-source scan covers it)."""
        starts = self._line_starts
        end_line = node.end_lineno or node.lineno
        chunk = self.source[starts[node.lineno - 1]: starts[end_line] if end_line < len(starts) else None]
        return _as_text(node.value) in chunk


def _as_text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def flatten(value: object) -> list[str]:
    """Strings / numbers inside a folded value, as text (containers flattened, bounded)."""
    out: list[str] = []
    stack = [value]
    while stack and len(out) < 10_000:
        v = stack.pop()
        if isinstance(v, str | bytes):
            out.append(_as_text(v))
        elif isinstance(v, int) and not isinstance(v, bool):
            out.append(str(v))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
    return out


def snippet(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of odd trees
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_rules(ctx: Context) -> list[Violation]:
    """Every applicable registered check over ``ctx``, merged into violations."""
    from shoparena.arena.gate import integrity, security, tables  # noqa: F401  (registers the rules)

    merged: dict[tuple[str, str], list[Finding]] = {}
    for spec, check in _CHECKS:
        if (spec.needs_ast and ctx.tree is None) or (spec.needs_bank and not ctx.has_bank):
            continue
        for finding in check(ctx):
            merged.setdefault((finding.rule, finding.key), []).append(finding)
    out: list[Violation] = []
    shown: dict[str, int] = {}
    hidden: dict[str, list[int]] = {}
    for (rule_id, _), findings in merged.items():
        findings.sort(key=lambda f: f.line)
        first = findings[0]
        if shown.get(rule_id, 0) >= MAX_PER_RULE:
            hidden.setdefault(rule_id, []).append(first.line)
            continue
        shown[rule_id] = shown.get(rule_id, 0) + 1
        others = sorted({f.line for f in findings[1:]} - {first.line})
        message = first.message
        if others:
            lines = ", ".join(map(str, others[:5])) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            message += f" (also on line{'s' if len(others) > 1 else ''} {lines})"
        out.append(Violation(rule=rule_id, severity=RULES[rule_id].severity, message=message, line=first.line))
    for rule_id, lines in hidden.items():
        out.append(Violation(rule=rule_id, severity=RULES[rule_id].severity, line=min(lines),
                             message=f"{len(lines)} more {rule_id} findings not listed (first on line {min(lines)})"))
    return out
