"""The import graph follows the data flow documented in ``docs/architecture.md``.

Every module under ``shoparena/`` is parsed with :mod:`ast` (nothing is imported). The package order is read from
the ``import-order`` block of the document — the one place it lives — and the tests assert:

- no cycle among module-level imports (Tarjan's strongly connected components over modules);
- no import, module-level or deferred inside a function (or under ``TYPE_CHECKING``), from a package to one at
  the same or a higher layer of that order;
- :mod:`shoparena.sdk` stays standard-library-only at import, and the built-in agent files import nothing but the
  standard library, the SDK, the environment and the narrow sub-task prompts (they run inside the sandbox).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "shoparena"
DOC = ROOT / "docs" / "architecture.md"
#: Built-in agent files: they run in the sandbox (stdlib + these shoparena packages only).
SANDBOX_AGENTS = ("shoparena.agents.react", "shoparena.agents.oro7", "shoparena.agents.pipeline")
SANDBOX_ALLOWED = ("shoparena.sdk", "shoparena.env", "shoparena.llm.subtasks")


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    module_level: bool

    def __str__(self) -> str:
        where = "module level" if self.module_level else "deferred"
        return f"{self.src} (line {self.line}, {where}) imports {self.dst}"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _resolve(name: str) -> str:
    """The module (or package ``__init__``) that an imported dotted name lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _edges(module: str, path: Path) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: list[Edge] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [_resolve(a.name) for a in node.names if a.name.split(".")[0] == "shoparena"]
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            mod = ".".join([*base, *([node.module] if node.module else [])])
        else:
            mod = node.module or ""
        if mod.split(".")[0] != "shoparena":
            return []
        # ``from pkg import sub`` imports the submodule ``pkg.sub``; ``from mod import name`` imports ``mod``
        return [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else _resolve(mod) for a in node.names]

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.extend(Edge(module, t, child.lineno, module_level) for t in targets(child) if t != module)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                visit(child, False)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, False)
            else:
                visit(child, module_level)

    visit(tree, True)
    return out


EDGES = [e for m, p in MODULES.items() for e in _edges(m, p)]


def read_order(text: str) -> list[list[str]]:
    """Layers, bottom first, from the fenced block after ``<!-- import-order -->``: one layer per line,
    packages (or top-level modules) of a layer separated by spaces; ``#`` starts a comment."""
    m = re.search(r"<!-- import-order -->\s*```[^\n]*\n(.*?)```", text, re.S)
    if m is None:
        raise AssertionError(f"{DOC}: no ``<!-- import-order -->`` block")
    layers = [line.split("#")[0].split() for line in m.group(1).splitlines()]
    return [layer for layer in layers if layer]


LAYERS = read_order(DOC.read_text(encoding="utf-8"))
LAYER = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _unit(module: str) -> str:
    """The layered unit a module belongs to: ``shoparena.<pkg>`` → ``<pkg>``; the root ``__init__`` is ``shoparena``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "shoparena"


def test_every_package_is_placed_once() -> None:
    names = [n for layer in LAYERS for n in layer]
    assert len(names) == len(set(names)), f"placed twice in {DOC.name}: {sorted({n for n in names if names.count(n) > 1})}"
    units = {_unit(m) for m in MODULES}
    assert sorted(units - set(names)) == [], f"packages missing from the import order in {DOC.name}"
    assert sorted(set(names) - units) == [], f"the import order in {DOC.name} names packages that do not exist"


def test_every_layer_has_a_paragraph() -> None:
    text = DOC.read_text(encoding="utf-8")
    packages = [n for layer in LAYERS for n in layer if not n.startswith("_") and n not in {"shoparena", "__main__"}]
    missing = [n for n in packages if not re.search(rf"^#+ .*`{re.escape(n)}`", text, re.M)]
    assert missing == [], f"{DOC.name} has no section heading naming these packages: {missing}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components of more than one node, or with a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    out.append(sorted(comp))
    return out


def test_tarjan_finds_a_cycle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in EDGES:
        if e.module_level:
            graph[e.src].add(e.dst)
    cycles = strongly_connected(graph)
    detail = "\n".join(
        " ; ".join(str(e) for e in EDGES if e.module_level and e.src in comp and e.dst in comp) for comp in cycles)
    assert cycles == [], f"module-level import cycles:\n{detail}"


def test_no_import_against_the_data_flow() -> None:
    against = [f"{e} — {_unit(e.src)} (layer {LAYER[_unit(e.src)]}) may not import {_unit(e.dst)} "
               f"(layer {LAYER[_unit(e.dst)]})"
               for e in EDGES if _unit(e.src) != _unit(e.dst) and LAYER[_unit(e.dst)] >= LAYER[_unit(e.src)]]
    assert against == [], "imports against the order of docs/architecture.md:\n" + "\n".join(against)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    src = "import os\nfrom shoparena.cli import app\n\ndef f():\n    from shoparena.corpus.build import x\n"
    path = tmp_path / "m.py"
    path.write_text(src)
    edges = _edges("shoparena.catalog.m", path)
    assert [(e.dst, e.module_level) for e in edges] == [("shoparena.cli", True), ("shoparena.corpus.build", False)]
    assert all(LAYER[_unit(e.dst)] > LAYER["catalog"] for e in edges)


def _stdlib_only(path: Path, allowed: tuple[str, ...]) -> list[str]:
    """Module-level imports of ``path`` outside the stdlib and ``allowed`` (``try: import x / except ImportError``
    fallbacks are optional and allowed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Try):
            continue
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if any(name == a or name.startswith(a + ".") for a in allowed):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    return bad


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("shoparena.sdk")))
def test_sdk_is_stdlib_only_at_import(module: str) -> None:
    assert _stdlib_only(MODULES[module], ("shoparena.sdk",)) == []


@pytest.mark.parametrize("module", SANDBOX_AGENTS)
def test_builtin_agents_import_only_what_the_sandbox_has(module: str) -> None:
    assert _stdlib_only(MODULES[module], SANDBOX_ALLOWED) == []


#: Packages with a public top-level interface: the CLI imports them only through it.
PUBLIC = ("catalog", "tasks", "validator", "corpus")


def test_the_cli_uses_only_public_interfaces() -> None:
    private = [str(e) for e in EDGES if _unit(e.src) == "cli" and _unit(e.dst) in PUBLIC
               and e.dst != f"shoparena.{_unit(e.dst)}"]
    assert private == [], "the CLI reaches into private modules (import from the package instead):\n" + \
        "\n".join(private)


@pytest.mark.parametrize("package", PUBLIC)
def test_public_interface_is_lazy_and_complete(package: str) -> None:
    """Importing the package loads none of its modules; every ``__all__`` name then resolves to the object its
    module defines."""
    import importlib
    import subprocess

    probe = (f"import sys, shoparena.{package} as p; "
             f"print(sorted(m for m in sys.modules if m.startswith('shoparena.{package}.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", f"import shoparena.{package} loads {out.stdout.strip()}"
    pkg = importlib.import_module(f"shoparena.{package}")
    assert sorted(pkg.__all__) == sorted(pkg._EXPORTS) and set(pkg.__all__) <= set(dir(pkg))
    for name in pkg.__all__:
        module, _, attr = pkg._EXPORTS[name].partition(":")
        want = getattr(importlib.import_module(f"shoparena.{package}.{module}"), attr or name)
        got = getattr(pkg, name)
        assert got is want or got == want, f"shoparena.{package}.{name}"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pkg.nope  # noqa: B018
