"""Resolving and importing single-file agents (ORO ``sandbox_executor``: importlib, module registered first)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from shoparena.errors import ConfigError, NotFoundError, closest

_HERE = Path(__file__).resolve().parent
#: Built-in agent name → its single file.
BUILTIN_AGENTS: dict[str, Path] = {name: _HERE / f"{name}.py" for name in ("react", "oro7", "pipeline")}


def agent_path(spec: str) -> Path:
    """A built-in agent name (``react``, ``oro7``, ``pipeline``) or the path of an agent file."""
    if spec in BUILTIN_AGENTS:
        return BUILTIN_AGENTS[spec]
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    near = closest(spec, list(BUILTIN_AGENTS))
    raise NotFoundError(
        f"no agent {spec!r}",
        hint=(f"did you mean {near}? " if near else "") + f"built-ins: {', '.join(BUILTIN_AGENTS)}; or a .py file",
    )


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
