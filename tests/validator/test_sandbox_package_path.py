"""The sandbox imports the very ``shoparena`` the validator imported, and nothing else of its checkout.

Agents import ``shoparena.sdk`` inside the sandbox, whose interpreter runs isolated (``python -I``): left to the
environment, that import follows the venv's install (an editable install's finder may name another checkout, or
a path the sandbox does not bind) instead of the copy the validator runs from. The entry puts the directory holding
the validator's package first on ``sys.path`` (docs/arena-design.md, the sandbox). Checked for real here: agents
that report where their ``shoparena`` came from, run by bubblewrap and by the process fallback in both modes,
from the venv's install and from a copy of the package put on ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shoparena.validator.sandbox import SandboxLimits, get_sandbox
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from shoparena.validator.sandbox.docker import docker_argv
from shoparena.validator.sandbox.paths import ENTRY, PACKAGE_DIR, PACKAGE_PARENT

_REASON = BubblewrapSandbox().unavailable()
needs_bwrap = pytest.mark.skipif(_REASON is not None, reason=f"bubblewrap unusable here: {_REASON}")
LIMITS = SandboxLimits(timeout_s=30.0, kill_grace_s=0.5, memory_mb=2048, pids=64, tmpfs_mb=16, output_mb=1)

#: Reports where its ``shoparena`` (and the SDK agents import) came from and what its first path entry holds.
AGENT = textwrap.dedent('''
    import os
    import sys


    def agent_main(problem_data):
        import shoparena
        import shoparena.sdk

        first = sys.path[0]
        return [{"package": os.path.realpath(os.path.dirname(shoparena.__file__)),
                 "sdk": os.path.realpath(shoparena.sdk.__file__),
                 "first": first, "first_holds": sorted(os.listdir(first)) if os.path.isdir(first) else [],
                 "marker": getattr(shoparena, "SANDBOX_TEST_MARKER", None)}]
''')

#: Run with a copy of the package on PYTHONPATH: the validator's side and what the sandbox reports, as JSON.
DRIVER = textwrap.dedent('''
    import json
    import os
    import socket
    import sys
    import tempfile

    import shoparena
    from shoparena.validator.sandbox import SandboxLimits, get_sandbox

    agent, backend, mode = sys.argv[1:4]
    sock_dir = tempfile.mkdtemp()
    server = socket.socket(socket.AF_UNIX)
    server.bind(os.path.join(sock_dir, "gw.sock"))
    server.listen()
    sandbox = get_sandbox(backend, allow_non_hermetic=True)
    limits = SandboxLimits(mode=mode, timeout_s=30.0, kill_grace_s=0.5, memory_mb=2048, pids=64, tmpfs_mb=16)
    [out] = list(sandbox.run(agent, [{"problem_id": "p0", "query": "where from"}],
                             gateway_socket=os.path.join(sock_dir, "gw.sock"), env_for=lambda pid: {},
                             limits=limits))
    print(json.dumps({"validator": os.path.realpath(os.path.dirname(shoparena.__file__)),
                      "status": out.envelope.status, "error": out.envelope.error,
                      "dialogue": out.envelope.dialogue, "stderr": out.stderr_tail[-2000:]}))
''')


@pytest.fixture(scope="module")
def gateway_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A listening Unix socket: the agents here never call the gateway, the sandbox only binds it."""
    path = tmp_path_factory.mktemp("gw") / "gw.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        yield path
    finally:
        server.close()


@pytest.fixture(scope="module")
def agent_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent") / "where.py"
    path.write_text(AGENT, encoding="utf-8")
    return path


def _backends() -> list[Any]:
    return [pytest.param("bubblewrap", marks=needs_bwrap), "process"]


def _report(backend: str, mode: str, agent_file: Path, gateway_socket: Path) -> dict[str, Any]:
    sandbox = get_sandbox(backend, allow_non_hermetic=True)
    [out] = list(sandbox.run(agent_file, [{"problem_id": "p0", "query": "where from"}], gateway_socket=gateway_socket,
                             env_for=lambda pid: {}, limits=LIMITS.model_copy(update={"mode": mode})))
    assert out.envelope.status == "SUCCESS", (out.envelope.error, out.stderr_tail[-2000:])
    [step] = out.envelope.dialogue
    return step


