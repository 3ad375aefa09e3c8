"""Name resolution: which modules, functions and builtins an expression can refer to, whatever it is called.

Evasions rename (``import subprocess as sp``, ``from os import system as s``, ``e = eval``), go through
namespaces (``__builtins__.__dict__["__import__"]``, ``globals()["__builtins__"]``, ``vars(builtins)``,
``sys.modules["os"]``), look names up at run time (``getattr(__builtins__, "ev" + "al")``,
``importlib.import_module("sub" + "process")``) or wrap (``(lambda: eval)()``, ``x or eval``). The resolver maps
each expression to the set of *qualified names* it may denote (``builtins.eval``, ``os.system``), following
imports, flow-insensitive assignments (a name assigned from several places gets the union), namespace subscripts
and ``getattr`` / ``__import__`` / ``import_module`` calls whose name argument folds to a constant. A namespace
looked up with a name that does not fold resolves to ``<ns>.<dynamic>``, which the rules report as dynamic access.
"""

from __future__ import annotations

import ast
import builtins
from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from shoparena.arena.gate.astutil import children
from shoparena.arena.gate.fold import UNKNOWN, Folder

BUILTIN_NAMES: frozenset[str] = frozenset(dir(builtins))
DYNAMIC = "<dynamic>"
GLOBALS = "<globals>"
_GETATTR = frozenset({"builtins.getattr", "builtins.object.__getattribute__", "builtins.type.__getattribute__",
                      "inspect.getattr_static"})
_IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
_NAMESPACE_GETTERS = frozenset({"get", "__getitem__", "pop", "setdefault"})


MAX_DEPTH = 150
"""Nesting (attribute chains, calls, subscripts) the resolver follows; deeper code is rejected as too complex."""


MAX_ALIAS_ROUNDS = 50
"""Rounds of alias propagation (one per backward link of a chain like ``c = b; b = a; a = sys``)."""


class TooComplex(Exception):
    """An expression nests deeper than :data:`MAX_DEPTH`: the file cannot be analysed, so it is rejected."""


class Imported(NamedTuple):
    """One name an import statement binds: ``qualname`` is what it refers to (``os.system`` for
    ``from os import system as s``), ``local`` the name bound, ``line`` the statement's line."""

    qualname: str
    local: str
    line: int
    is_module: bool
    """``import X`` (a module object) rather than ``from X import y``."""


