"""Resolving and importing single-file agents (ORO ``sandbox_executor``: importlib, module registered first)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from shoparena.errors import ConfigError
from shoparena.registry import Registry

_HERE = Path(__file__).resolve().parent
BUILTIN_AGENTS: Registry[Path] = Registry("agent", usage="or the path of a .py agent file")
"""Built-in agent name → its single file."""
for _name in ("react", "oro7", "pipeline"):
    BUILTIN_AGENTS.add(_name, _HERE / f"{_name}.py")


def agent_path(spec: str) -> Path:
    """A built-in agent name (``react``, ``oro7``, ``pipeline``) or the path of an agent file."""
    if spec in BUILTIN_AGENTS:
        return BUILTIN_AGENTS.get(spec)
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    raise BUILTIN_AGENTS.unknown(spec)


def load_agent(path: str | Path) -> ModuleType:
    """Import an agent file as a fresh module and check it defines ``agent_main``."""
    p = Path(path).resolve()
    name = "shoparena_agent_" + hashlib.sha1(str(p).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import agent file {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    if not callable(getattr(module, "agent_main", None)):
        del sys.modules[name]
        raise ConfigError(f"{p} defines no agent_main(problem_data)", hint="see shoparena/agents/react.py")
    return module