@pytest.mark.parametrize("mode", ["batch", "per_problem"])
@pytest.mark.parametrize("backend", _backends())
def test_the_agent_imports_the_package_the_validator_imported(backend: str, mode: str, agent_file: Path,
                                                              gateway_socket: Path) -> None:
    step = _report(backend, mode, agent_file, gateway_socket)
    assert step["package"] == str(PACKAGE_DIR)
    assert step["sdk"] == str(PACKAGE_DIR / "sdk" / "__init__.py") or step["sdk"] == str(PACKAGE_DIR / "sdk.py")
    # the first path entry makes the package importable and nothing else of the checkout: no tests/, scripts/,
    # pyproject.toml (the process backend links the package alone; bubblewrap binds it alone under its parent)
    held = set(step["first_holds"])
    assert PACKAGE_DIR.name in held
    assert not held & {"tests", "scripts", "docs", "pyproject.toml", "Makefile"}, held
    if backend == "bubblewrap":
        assert step["first"] == str(PACKAGE_PARENT)
        # besides the package, only mount points of the interpreter's own binds (never importable packages)
        assert all(not (PACKAGE_PARENT / name / "__init__.py").exists() for name in held - {PACKAGE_DIR.name})
    else:
        assert held == {PACKAGE_DIR.name}


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package outside the environment's install, marked so that the import is recognisable."""
    root = tmp_path_factory.mktemp("copy")
    shutil.copytree(PACKAGE_DIR, root / "pkg" / "shoparena", ignore=shutil.ignore_patterns("__pycache__"))
    init = root / "pkg" / "shoparena" / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8") + '\nSANDBOX_TEST_MARKER = "the copy"\n', encoding="utf-8")
    (root / "driver.py").write_text(DRIVER, encoding="utf-8")
    return root


@pytest.mark.parametrize("mode", ["batch", "per_problem"])
@pytest.mark.parametrize("backend", _backends())
def test_a_validator_run_from_a_copy_on_pythonpath_gives_agents_that_copy(backend: str, mode: str, copy: Path,
                                                                         agent_file: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(copy / "pkg"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(copy / "driver.py"), str(agent_file), backend, mode], cwd=copy,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    the_copy = os.path.realpath(copy / "pkg" / "shoparena")
    assert seen["validator"] == the_copy  # the validator itself runs the copy, not the venv's install
    assert seen["status"] == "SUCCESS", (seen["error"], seen["stderr"])
    [step] = seen["dialogue"]
    assert step["package"] == the_copy != str(PACKAGE_DIR)
    assert step["marker"] == "the copy"


def _entry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shoparena_sandbox_entry_under_test", ENTRY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_entry_puts_the_package_first_once_and_never_reorders_an_installed_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _entry()
    monkeypatch.setattr(sys, "path", ["/stdlib", "/site-packages"])
    entry.package_first(str(tmp_path / "pkg") + "/")
    assert sys.path == [str(tmp_path / "pkg"), "/stdlib", "/site-packages"]
    entry.package_first(str(tmp_path / "pkg"))  # already first: not added twice
    assert sys.path == [str(tmp_path / "pkg"), "/stdlib", "/site-packages"]
    # a package installed into site-packages: that directory keeps its place behind the standard library
    monkeypatch.setattr(sys, "path", ["/stdlib", "/site-packages"])
    entry.package_first("/site-packages")
    assert sys.path == ["/stdlib", "/site-packages"]
    entry.package_first(None)  # docker: the image's own install, no package path
    assert sys.path == ["/stdlib", "/site-packages"]


def test_docker_mounts_nothing_of_the_host_package_and_names_no_package_path() -> None:
    argv = docker_argv(image="shoparena-sandbox:1", name="sbx-1", limits=SandboxLimits(), agent=Path("/w/agent.py"),
                       problem=Path("/w/problem.json"), entry=ENTRY, gateway_socket=Path("/g/gw.sock"),
                       out_dir=Path("/w/out"), env_file=Path("/w/env"))
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert not any(m.startswith(f"{PACKAGE_DIR}:") or m.startswith(f"{PACKAGE_PARENT}:") for m in mounts)
    assert "package_path" not in json.loads(argv[-1])  # the image's own shoparena is the agents'
