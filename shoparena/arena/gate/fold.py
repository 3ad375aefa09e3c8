"""Constant folding: the value a literal-only expression has, without running anything.

Evasions build names and ids out of pieces (``"ev" + "al"``, ``"".join(["sys", "tem"])``, ``"4662950533"[::-1]``,
``bytes.fromhex("…").decode()``, ``3350000000 + 592664``, a module-level ``A = "33505"`` used later). The folder
evaluates exactly that subset: literals, containers, ``+ * % - ^ | & << >>`` on them, f-strings, slices,
str/bytes methods, ``chr``/``ord``/``int``/``str``/``bytes``/``reversed``/``map``, one-generator comprehensions
over folded iterables, decoders (base64, binascii, codecs, zlib & co., bounded) and names assigned exactly once in
the module. Everything else is :data:`UNKNOWN`. Sizes are capped so a hostile file cannot blow up the gate.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import lzma
import operator
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

UNKNOWN: Any = object()
_MAX_LEN = 1_000_000
_MAX_ITEMS = 10_000
_MAX_DEPTH = 40
_MAX_COMPREHENSION_ITEMS = 50_000
"""Comprehension items folded per file (nested comprehensions over big literals cannot stall the gate)."""
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
    ast.BitXor: operator.xor, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.FloorDiv: operator.floordiv,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_STR_METHODS = frozenset({
    "join", "format", "replace", "upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
    "encode", "decode", "title", "capitalize", "casefold", "swapcase", "zfill", "removeprefix", "removesuffix",
    "hex", "translate",
})
_BUILTINS: dict[str, Callable[..., Any]] = {
    "str": str, "int": int, "chr": chr, "ord": ord, "bytes": bytes, "bytearray": bytes, "list": list,
    "tuple": tuple, "reversed": lambda x: list(reversed(x)), "sorted": sorted, "hex": hex, "oct": oct, "bin": bin,
    "abs": abs, "len": len, "repr": repr,
}


def _bounded(factory: Callable[[], Any]) -> Callable[..., bytes]:
    """A decompressor that stops at the size cap (a decompression bomb cannot stall the gate)."""
    def run(data: Any, *_: Any) -> bytes:
        return bytes(factory().decompress(bytes(data), _MAX_LEN))
    return run


_SAFE_CODECS = frozenset({"rot13", "rot_13", "hex", "hex_codec", "base64", "base64_codec", "base_64", "utf-8",
                          "utf8", "ascii", "latin-1", "latin1", "utf-16", "utf-32", "uu", "quopri"})


def _codec(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(data: Any, encoding: str = "utf-8", *rest: Any) -> Any:
        if str(encoding).lower() not in _SAFE_CODECS:  # zlib_codec / bz2_codec have no size cap
            raise ValueError("codec not folded")
        return fn(data, encoding, *rest)
    return run


#: Qualified decoder name → function over folded arguments.
DECODERS: dict[str, Callable[..., Any]] = {
    "base64.b64decode": base64.b64decode, "base64.standard_b64decode": base64.standard_b64decode,
    "base64.urlsafe_b64decode": base64.urlsafe_b64decode, "base64.b32decode": base64.b32decode,
    "base64.b16decode": base64.b16decode, "base64.b85decode": base64.b85decode,
    "base64.a85decode": base64.a85decode, "base64.decodebytes": base64.decodebytes,
    "binascii.unhexlify": binascii.unhexlify, "binascii.a2b_hex": binascii.a2b_hex,
    "binascii.a2b_base64": binascii.a2b_base64, "codecs.decode": _codec(codecs.decode), "codecs.encode": _codec(codecs.encode),
    "zlib.decompress": _bounded(lambda: zlib.decompressobj(47)),
    "gzip.decompress": _bounded(lambda: zlib.decompressobj(47)), "bz2.decompress": _bounded(bz2.BZ2Decompressor),
    "lzma.decompress": _bounded(lzma.LZMADecompressor), "bytes.fromhex": bytes.fromhex,
    "builtins.bytes.fromhex": bytes.fromhex,
}


def single_assignments(by_type: Mapping[type, list[ast.AST]]) -> dict[str, ast.expr]:
    """Names bound exactly once in the whole module, by a plain ``NAME = expr`` (or annotated) assignment.
    ``by_type`` maps AST classes to their nodes (one pass over the tree, shared by the gate)."""
    counts: Counter[str] = Counter()
    for node in by_type.get(ast.Name, ()):
        if type(node.ctx) is not ast.Load:
            counts[node.id] += 1
    for node in by_type.get(ast.arg, ()):
        counts[node.arg] += 1
    for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        for node in by_type.get(kind, ()):
            counts[node.name] += 1
    for node in by_type.get(ast.alias, ()):
        counts[(node.asname or node.name).split(".")[0]] += 1
    values: dict[str, ast.expr] = {}
    for node in by_type.get(ast.Assign, ()):
        if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
            values[node.targets[0].id] = node.value
    for node in by_type.get(ast.AnnAssign, ()):
        if node.value is not None and type(node.target) is ast.Name:
            values[node.target.id] = node.value
    return {name: value for name, value in values.items() if counts[name] == 1}


class Folder:
    """Folds expressions of one module. ``qualname`` maps a call's function node to its qualified names (so
    ``b64decode`` imported under any alias is recognised); it is set by the resolver."""

    def __init__(self, by_type: Mapping[type, list[ast.AST]]) -> None:
        self.env = single_assignments(by_type)
        self.qualnames: Callable[[ast.expr], set[str]] = lambda _node: set()
        self._memo: dict[int, Any] = {}
        self._active: set[str] = set()
        self._steps = 0

    def fold(self, node: ast.AST | None, bound: dict[str, Any] | None = None, depth: int = 0) -> Any:
        """The constant value of ``node``, or :data:`UNKNOWN`."""
        if node is None or depth > _MAX_DEPTH:
            return UNKNOWN
        key = id(node)
        if bound is None and key in self._memo:
            return self._memo[key]
        try:
            value = self._fold(node, bound or {}, depth + 1)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError, LookupError,
                binascii.Error, zlib.error, lzma.LZMAError, OSError, RecursionError, UnicodeError, EOFError):
            value = UNKNOWN
        if value is not UNKNOWN and _too_big(value):
            value = UNKNOWN
        if bound is None:
            self._memo[key] = value
        return value

    def fold_str(self, node: ast.AST | None) -> str | None:
        value = self.fold(node)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return value if isinstance(value, str) else None

    def _fold(self, node: ast.AST, bound: dict[str, Any], depth: int) -> Any:
        f = lambda n: self.fold(n, bound or None, depth)  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, bound, depth)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [f(e) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) or len(items) > _MAX_ITEMS else items
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inner = f(v.value) if isinstance(v, ast.FormattedValue) else f(v)
                if inner is UNKNOWN:
                    return UNKNOWN
                parts.append(inner if isinstance(inner, str) else str(inner))
            return "".join(parts)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = f(node.left), f(node.right)
            if left is UNKNOWN or right is UNKNOWN or not _safe_binop(node.op, left, right):
                return UNKNOWN
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Invert | ast.UAdd):
            v = f(node.operand)
            if not isinstance(v, int | float) or isinstance(v, bool):
                return UNKNOWN
            return -v if isinstance(node.op, ast.USub) else (~v if isinstance(node.op, ast.Invert) else v)
        if isinstance(node, ast.Subscript):
            base, index = f(node.value), f(node.slice)
            return UNKNOWN if base is UNKNOWN or index is UNKNOWN else base[index]
        if isinstance(node, ast.Slice):
            parts = [f(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
            return UNKNOWN if UNKNOWN in parts else slice(*parts)
        if isinstance(node, ast.Call):
            return self._call(node, bound, depth)
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return self._comprehension(node, bound, depth)
        return UNKNOWN

    def _name(self, name: str, bound: dict[str, Any], depth: int) -> Any:
        if name in bound:
            return bound[name]
        if name in self.env and name not in self._active:
            self._active.add(name)
            try:
                return self.fold(self.env[name], None, depth)
            finally:
                self._active.discard(name)
        return UNKNOWN

    def _call(self, node: ast.Call, bound: dict[str, Any], depth: int) -> Any:
        f = lambda n: self.fold(n, bound or None, depth)  # noqa: E731
        func = node.func
        receiver: Any = UNKNOWN
        decoder = None
        if type(func) is ast.Attribute:
            if func.attr in _STR_METHODS:
                receiver = f(func.value)
            if not isinstance(receiver, str | bytes):
                decoder = next((DECODERS[n] for n in self.qualnames(func) if n in DECODERS), None)
                if decoder is None and not (func.attr == "fromhex" and type(func.value) is ast.Name
                                            and func.value.id == "bytes"):
                    return UNKNOWN  # not a call the folder evaluates: don't fold its arguments
        elif type(func) is not ast.Name or (func.id not in _BUILTINS and func.id != "map"):
            return UNKNOWN
        if any(isinstance(a, ast.Starred) for a in node.args):
            return UNKNOWN
        args = [f(a) for a in node.args]
        kwargs = {k.arg: f(k.value) for k in node.keywords if k.arg}
        if UNKNOWN in args or UNKNOWN in kwargs.values() or len(kwargs) != len(node.keywords):
            return UNKNOWN
        if isinstance(receiver, str | bytes):
            if func.attr == "join":
                args = [[a.decode() if isinstance(a, bytes) else a for a in args[0]]] if args else args
            return getattr(receiver, func.attr)(*args, **kwargs)
        if decoder is not None:
            return decoder(*args, **kwargs)
        if type(func) is ast.Attribute:  # bytes.fromhex(...)
            return bytes.fromhex(*args)
        names = self.qualnames(func)
        if func.id == "map":
            fn = _BUILTINS.get(node.args[0].id) if len(node.args) == 2 and isinstance(node.args[0], ast.Name) \
                else None
            return [fn(x) for x in args[1]] if fn and isinstance(args[1], list | str | bytes) else UNKNOWN
        if names and f"builtins.{func.id}" not in names:
            return UNKNOWN  # a local function that shadows the builtin
        if func.id == "bytes" and args and isinstance(args[0], str) and len(args) == 1:
            return UNKNOWN
        return _BUILTINS[func.id](*args, **kwargs)

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp, bound: dict[str, Any],
                       depth: int) -> Any:
        if len(node.generators) != 1 or node.generators[0].ifs or not isinstance(node.generators[0].target,
                                                                                  ast.Name):
            return UNKNOWN
        gen = node.generators[0]
        items = self.fold(gen.iter, bound or None, depth)
        if not isinstance(items, list | tuple | str | bytes) or len(items) > _MAX_ITEMS:
            return UNKNOWN
        out = []
        for item in items:
            self._steps += 1
            if self._steps > _MAX_COMPREHENSION_ITEMS:
                return UNKNOWN
            value = self.fold(node.elt, {**bound, gen.target.id: item}, depth)
            if value is UNKNOWN:
                return UNKNOWN
            out.append(value)
        return out


def _safe_binop(op: ast.operator, left: Any, right: Any) -> bool:
    if isinstance(op, ast.Mult):
        n = right if isinstance(right, int) else left
        other = left if n is right else right
        if isinstance(other, str | bytes | list) and (not isinstance(n, int) or n * len(other) > _MAX_LEN):
            return False
    if isinstance(op, ast.LShift) and isinstance(right, int) and right > 256:
        return False
    return True


def _too_big(value: Any) -> bool:
    if isinstance(value, str | bytes | list | tuple):
        return len(value) > _MAX_LEN
    if isinstance(value, int):
        return value.bit_length() > 4096
    return False
