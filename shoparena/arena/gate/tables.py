"""Lookup-table rules (integrity): id lists, answer tables and suite-specific dictionaries (docs/arena.md §2.3).

A *table* is any literal container (list, tuple, set, dict), ``dict(key=…)``, ``zip(A, B)`` of literal lists or a
literal ``"a|b|c".split("|")``. Its *entries* are its elements (dict: key/value pairs). How the table is used
later does not matter: a dict built in a loop from a literal list, or ``dict(zip(...))``, is caught at the literal.
A table already reported is not reported again through the containers nested in it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from shoparena.arena.gate.astutil import children
from shoparena.arena.gate.fold import UNKNOWN
from shoparena.arena.gate.rules import Context, Finding, flatten, rule

_ID_SHAPED = re.compile(r"(?<![0-9])[0-9]{8,11}(?![0-9])")
_HASH = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{56}|[0-9a-fA-F]{64}")


_TABLE_TYPES = frozenset({ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Call})


class Entry(NamedTuple):
    key: list[str]
    """Texts of the key (dict entries, pairs); empty for plain elements."""
    value: list[str]


class Table(NamedTuple):
    node: ast.AST
    line: int
    entries: list[Entry]
    mapping: bool
    """Dict-like: entries are (key, value) pairs."""


def _leaves(ctx: Context, node: ast.AST | None) -> list[str]:
    if node is None:
        return []
    value = ctx.folder.fold(node) if ctx.folder else UNKNOWN
    if value is not UNKNOWN:
        return flatten(value)
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is ast.Constant:
            if type(n.value) in (str, int):
                out.append(str(n.value))
        else:
            stack.extend(children(n))
    return out


def _pair(ctx: Context, node: ast.AST) -> Entry | None:
    if isinstance(node, ast.Tuple | ast.List) and len(node.elts) == 2:
        return Entry(_leaves(ctx, node.elts[0]), _leaves(ctx, node.elts[1]))
    return None


def tables(ctx: Context) -> list[Table]:
    """Every table of the file, outermost first (cached on the context)."""
    if "tables" in ctx.cache:
        return ctx.cache["tables"]
    out: list[Table] = []
    least = min(ctx.config.min_table_entries, ctx.config.min_id_list)
    for node in ctx.nodes:
        kind = type(node)
        if kind not in _TABLE_TYPES or (kind is not ast.Call and len(getattr(node, "elts", None)
                                                                  or getattr(node, "keys", ())) < least):
            continue  # too small to be a table of anything
        if isinstance(node, ast.Dict):
            entries = [Entry(_leaves(ctx, k), _leaves(ctx, v)) for k, v in zip(node.keys, node.values, strict=True)
                       if k is not None]
            out.append(Table(node, node.lineno, entries, True))
        elif isinstance(node, ast.List | ast.Tuple | ast.Set):
            pairs = [_pair(ctx, e) for e in node.elts]
            if pairs and all(p is not None for p in pairs):
                out.append(Table(node, node.lineno, pairs, True))
            else:
                out.append(Table(node, node.lineno, [Entry([], _leaves(ctx, e)) for e in node.elts], False))
        elif isinstance(node, ast.Call) and ctx.resolver is not None:
            table = _call_table(ctx, node)
            if table is not None:
                out.append(table)
    ctx.cache["tables"] = out
    return out


def _call_table(ctx: Context, node: ast.Call) -> Table | None:
    names = ctx.resolver.qualnames(node.func) if ctx.resolver else set()
    if "builtins.dict" in names and node.keywords and not node.args:
        entries = [Entry([k.arg], _leaves(ctx, k.value)) for k in node.keywords if k.arg]
        return Table(node, node.lineno, entries, True)
    if "builtins.zip" in names and len(node.args) == 2 and ctx.folder is not None:
        a, b = ctx.folder.fold(node.args[0]), ctx.folder.fold(node.args[1])
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return Table(node, node.lineno, [Entry(flatten(x), flatten(y)) for x, y in zip(a, b, strict=False)],
                         True)
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("split", "splitlines") and ctx.folder:
        value = ctx.folder.fold(node)
        if isinstance(value, list):
            return Table(node, node.lineno, [Entry([], flatten(v)) for v in value], False)
    return None


def _inside(ctx: Context, node: ast.AST, flagged: set[int]) -> bool:
    if not flagged:
        return False
    parent = ctx.parents.get(id(node))
    while parent is not None:
        if id(parent) in flagged:
            return True
        parent = ctx.parents.get(id(parent))
    return False


def _id_shaped(text: str) -> bool:
    text = text.strip()
    return _ID_SHAPED.fullmatch(text) is not None and not text.endswith("0000")


@rule("id_list", "integrity", "≥ 3 product-id-shaped literals (8–11 digits) in one table, or one string made of "
      "≥ 3 of them: a list of answers even without the banks")
def id_list(ctx: Context) -> Iterator[Finding]:
    flagged: set[int] = set()
    need = ctx.config.min_id_list
    for table in tables(ctx):
        n = sum(any(_id_shaped(t) for t in (*e.key, *e.value)) for e in table.entries)
        if n >= need and not _inside(ctx, table.node, flagged):
            flagged.add(id(table.node))
            yield Finding("id_list", table.line, f"table@{table.line}", f"a literal table holds {n} "
                          "product-id-shaped values (8–11 digits): embedded product ids are answer leakage")
    strings = [(n.value, n.lineno) for n in ctx.of_type(ast.Constant) if type(n.value) is str]
    strings += [(src.text, src.line) for src in ctx.texts if src.kind == "folded"]
    for text, line in strings:
        if len(text) < 8 * need:
            continue
        runs = [m for m in _ID_SHAPED.finditer(text) if not m.group().endswith("0000")]
        digits = sum(len(m.group()) for m in runs)
        if len(runs) >= need and digits >= 0.6 * len(text.strip()):
            yield Finding("id_list", line, f"table@{line}", f"a string holds {len(runs)} "
                          "product-id-shaped numbers: embedded product ids are answer leakage")


@rule("answer_table", "integrity", "a table with ≥ 3 entries holding bank data (GT ids, whole queries / titles "
      "/ answers, copied phrases, problem-specific fragments), or keyed by ≥ 3 hash digests")
def answer_table(ctx: Context) -> Iterator[Finding]:
    flagged: set[int] = set()
    need = ctx.config.min_table_entries
    memo: dict[str, tuple[str, str] | None] = {}
    for table in tables(ctx):
        if len(table.entries) < need or _inside(ctx, table.node, flagged):
            continue
        hashed = sum(any(_HASH.fullmatch(t) for t in e.key or e.value[:1]) for e in table.entries)
        linked = []
        if ctx.index is not None:
            for i, entry in enumerate(table.entries):
                for text in (*entry.key, *entry.value):
                    if text not in memo:
                        memo[text] = ctx.index.link(text) if len(text) >= 6 else None
                    if memo[text] is not None:
                        linked.append((i, memo[text]))
                        break
        if len(linked) >= need:
            flagged.add(id(table.node))
            examples = "; ".join(f"entry {i + 1} {why} (problem {pid})" for i, (pid, why) in linked[:2])
            yield Finding("answer_table", table.line, f"table@{table.line}", f"a literal table has {len(linked)} "
                          f"entries holding bank data ({examples}): lookup / cached-answer tables are banned")
        elif hashed >= need:
            flagged.add(id(table.node))
            yield Finding("answer_table", table.line, f"table@{table.line}", f"a literal table is keyed by "
                          f"{hashed} hash digests: a hashed lookup table hides which problems it answers")


@rule("suite_dict", "integrity", "a dict / pair list whose entries (≥ 3 problems, and half the entries or ≥ 10) "
      "hold GT-title fragments or model words, or pair a key and a value from one problem's context (synonym "
      "maps lifted from a problem)", needs_bank=True)
def suite_dict(ctx: Context) -> Iterator[Finding]:
    index = ctx.index
    if index is None:
        return
    flagged: set[int] = set()
    for table in tables(ctx):
        if not table.mapping or len(table.entries) < ctx.config.min_table_entries:
            continue
        hits: dict[str, str] = {}  # problem → example: distinct problems, so one coincidence counts once
        for entry in table.entries:
            key = " ".join(t for t in entry.key if not t.isdigit())
            value = " ".join(t for t in entry.value if not t.isdigit())
            if pid := index.title_fragment(value) or index.title_fragment(key):
                hits.setdefault(pid, f"{key!r}→{value!r} quotes a GT title of problem {pid}")
            elif key and value and (pid := index.pair_problem(key, value)):
                hits.setdefault(pid, f"{key!r}→{value!r} pairs words of problem {pid}")
        enough = len(hits) >= ctx.config.min_table_entries and (2 * len(hits) >= len(table.entries)
                                                                 or len(hits) >= 10)
        if enough and not _inside(ctx, table.node, flagged):
            flagged.add(id(table.node))
            yield Finding("suite_dict", table.line, f"table@{table.line}", f"a mapping has {len(hits)} of "
                          f"{len(table.entries)} entries tied to single bank problems "
                          f"({'; '.join(list(hits.values())[:2])}): dictionaries tuned to the bank are banned")
