"""What the gate bans, as data: dotted names → (rule id, why), matched by longest prefix (docs/arena.md §2.3).

A *qualified name* is what an expression resolves to (``os.system``, ``builtins.eval``, ``urllib.request``); see
:mod:`shoparena.arena.gate.resolve`. The longest matching prefix decides: ``os`` is banned but ``os.environ`` is
allowed, so ``os.environ.get`` passes and ``os.system`` does not. An entry with rule ``None`` is an allowance.
Names that match nothing are allowed (``builtins.len``, ``json.loads``).

Why each entry is banned is part of the message a miner sees, so every reason says what the thing can do.
"""

from __future__ import annotations

import re

_PROC = "spawns or controls processes outside the per-problem sandbox process"
_FFI = "calls native code / raw memory, which bypasses every other check"
_DESER = "deserialises data into live objects (loading a payload runs arbitrary code)"
_FILES = "creates, copies or deletes files"
_DYN = "loads or runs code chosen at run time, which static analysis cannot see"
_FRAME = "reaches interpreter frames and namespaces (the harness's globals, builtins, other modules)"
_NET = "opens network connections; an agent may only reach the gateway through shoparena.sdk"
_HARNESS = "is harness internals (files, database, sandbox, judge, problem banks), not the agent SDK"
_OS = ("is part of os (processes, files, signals); only os.path, os.environ, os.getenv and a few constants "
       "are allowed")