class Resolver:
    """Resolution over one parsed module. Builds the alias table once; :meth:`qualnames` is memoised."""

    def __init__(self, tree: ast.Module, folder: Folder, by_type: Mapping[type, list[ast.AST]],
                 parents: dict[int, ast.AST]) -> None:
        self.tree = tree
        self.folder = folder
        folder.qualnames = self.qualnames
        self.by_type = by_type
        self.parents = parents
        self.imports: list[Imported] = []
        self.aliases: dict[str, set[str]] = defaultdict(set)
        self._collect_imports()
        self.import_bound = frozenset(i.local for i in self.imports)
        self.shadowed = self._module_level_bindings()
        self._memo: dict[int, frozenset[str]] = {}
        self._depth = 0
        self._collect_assignments()

    # -- public ---------------------------------------------------------------------------------------------
    def qualnames(self, node: ast.AST) -> set[str]:
        """Every qualified name ``node`` may denote (empty when it denotes none we track)."""
        key = id(node)
        if key not in self._memo:
            self._memo[key] = frozenset()  # cycle guard
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise TooComplex(f"expression nested deeper than {MAX_DEPTH} levels at line "
                                     f"{getattr(node, 'lineno', '?')}")
                self._memo[key] = frozenset(self._resolve(node))
            finally:
                self._depth -= 1
        return set(self._memo[key])

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def is_namespace(self, node: ast.AST) -> bool:
        """True when ``node`` denotes a module, an imported object, builtins or a namespace dict."""
        for q in self.qualnames(node):
            root = q.split(".")[0]
            if q in ("builtins", GLOBALS) or q.endswith(".__dict__") or root in self._module_roots:
                return True
            if any(q == i.qualname for i in self.imports):
                return True
        return False

    # -- construction ---------------------------------------------------------------------------------------
    def _of(self, *kinds: type) -> list[ast.AST]:
        return [n for k in kinds for n in self.by_type.get(k, ())]

    def _collect_imports(self) -> None:
        for node in self._of(ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    bound = alias.name if alias.asname else alias.name.split(".")[0]
                    self.imports.append(Imported(alias.name, local, node.lineno, True))
                    self.aliases[local].add(bound)
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    qual = f"{module}.{alias.name}" if module else alias.name
                    local = alias.asname or alias.name
                    self.imports.append(Imported(qual, local, node.lineno, False))
                    if alias.name != "*":
                        self.aliases[local].add(qual)
        self._module_roots = frozenset(i.local for i in self.imports if i.is_module)

    def _module_level_bindings(self) -> frozenset[str]:
        """Names bound by unconditional module-level statements (they shadow a builtin of the same name),
        minus any name that is ever deleted (``del eval`` brings the builtin back)."""
        bound: set[str] = set(self.import_bound)
        for stmt in self.tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        deleted = {n.id for stmt in self._of(ast.Delete) for t in stmt.targets for n in ast.walk(t)
                   if isinstance(n, ast.Name)}
        return frozenset(bound - deleted)

    def _collect_assignments(self) -> None:
        pairs: list[tuple[str, ast.expr]] = []
        for node in self._of(ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension,
                             ast.withitem):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs.extend(_bind(target, node.value))
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                pairs.extend(_bind(node.target, node.value))
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and isinstance(node.target, ast.Name):
                if isinstance(node.iter, ast.List | ast.Tuple | ast.Set):
                    pairs.extend((node.target.id, elt) for elt in node.iter.elts)
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                pairs.append((node.optional_vars.id, node.context_expr))
        # only values that can denote something tracked: a name bound by an import, a builtin, or another alias
        targets = {name for name, _ in pairs}
        tracked = self.import_bound | BUILTIN_NAMES | targets | {"__builtins__"}
        pairs = [(name, value) for name, value in pairs if _mentions(value, tracked)]
        for _ in range(MAX_ALIAS_ROUNDS):  # fixpoint over alias chains in any order (c = b; b = a; a = sys)
            changed = False
            self._memo.clear()
            for name, value in pairs:
                found = self.qualnames(value) - self.aliases[name]
                if found:
                    self.aliases[name] |= found
                    changed = True
            if not changed:
                break
        else:
            raise TooComplex(f"alias chains longer than {MAX_ALIAS_ROUNDS} assignments")
        self._memo.clear()

    # -- resolution -----------------------------------------------------------------------------------------
    def _resolve(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.qualnames(node.value)}
        if isinstance(node, ast.Subscript):
            return self._lookup(self.qualnames(node.value), node.slice)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.IfExp):
            return self.qualnames(node.body) | self.qualnames(node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self.qualnames(v) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            return self.qualnames(node.value)
        if isinstance(node, ast.Lambda):
            return set()
        return set()

    def _name(self, name: str) -> set[str]:
        if name == "__builtins__":
            return {"builtins"}
        found = set(self.aliases.get(name, ()))
        if name in BUILTIN_NAMES and name not in self.shadowed:
            found.add(f"builtins.{name}")
        return found

    def _lookup(self, bases: set[str], key_node: ast.AST) -> set[str]:
        """``base[key]`` / ``base.get(key)`` on a namespace (module dict, globals, builtins, sys.modules)."""
        key = self.folder.fold(key_node)
        out: set[str] = set()
        for q in bases:
            if q == GLOBALS:
                out |= self._name(key) if isinstance(key, str) else {f"{GLOBALS}.{DYNAMIC}"}
            elif q.endswith(".__dict__"):
                out.add(f"{q[:-9]}.{key}" if isinstance(key, str) else f"{q}.{DYNAMIC}")
            elif q == "builtins":
                out.add(f"builtins.{key}" if isinstance(key, str) else f"builtins.{DYNAMIC}")
            elif q == "sys.modules":
                out.add(key if isinstance(key, str) else f"sys.modules.{DYNAMIC}")
        return out

    def _call(self, node: ast.Call) -> set[str]:
        func = node.func
        if isinstance(func, ast.Lambda):
            return self.qualnames(func.body)
        names = self.qualnames(func)
        args = node.args
        out: set[str] = set()
        if names & _GETATTR and len(args) >= 2:
            attr = self.folder.fold(args[1])
            for q in self.qualnames(args[0]):
                out.add(f"{q}.{attr}" if isinstance(attr, str) else f"{q}.{DYNAMIC}")
        if names & _IMPORTERS and args:
            mod = self.folder.fold(args[0])
            if isinstance(mod, str):
                out |= {mod, mod.split(".")[0]}
            else:
                out.add(f"importlib.{DYNAMIC}")
        if "builtins.vars" in names:
            out |= {f"{q}.__dict__" for q in self.qualnames(args[0])} if args else {GLOBALS}
        if names & {"builtins.globals", "builtins.locals"}:
            out.add(GLOBALS)
        if isinstance(func, ast.Attribute) and func.attr in _NAMESPACE_GETTERS and args:
            out |= self._lookup(self.qualnames(func.value), args[0])
        return out


def _mentions(node: ast.AST, names: frozenset[str] | set[str]) -> bool:
    """True when a name in ``names`` occurs in ``node``'s subtree."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is ast.Name and n.id in names:
            return True
        stack.extend(children(n))
    return False


def _bind(target: ast.AST, value: ast.AST) -> list[tuple[str, ast.expr]]:
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
            and len(target.elts) == len(value.elts):
        return [pair for t, v in zip(target.elts, value.elts, strict=True) for pair in _bind(t, v)]
    return []


def folded_name(folder: Folder, node: ast.AST | None) -> str | None:
    """The constant string a name argument folds to, else None."""
    value = folder.fold(node) if node is not None else UNKNOWN
    return value if isinstance(value, str) else None
