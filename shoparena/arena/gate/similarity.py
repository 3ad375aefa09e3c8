"""Code similarity against released agents: normalised AST token shingles, winnowed, compared by Jaccard
(or containment, for a released agent padded with new code).

A copied agent survives renaming, reformatting, new comments and docstrings, changed string contents and
changed constants, so the fingerprint ignores all of them: the AST is walked in pre-order emitting node types,
attribute names (the SDK / library API a program calls, which a copier cannot rename) and imported module names,
while local identifiers, strings and numbers become placeholders. Shingles of ``k`` tokens are hashed with CRC-32
(deterministic across processes) and winnowed (the minimum hash of every window of ``w`` shingles, Schleimer et
al. 2003), which keeps the fingerprint small and guarantees any shared run of ``k + w - 1`` tokens is seen.
"""

from __future__ import annotations

import ast
import functools
import zlib
from collections.abc import Iterator, Mapping, Sequence

K = 10
W = 6
MIN_CONTAINED = 50


def ast_tokens(tree: ast.AST) -> Iterator[str]:
    """Pre-order normalised tokens of a module (docstrings dropped)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        children = list(ast.iter_child_nodes(node))
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            children = [c for c in children if c is not body[0]]
        if isinstance(node, ast.expr_context):
            continue
        yield type(node).__name__
        if isinstance(node, ast.Attribute):
            yield "." + node.attr
        elif isinstance(node, ast.alias):
            yield "import " + node.name
        elif isinstance(node, ast.ImportFrom):
            yield "from " + (node.module or "")
        elif isinstance(node, ast.Constant):
            yield type(node.value).__name__
        stack.extend(reversed(children))


def fingerprint(code: str | ast.AST) -> frozenset[int]:
    """The winnowed shingle hashes of a source (or parsed tree); empty for unparsable code. Sources are cached
    (released agents are compared against every submission)."""
    if isinstance(code, str):
        return _source_fingerprint(code)
    return _fingerprint(code)


@functools.lru_cache(maxsize=512)
def _source_fingerprint(code: str) -> frozenset[int]:
    try:
        return _fingerprint(ast.parse(code))
    except (SyntaxError, ValueError):
        return frozenset()


def _fingerprint(code: ast.AST) -> frozenset[int]:
    ids = [zlib.crc32(t.encode()) for t in ast_tokens(code)]
    if len(ids) < K:
        return frozenset({zlib.crc32(repr(ids).encode())}) if ids else frozenset()
    hashes = []
    for i in range(len(ids) - K + 1):
        h = 0
        for t in ids[i:i + K]:
            h = (h * 1_000_003 + t) & 0xFFFFFFFFFFFF
        hashes.append(h)
    if len(hashes) <= W:
        return frozenset({min(hashes)})
    return frozenset(min(hashes[i:i + W]) for i in range(len(hashes) - W + 1))


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def score(mine: frozenset[int], released: frozenset[int]) -> float:
    """Jaccard, or the share of the released agent found in the submission when that is higher and the
    released agent is big enough (≥ :data:`MIN_CONTAINED` fingerprints): a copy padded with new code to dilute
    the Jaccard is still a copy, while a tiny reference agent does not make every agent built on it one."""
    value = jaccard(mine, released)
    if len(released) >= MIN_CONTAINED:
        value = max(value, len(mine & released) / len(released))
    return value


def most_similar(code: str | ast.AST, released: Mapping[str, str] | Sequence[str]) -> tuple[float, str | None]:
    """``(similarity, name)`` of the released agent closest to ``code`` (``(0.0, None)`` when none).

    ``released`` maps names to sources, or is a sequence of sources named ``released[i]``. Ties go to the
    first name in sorted order, so the answer is deterministic."""
    items = released.items() if isinstance(released, Mapping) else (
        (f"released[{i}]", src) for i, src in enumerate(released))
    mine = fingerprint(code)
    best, name = 0.0, None
    for other_name, src in sorted(items):
        value = score(mine, fingerprint(src))
        if value > best:
            best, name = value, other_name
    return round(best, 4), name
