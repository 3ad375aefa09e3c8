"""``check_submission``: the submission gate's one entry point (docs/arena.md §2.1, §2.3).

Order: size (≤ 1 MB) → UTF-8 → ``ast.parse`` → ``agent_main`` defined → security and integrity rules →
similarity to released agents. A file that is too big or not UTF-8 is not analysed further; a file that does not
parse still gets the text-only integrity rules (GT ids, encoded ids, copied phrases), so a deliberately broken
file cannot leak answers at the cheaper cooldown.
"""

from __future__ import annotations

import ast
import gc
from collections.abc import Mapping, Sequence

from shoparena.arena.gate import integrity, security, tables  # noqa: F401  (register their rules)
from shoparena.arena.gate.phrases import PhraseIndex
from shoparena.arena.gate.resolve import TooComplex
from shoparena.arena.gate.rules import Context, declare, run_rules
from shoparena.arena.gate.similarity import most_similar
from shoparena.arena.gate.types import GateConfig, GateReport, Violation

declare("too_large", "format", "the file is larger than the upload limit (1 MB)", needs_ast=False)
declare("not_utf8", "format", "the file is not valid UTF-8", needs_ast=False)
declare("syntax_error", "format", "ast.parse fails (the line of the error is reported)", needs_ast=False)
declare("too_complex", "format", "expressions nested too deeply to parse or analyse", needs_ast=False)
declare("missing_agent_main", "format", "no module-level agent_main (def, assignment or import)")
declare("copied_agent", "integrity", "code similarity to a released agent at or above the threshold (0.9)")


def check_submission(code: str | bytes, *, phrases: PhraseIndex | None = None,
                     product_ids: set[str] | frozenset[str] | None = None,
                     released: Mapping[str, str] | Sequence[str] = (),
                     config: GateConfig | None = None) -> GateReport:
    """Run the gate over one agent file. ``phrases`` indexes every bank (bank-aware integrity rules run only
    with it, or with extra ``product_ids``); ``released`` are the sources of released agents (name → source, or
    a sequence) for the ``copied_agent`` check.

    The cyclic garbage collector is paused for the duration: a 1 MB file is ~200k AST nodes, and collections
    that traverse them made up a third of the time (nothing the gate builds needs cycle collection)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _check(code, phrases, product_ids, released, config or GateConfig())
    finally:
        if enabled:
            gc.enable()


def _check(code: str | bytes, phrases: PhraseIndex | None, product_ids: set[str] | frozenset[str] | None,
           released: Mapping[str, str] | Sequence[str], config: GateConfig) -> GateReport:
    raw = code.encode("utf-8", "surrogatepass") if isinstance(code, str) else bytes(code)
    if len(raw) > config.max_bytes:
        return GateReport.from_violations([_format("too_large", 0, f"the file has {len(raw):,} bytes; the limit "
                                                   f"is {config.max_bytes:,}")])
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return GateReport.from_violations([_format("not_utf8", line, f"byte {exc.start} is not valid UTF-8 "
                                                   f"({exc.reason}); agent files must be UTF-8")])
    source = source.removeprefix("\ufeff")
    violations: list[Violation] = []
    try:
        tree: ast.Module | None = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        tree = None
        line = getattr(exc, "lineno", None) or 0
        violations.append(_format("syntax_error", line, f"the file does not parse: {getattr(exc, 'msg', exc)}"))
    except (RecursionError, MemoryError):
        tree = None
        violations.append(_format("too_complex", 0, "the file nests too deeply for the parser"))
    if tree is not None and not _defines_agent_main(tree):
        violations.append(_format("missing_agent_main", 0, "no module-level `agent_main` is defined; the "
                                  "validator calls agent_main(problem_data) -> list of steps"))
    ids = frozenset(product_ids or ())
    try:
        violations.extend(run_rules(Context(source, tree, config=config, index=phrases, extra_ids=ids)))
    except (TooComplex, RecursionError) as exc:
        violations.append(_format("too_complex", 0, f"the file cannot be analysed ({exc or 'nesting too deep'}); "
                                  "simplify the code"))
        violations.extend(run_rules(Context(source, None, config=config, index=phrases, extra_ids=ids)))
    similarity, similar_to = None, None
    if released and tree is not None:
        similarity, similar_to = most_similar(tree, released)
        if similarity >= config.similarity_threshold:
            violations.append(Violation(rule="copied_agent", severity="integrity", line=0,
                                        message=f"the code is {similarity:.0%} similar to released agent "
                                        f"{similar_to} (threshold {config.similarity_threshold:.0%}): "
                                        "resubmitting another miner's released agent is not allowed"))
    return GateReport.from_violations(violations, similarity=similarity, similar_to=similar_to)


def _format(rule_id: str, line: int, message: str) -> Violation:
    return Violation(rule=rule_id, severity="format", message=message, line=line)


def _defines_agent_main(tree: ast.Module) -> bool:
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "agent_main":
            return True
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "agent_main" for t in targets):
                return True
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name) == "agent_main" for a in stmt.names):
                return True
        if isinstance(stmt, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(stmt, block, []) or [])
        if isinstance(stmt, ast.ExceptHandler):
            stack.extend(stmt.body)
    return False
