"""Integrity rules (severity ``integrity`` → full cooldown): answers carried in the file (docs/arena.md §2.3).

Bank-aware rules need a :class:`~shoparena.arena.gate.phrases.PhraseIndex` of every bank (or extra product ids);
structural ones (``id_list``, ``obfuscation_import``, hash-keyed tables) run without. Texts scanned are the raw
source (so comments and docstrings an agent could read back through ``__file__`` count), every string constant
and the value of every foldable expression (``"3350" + "592664"``, ``"".join([...])``, ``bytes.fromhex(…)``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from shoparena.arena.gate import policy
from shoparena.arena.gate.decode import decoded_forms, id_forms, windows
from shoparena.arena.gate.rules import Context, Finding, TextSource, rule, snippet
from shoparena.arena.gate.security import policy_hits

_MASK_BUDGET = 200_000


@rule("product_id", "integrity", "a GT product id of any bank problem as a literal (string, number, inside a "
      "longer string, a comment or a docstring)", needs_bank=True, needs_ast=False)
def product_id(ctx: Context) -> Iterator[Finding]:
    assert ctx.index is not None or ctx.extra_ids
    for src in ctx.texts:
        for gt, offset in _ids_in(ctx, src.text):
            if src.kind == "folded":
                continue  # an id that only a folded expression shows is an encoded id, reported there
            yield Finding("product_id", src.line_at(offset), gt, f"GT product id {gt}{_of(ctx, gt)} appears "
                          f"in the {_where(src.kind)}: ground-truth ids may not be shipped with an agent")


@rule("encoded_id", "integrity", "a GT product id hidden: built from pieces, split into digit groups, reversed, "
      "padded, base64 / base32 / hex / base-36 encoded (also compressed), or masked with another literal",
      needs_bank=True, needs_ast=False)
def encoded_id(ctx: Context) -> Iterator[Finding]:
    lengths = frozenset(len(i) for i in _all_ids(ctx))
    plain = {gt for gt, _ in _ids_in(ctx, ctx.source)}  # reported as product_id already
    for src in ctx.texts:
        if src.kind == "folded":
            for gt, offset in _ids_in(ctx, src.text):
                if gt not in plain:
                    yield _encoded(src.line_at(offset), gt, ctx, "built from literal pieces")
        for decoded, offset, how in _decoded(ctx, src):
            for gt, _ in _ids_in(ctx, decoded):
                yield _encoded(src.line_at(offset), gt, ctx, how)
        for digits, start, end, how in id_forms(src.text):
            for window in windows(digits, lengths):
                if ctx.is_gt_id(window) and not _plain_in(src.text[start:end], window):
                    yield _encoded(src.line_at(start), window, ctx, how)
    yield from _masked(ctx)


def _decoded(ctx: Context, src: TextSource) -> list[tuple[str, int, str]]:
    """:func:`decoded_forms` of a text, computed once per check (ids and phrases both look at them)."""
    memo: dict[int, list[tuple[str, int, str]]] = ctx.cache.setdefault("decoded", {})
    if id(src) not in memo:
        memo[id(src)] = list(decoded_forms(src.text))
    return memo[id(src)]


def _plain_in(span: str, gt: str) -> bool:
    """True when the id stands in plain digits in ``span`` (then it is a ``product_id``, not encoded)."""
    return re.search(rf"(?<![0-9]){gt}(?![0-9])", span) is not None


def _masked(ctx: Context) -> Iterator[Finding]:
    """``id ^ k``, ``id - k``, ``id + k`` for pairs of int literals (bounded): a masked table of ids."""
    if ctx.tree is None:
        return
    ints = [(n.value, n.lineno) for n in ctx.of_type(ast.Constant) if type(n.value) is int]
    big = [(v, line) for v, line in ints if abs(v) >= 10**5]
    keys = sorted({v for v, _ in ints if v})
    if not big or len(big) * len(keys) > _MASK_BUDGET:
        return
    for value, line in big:
        for k in keys:
            for combined, how in ((value ^ k, "xor-masked"), (value - k, "offset"), (value + k, "offset")):
                if combined > 0 and ctx.is_gt_id(str(combined)):
                    yield _encoded(line, str(combined), ctx, f"{how} with {k}")


def _encoded(line: int, gt: str, ctx: Context, how: str) -> Finding:
    return Finding("encoded_id", line, gt, f"GT product id {gt}{_of(ctx, gt)} is hidden in the file ({how}): "
                   "encoded ground-truth ids are answer leakage")


def _all_ids(ctx: Context) -> frozenset[str]:
    ids = set(ctx.extra_ids)
    if ctx.index is not None:
        ids.update(ctx.index.ids)
    return frozenset(ids)


def _ids_in(ctx: Context, text: str) -> Iterator[tuple[str, int]]:
    if ctx.index is not None:
        yield from ctx.index.ids_in(text, ctx.extra_ids)
    else:
        for m in re.finditer(r"(?<![0-9])[0-9]{6,12}(?![0-9])", text):
            if m.group() in ctx.extra_ids:
                yield m.group(), m.start()


def _of(ctx: Context, gt: str) -> str:
    pid = ctx.gt_problem(gt)
    return f" (problem {pid})" if pid else ""


def _where(kind: str) -> str:
    return {"source": "source text", "literal": "string literal", "folded": "value of an expression"}[kind]


@rule("verbatim_phrase", "integrity", "a ≥ 6-word, ≥ 30-character phrase of any bank query, GT title or answer "
      "with ≥ 2 content words (case, spacing, punctuation normalised; template text shared by ≥ 3 problem groups "
      "excepted)",
      needs_bank=True, needs_ast=False)
def verbatim_phrase(ctx: Context) -> Iterator[Finding]:
    index = ctx.index
    if index is None:
        return
    for src in ctx.texts:
        texts = [(src.text, None)] + [(t, (off, how)) for t, off, how in _decoded(ctx, src)]
        for text, encoded in texts:
            for hit in index.phrases_in(text):
                line = src.line_at(encoded[0] if encoded else hit.start)
                how = f" ({encoded[1]}-encoded)" if encoded else ""
                yield Finding("verbatim_phrase", line, hit.phrase,
                              f"{_where(src.kind)} copies the phrase {_quote(hit.phrase)}{how} from problem "
                              f"{hit.problem_id}: bank queries and titles may not be embedded")


def _quote(text: str, limit: int = 70) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


@rule("obfuscation_import", "integrity", "decoders used to hide embedded data: base64, binascii, codecs, zlib, "
      "lzma, bz2, gzip, zipfile, tarfile, quopri, uu, marshal (imported or reached by name)")
def obfuscation_import(ctx: Context) -> Iterator[Finding]:
    r = ctx.resolver
    assert r is not None
    imported = set()
    for imp in r.imports:
        if policy.is_obfuscation(imp.qualname):
            imported.add(imp.qualname.split(".")[0])
            yield Finding("obfuscation_import", imp.line, imp.qualname.split(".")[0],
                          f"import of `{imp.qualname}`: decoders are banned in agents, they hide embedded answers")
    seen = {f.key for f in policy_hits(ctx)}
    for node in ctx.of_type(ast.Call, ast.Subscript, ast.Attribute):
        for q in r.qualnames(node):
            parts = q.split(".")
            hit = next((p for i, p in enumerate(parts) if p in policy.OBFUSCATION and (i or p not in imported)),
                       None)
            if hit and q not in seen:
                yield Finding("obfuscation_import", node.lineno, hit,
                              f"`{snippet(node)}` reaches the decoder module `{hit}` without importing it")
