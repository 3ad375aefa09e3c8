"""Security rules (severity ``security`` → reduced cooldown): what the sandbox would have to stop.

One shared pass judges every import and every *reference* (a name, attribute chain, namespace subscript or
``getattr`` / ``__import__`` call, resolved by :mod:`~shoparena.arena.gate.resolve`) against
:mod:`~shoparena.arena.gate.policy`. Judging references, not only calls, is what defeats aliasing and wrapping:
``e = eval`` is reported where ``eval`` is named, ``functools.partial(eval)``, ``map(eval, …)``, ``@eval`` too.
A reference rooted at an import that was already reported is not reported again.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shoparena.arena.gate import policy
from shoparena.arena.gate.resolve import DYNAMIC
from shoparena.arena.gate.rules import Context, Finding, rule, snippet

_GETATTR_FAMILY = frozenset({"builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr",
                             "inspect.getattr_static", "builtins.object.__getattribute__"})
_CORE_DANGEROUS = frozenset({"eval", "exec", "compile", "__import__", "system", "popen", "__dict__", "modules",
                             "__builtins__", "import_module", *policy.ESCAPE_ATTRS})
_MODE_LIKE = frozenset("rwxabtU+")


_REFERENCES = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)


def _is_reference(node: ast.AST, ctx: Context) -> bool:
    """A load of a name / attribute chain / subscript / call that is not itself the base of an attribute."""
    if type(node) is not ast.Call and type(node.ctx) is not ast.Load:
        return False
    parent = ctx.parents.get(id(node))
    return not (type(parent) is ast.Attribute and parent.value is node)


def _chain_root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _describe(node: ast.AST, qualname: str, why: str) -> str:
    text = snippet(node)
    if text == qualname:
        return f"`{qualname}` is banned: it {why}"
    return f"`{text}` resolves to `{qualname}`, which is banned: it {why}"


def policy_hits(ctx: Context) -> list[Finding]:
    """The shared pass: imports and references judged by :func:`policy.classify` (cached on the context)."""
    if "policy" in ctx.cache:
        return ctx.cache["policy"]
    r = ctx.resolver
    assert r is not None
    out: list[Finding] = []
    reported_locals: set[str] = set()
    for imp in r.imports:
        verdict = policy.classify(imp.qualname.removesuffix(".*"))
        if verdict and (imp.qualname.endswith(".*") or not policy.is_partial(imp.qualname)):
            rule_id = "banned_import" if verdict[0] == "dynamic_access" else verdict[0]  # `import builtins`
            out.append(Finding(rule_id, imp.line, imp.qualname,
                               f"import of `{imp.qualname}` is banned: it {verdict[1]}"))
            reported_locals.add(imp.local)
    for node in ctx.of_type(*_REFERENCES):
        if not _is_reference(node, ctx) or _chain_root(node) in reported_locals:
            continue
        for q in sorted(r.qualnames(node)):
            verdict = policy.classify(q)
            if verdict is None and (DYNAMIC in q or ".__dict__" in q):
                verdict = ("dynamic_access", "reads a module namespace by a name that is only known at run time")
            if verdict:
                out.append(Finding(verdict[0], node.lineno, q, _describe(node, q, verdict[1])))
        if type(node) is ast.Call and type(node.func) is ast.Attribute \
                and node.func.attr in policy.DANGEROUS_METHODS:
            rule_id, why = policy.DANGEROUS_METHODS[node.func.attr]
            out.append(Finding(rule_id, node.lineno, f".{node.func.attr}",
                               f"`{snippet(node)}` calls .{node.func.attr}(), which is banned: it {why}"))
    ctx.cache["policy"] = out
    return out


@rule("banned_import", "security", "process, native-code, deserialisation, file-system and dynamic-code modules "
      "(os beyond os.path/os.environ/os.getenv, subprocess, multiprocessing, pty, ctypes, cffi, pickle, marshal, "
      "shutil, tempfile, importlib, code, pdb, inspect, sys.modules, …), imported or reached by any name")
def banned_import(ctx: Context) -> Iterator[Finding]:
    return (f for f in policy_hits(ctx) if f.rule == "banned_import")


@rule("raw_network", "security", "sockets and HTTP clients (socket, ssl, http, urllib except urllib.parse, "
      "requests, httpx, aiohttp, asyncio.open_connection, …): the only peer is the gateway, via shoparena.sdk")
def raw_network(ctx: Context) -> Iterator[Finding]:
    return (f for f in policy_hits(ctx) if f.rule == "raw_network")


@rule("banned_call", "security", "eval, exec, compile, __import__, breakpoint, help, however named or reached")
def banned_call(ctx: Context) -> Iterator[Finding]:
    return (f for f in policy_hits(ctx) if f.rule == "banned_call")


@rule("harness_import", "security", "shoparena internals (files, store, arena, CLI, problem loader, gateway "
      "server) instead of the agent SDK (shoparena.sdk, shoparena.env, shoparena.llm.subtasks)")
def harness_import(ctx: Context) -> Iterator[Finding]:
    return (f for f in policy_hits(ctx) if f.rule == "harness_import")


@rule("file_write", "security", "open() / io / codecs / gzip / tarfile / zipfile in a write, append, create or "
      "non-literal mode; Path.write_text / write_bytes / touch / mkdir / unlink …; logging to files")
def file_write(ctx: Context) -> Iterator[Finding]:
    r, folder = ctx.resolver, ctx.folder
    assert r is not None and folder is not None
    yield from (f for f in policy_hits(ctx) if f.rule == "file_write")
    for node in ctx.of_type(ast.Call):
        assert isinstance(node, ast.Call)
        names, func = r.qualnames(node.func), node.func
        opener = next((policy.OPENERS[x] for n in sorted(names) for x in policy.suffixes(n)
                       if x in policy.OPENERS), None)
        if opener is not None or (isinstance(func, ast.Attribute) and func.attr == "open"):
            mode_node = _mode_arg(node, opener if opener is not None else 0)
            if mode_node is None:
                continue
            mode = folder.fold(mode_node)
            keyword = any(k.value is mode_node for k in node.keywords)
            if opener is None and not keyword and not (isinstance(mode, str) and set(mode) <= _MODE_LIKE):
                continue  # `x.open(path)` on an unknown receiver: the first argument is not a mode
            if not isinstance(mode, str):
                yield Finding("file_write", node.lineno, "mode:dynamic",
                              f"`{snippet(node)}` opens a file with a mode computed at run time (only literal "
                              "read modes can be checked; writes are banned)")
            elif set(mode) & policy.WRITE_MODE_CHARS:
                yield Finding("file_write", node.lineno, f"mode:{mode}",
                              f"`{snippet(node)}` opens a file in mode {mode!r}: file writes are banned")
        elif isinstance(func, ast.Attribute) and func.attr in policy.WRITE_METHODS:
            yield Finding("file_write", node.lineno, f".{func.attr}",
                          f"`{snippet(node)}` calls .{func.attr}(), which changes the file system")
        elif "logging.basicConfig" in names and any(k.arg == "filename" for k in node.keywords):
            yield Finding("file_write", node.lineno, "logging.basicConfig",
                          f"`{snippet(node)}` logs to a file")


def _mode_arg(node: ast.Call, position: int) -> ast.expr | None:
    for k in node.keywords:
        if k.arg == "mode":
            return k.value
    return node.args[position] if len(node.args) > position else None


@rule("dynamic_access", "security", "namespace tricks that defeat static analysis: __builtins__ / builtins / "
      "globals() / locals() / vars(module) / module.__dict__ as values, getattr on a module with a run-time "
      "name, getattr of a dangerous name built from pieces, a module passed around as a value")
def dynamic_access(ctx: Context) -> Iterator[Finding]:
    r, folder = ctx.resolver, ctx.folder
    assert r is not None and folder is not None
    yield from (f for f in policy_hits(ctx) if f.rule == "dynamic_access")
    for node in ctx.of_type(ast.Call, ast.Name):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and r.qualnames(node.func) & _GETATTR_FAMILY:
            name_node = node.args[1]
            name = folder.fold(name_node)
            dangerous = _CORE_DANGEROUS if isinstance(name_node, ast.Constant) else policy.DANGEROUS_NAMES
            if isinstance(name, str) and name in dangerous:
                yield Finding("dynamic_access", node.lineno, f"getattr:{name}",
                              f"`{snippet(node)}` looks up {name!r} by name, the way banned calls are hidden")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and _module_as_value(node, ctx):
            parent = r.parent(node)
            yield Finding("dynamic_access", node.lineno, f"module:{node.id}",
                          f"module `{node.id}` is used as a value in `{snippet(parent or node)}`: a module passed "
                          "around exposes its namespace (and the modules it imports) to run-time lookups")


def _module_as_value(node: ast.Name, ctx: Context) -> bool:
    r = ctx.resolver
    assert r is not None and ctx.folder is not None
    if node.id not in r._module_roots or node.id in r.shadowed - r.import_bound:
        return False
    parent = r.parent(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return False
    if any(policy.classify(q) for q in r.qualnames(node)):
        return False  # already reported as a banned module
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node \
            and r.qualnames(parent.func) & _GETATTR_FAMILY:
        return False  # getattr(module, "literal") is module.literal; a run-time name is reported as <dynamic>
    return True


@rule("introspection", "security", "interpreter escape attributes on any object (__subclasses__, __globals__, "
      "__code__, __builtins__, frame / traceback / generator frames, __reduce__ …), string keys naming them, "
      "str.format fields walking into them")
def introspection(ctx: Context) -> Iterator[Finding]:
    folder = ctx.folder
    assert folder is not None
    for node in ctx.of_type(ast.Attribute, ast.Subscript):
        name = None
        if isinstance(node, ast.Attribute) and node.attr in policy.ESCAPE_ATTRS:
            name = node.attr
        elif isinstance(node, ast.Subscript):
            key = folder.fold(node.slice)
            name = key if isinstance(key, str) and key in policy.ESCAPE_ATTRS else None
        if name:
            yield Finding("introspection", node.lineno, name,
                          f"`{snippet(node)}` reads {name}, an interpreter escape hatch (reaches builtins, "
                          "globals, code objects or frames)")
    for node in ctx.of_type(ast.Constant):
        value = node.value
        if type(value) is str and "{" in value and (m := policy.FORMAT_ESCAPE.search(value)):
            yield Finding("introspection", node.lineno, m.group(1),
                          f"format string field {m.group()!r} walks into {m.group(1)}, an interpreter escape "
                          "hatch (str.format reads attributes)")


@rule("module_patch", "security", "assigning or deleting attributes of modules / imported objects "
      "(monkey-patching the SDK or the standard library), setattr / delattr on them")
def module_patch(ctx: Context) -> Iterator[Finding]:
    r = ctx.resolver
    assert r is not None
    for node in ctx.of_type(ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign, ast.Call):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and node.args and r.qualnames(node.func) & {"builtins.setattr",
                                                                                      "builtins.delattr"}:
            if r.is_namespace(node.args[0]):
                yield Finding("module_patch", node.lineno, snippet(node.args[0]),
                              f"`{snippet(node)}` changes a module or imported object at run time")
        for target in targets:
            if isinstance(target, ast.Attribute) and r.is_namespace(target.value):
                yield Finding("module_patch", node.lineno, snippet(target),
                              f"assignment to `{snippet(target)}` patches a module or imported object")