#: Longest-prefix policy for the security rules. ``None`` = allowed.
SECURITY: dict[str, tuple[str | None, str]] = {
    # os: usage-based. `import os` is fine, `os.environ.get(...)` is fine, anything else on os is not.
    "os": ("banned_import", _OS),
    **{f"os.{name}": (None, "") for name in (
        "path", "environ", "getenv", "sep", "linesep", "pathsep", "curdir", "pardir", "extsep", "altsep",
        "name", "cpu_count", "getpid", "fspath", "PathLike")},
    "posix": ("banned_import", "is the raw os module"),
    "nt": ("banned_import", "is the raw os module"),
    # processes
    **{m: ("banned_import", _PROC) for m in (
        "subprocess", "commands", "pty", "pipes", "_posixsubprocess", "multiprocessing",
        "concurrent.futures.process", "concurrent.futures.ProcessPoolExecutor", "asyncio.subprocess",
        "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "webbrowser", "antigravity")},
    # native code
    **{m: ("banned_import", _FFI) for m in ("ctypes", "_ctypes", "cffi", "mmap")},
    # deserialisation
    **{m: ("banned_import", _DESER) for m in (
        "pickle", "_pickle", "cPickle", "dill", "cloudpickle", "shelve", "marshal", "copyreg")},
    # files
    **{m: ("banned_import", _FILES) for m in ("shutil", "tempfile", "sqlite3", "dbm", "fileinput")},
    # dynamic code and interpreter internals
    **{m: ("banned_import", _DYN) for m in (
        "importlib", "imp", "pkgutil", "runpy", "zipimport", "code", "codeop", "pdb", "bdb", "__builtin__",
        "types.CodeType", "types.FunctionType")},
    **{m: ("banned_import", _FRAME) for m in (
        "inspect", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.modules", "sys._getframe",
        "sys.settrace", "sys.setprofile", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache",
        "sys.path", "sys.addaudithook", "ctypes.pythonapi")},
    # builtins: the module itself is a namespace of every banned call
    "builtins.eval": ("banned_call", "evaluates a string as code"),
    "builtins.exec": ("banned_call", "executes a string as code"),
    "builtins.compile": ("banned_call", "turns a string into a code object to execute"),
    "builtins.__import__": ("banned_call", "imports a module chosen at run time"),
    "builtins.breakpoint": ("banned_call", "starts a debugger that executes arbitrary input"),
    "builtins.help": ("banned_call", "pydoc's pager can spawn a process"),
    "builtins.__loader__": ("dynamic_access", _DYN),
    "builtins.__spec__": ("dynamic_access", _DYN),
    "builtins.__build_class__": ("dynamic_access", _DYN),
    "operator.attrgetter": ("dynamic_access", "looks attributes up by a name built at run time"),
    "operator.methodcaller": ("dynamic_access", "calls methods by a name built at run time"),
    # file writes through the standard library
    "logging.FileHandler": ("file_write", _FILES),
    "logging.handlers": ("file_write", _FILES),
    # network
    **{m: ("raw_network", _NET) for m in (
        "socket", "_socket", "ssl", "socketserver", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp",
        "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib", "xmlrpc", "websocket", "websockets",
        "grpc", "asyncio.open_connection", "asyncio.start_server", "asyncio.open_unix_connection",
        "asyncio.start_unix_server", "shoparena._http")},
    "urllib.parse": (None, ""),
    # harness internals an agent has no business importing
    **{m: ("harness_import", _HARNESS) for m in (
        "shoparena._io", "shoparena.store", "shoparena.arena", "shoparena.cli", "shoparena.tasks.loader",
        "shoparena.catalog.directory", "shoparena.catalog.index_build", "shoparena.catalog.server",
        "shoparena.llm.serve", "shoparena.llm.gateway")},
}

#: Exact names (not prefixes): the module object itself. ``builtins.len`` is fine, ``builtins`` as a value is not.
EXACT: dict[str, tuple[str, str]] = {
    "builtins": ("dynamic_access", "is the namespace of eval/exec/__import__; reaching it defeats the call bans"),
    "builtins.__dict__": ("dynamic_access", "is the namespace of eval/exec/__import__"),
    "<globals>": ("dynamic_access", "exposes the module namespace (and __builtins__) to run-time names"),
}

#: Integrity: decoders used to hide embedded data (ids, answers) from review (docs/arena.md §2.3 "obfuscation").
OBFUSCATION: frozenset[str] = frozenset({
    "base64", "binascii", "codecs", "zlib", "lzma", "bz2", "gzip", "zipfile", "tarfile", "quopri", "uu", "marshal",
})

#: Attribute names that are interpreter escapes whatever object they are read from (sandbox-escape gadgets:
#: ``().__class__.__base__.__subclasses__()``, ``f.__globals__["__builtins__"]``, frame walking).
ESCAPE_ATTRS: frozenset[str] = frozenset({
    "__subclasses__", "__globals__", "__code__", "__builtins__", "__closure__", "__loader__", "__spec__",
    "__import__", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code", "cr_frame",
    "cr_code", "ag_frame", "ag_code", "tb_frame", "co_code", "__reduce__", "__reduce_ex__",
    "__self__",  # print.__self__ is the builtins module
})

#: Names that may not even be looked up dynamically (``getattr(x, "sys" + "tem")``).
DANGEROUS_NAMES: frozenset[str] = frozenset({
    "eval", "exec", "compile", "__import__", "system", "popen", "spawnl", "spawnv", "execv", "execve", "execl",
    "fork", "forkpty", "kill", "remove", "unlink", "rmdir", "rmtree", "import_module", "load_module",
    "__builtins__", "__dict__", "modules", "open", "write_text", "write_bytes", "Popen", "run", "call",
    "check_output", "socket", "create_connection", "urlopen", *ESCAPE_ATTRS,
})

#: Calls that open files, with the position of their ``mode`` argument (keyword ``mode`` also accepted).
OPENERS: dict[str, int] = {
    "builtins.open": 1, "io.open": 1, "io.FileIO": 1, "codecs.open": 1, "gzip.open": 1, "gzip.GzipFile": 1,
    "bz2.open": 1, "bz2.BZ2File": 1, "lzma.open": 1, "lzma.LZMAFile": 1, "tarfile.open": 1,
    "tarfile.TarFile": 1, "zipfile.ZipFile": 1,
}

#: Method names that write the file system whatever their receiver (``pathlib.Path`` and friends).
WRITE_METHODS: frozenset[str] = frozenset({
    "write_text", "write_bytes", "touch", "mkdir", "makedirs", "unlink", "rmdir", "symlink_to", "hardlink_to",
    "link_to", "chmod", "lchmod", "rmtree",
})

#: Method names that spawn processes or open connections whatever their receiver (an event loop obtained at run
#: time cannot be resolved statically).
DANGEROUS_METHODS: dict[str, tuple[str, str]] = {
    **{m: ("banned_import", _PROC) for m in ("subprocess_exec", "subprocess_shell")},
    **{m: ("raw_network", _NET) for m in (
        "create_connection", "create_unix_connection", "create_server", "create_unix_server",
        "create_datagram_endpoint", "sock_connect", "open_connection")},
}

#: ``str.format`` fields that walk into escape attributes: ``"{0.__init__.__globals__}".format(obj)``.
FORMAT_ESCAPE = re.compile(r"\{[^{}]*\.(" + "|".join(sorted(ESCAPE_ATTRS)) + r")\b[^{}]*\}")

#: Write-ish mode characters.
WRITE_MODE_CHARS = frozenset("wax+")


def classify(qualname: str) -> tuple[str, str] | None:
    """``(rule, why)`` for a banned qualified name, else None (EXACT first, then the longest prefix).

    A name that passes through a dangerous module reached via another module's namespace
    (``tempfile.os.system``, ``shoparena.sdk.client.socket.socket``) is judged from that segment on as well."""
    parts = qualname.split(".")
    for end in range(len(parts), 0, -1):
        hit = EXACT.get(".".join(parts[:end]))
        if hit is not None and (end == len(parts) or parts[end - 1] == "__dict__" or parts[0] == "<globals>"):
            return hit
    for start in range(len(parts)):
        if start and parts[start] not in REROOTS:
            continue
        for end in range(len(parts), start, -1):
            hit = SECURITY.get(".".join(parts[start:end]))
            if hit is not None:
                if hit[0] is not None:
                    return hit[0], hit[1]
                break
    return None


#: Modules whose appearance inside another module's namespace is judged on its own (see :func:`classify`).
REROOTS: frozenset[str] = frozenset({
    "os", "sys", "subprocess", "builtins", "socket", "_socket", "importlib", "ctypes", "shutil", "pickle",
    "marshal", "multiprocessing", "posix", "urllib", "http", "tempfile", "pty", "requests", "urllib3", "httpx",
})


def is_partial(qualname: str) -> bool:
    """True when a banned module has allowed members (``os``, ``urllib``): importing it is fine, uses are
    judged one by one."""
    prefix = qualname + "."
    return any(k.startswith(prefix) and v[0] is None for k, v in SECURITY.items())


def is_obfuscation(qualname: str) -> bool:
    return qualname.split(".")[0] in OBFUSCATION


def suffixes(qualname: str) -> list[str]:
    """``a.b.c`` → ``[a.b.c, b.c, c]``: a module reached through another module (``json.codecs.open``) is
    judged by its own name too."""
    parts = qualname.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]
