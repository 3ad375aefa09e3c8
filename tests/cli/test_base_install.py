"""A base install (``pip install shoparena``, no extras) answers every command: it works, or it exits 2 with one
``error:`` line naming the extra to install and a ``pip install 'shoparena[EXTRA]'`` hint — never an internal
error (exit 70).

The walk runs each command of the CLI, with small but valid arguments, in a subprocess whose import system cannot
see any module that the base install would not bring (:mod:`tests.cli.base_install`: the extras' torch,
transformers, trl, peft, accelerate, datasets, gguf, llama_cpp, psycopg, bittensor,
sentence_transformers, and every other distribution only ``.[dev]`` installs). Each command's expected answer is
stated beside it; a command added to the CLI without a case here fails :func:`test_every_command_is_walked`.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.cli.base_install import PYPROJECT, base_distributions, blocked_modules

SCRIPT = Path(__file__).with_name("base_install.py")
TIMEOUT_S = 120
OK, USAGE, BACKEND, INTERNAL = 0, 2, 5, 70
SERVING = "serving"  # a server that came up and answered /health (then stopped by the test)

#: The modules the extras bring that the issue names; the walk hides all of them (and more).
EXTRA_TOP_MODULES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "gguf",
                     "llama_cpp", "psycopg", "bittensor", "sentence_transformers")


class Case(NamedTuple):
    args: tuple[str, ...]
    expect: int | str
    extra: str | None = None  # the extra an exit-2 answer must name
    server: bool = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(hidden: set[str]) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200", "SHOPARENA_BLOCK": ",".join(sorted(hidden))}
    env.pop("SHOPARENA_DEBUG", None)
    return env


def _run(case: Case, cwd: Path, hidden: set[str], python: str = sys.executable) -> tuple[int | str, str]:
    """Run one case with ``python``: its exit code (or ``serving``) and its stderr."""
    cmd = [python, str(SCRIPT), *case.args]
    if not case.server:
        done = subprocess.run(cmd, cwd=cwd, env=_env(hidden), capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        return done.returncode, done.stderr
    port = case.args[case.args.index("--port") + 1]
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(hidden), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode, proc.communicate()[1]
            try:
                with socket.create_connection(("127.0.0.1", int(port)), timeout=1) as s:
                    s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1"):
                        return SERVING, ""
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"{case.args}: neither served nor exited in {TIMEOUT_S} s")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=30)


def _cases(root: Path) -> list[Case]:
    """The walk, in order (later commands read what earlier ones wrote)."""
    from shoparena.agents import agent_path

    react = str(agent_path("react"))
    rec = f"sqlite:///{root / 'records.db'}"
    subnet = f"sqlite:///{root / 'arena' / 'subnet.db'}"
    small = ("--catalog", "cat", "--problems", "problems.jsonl")
    process = ("--sandbox", "process", "--allow-non-hermetic")
    cases = [
        Case(("--help",), OK),
        Case(("catalog", "generate", "--out", "cat", "--size", "300"), OK),
        Case(("catalog", "info", "--catalog", "cat"), OK),
        Case(("catalog", "import", "cat/documents.jsonl.gz", "--out", "imported"), OK),
        Case(("problems", "generate", "--catalog", "cat", "--out", "problems.jsonl", "--n", "12"), OK),
        Case(("problems", "stats", "problems.jsonl"), OK),
        Case(("search", "violin", "--catalog", "cat"), OK),
        Case(("run", *small, "--agent", "react", "--limit", "2", "--out", "run"), OK),
        Case(("score", *small, "--rollouts", "run/rollouts.jsonl"), OK),
        Case(("submit", react), OK),
        Case(("validate", *small, "--agent", "react", "--store", rec, *process, "--limit", "2"), OK),
        Case(("store", "stats", "--store", rec), OK),
        Case(("store", "stats", "--store", "postgresql://shoparena@127.0.0.1:9/none"), USAGE, "pg"),
        Case(("store", "verify", "--store", rec), OK),
        Case(("store", "export", "--store", rec, "--out", "records.parquet"), OK),
        Case(("store", "rescore", "--store", rec, *small, "--dry-run"), OK),
        Case(("judge", "audit", "--store", rec, "--sample", "2"), OK),
        Case(("arena", "banks", "build", "--out", "banks", "--problems", "problems.jsonl"), OK),
        Case(("arena", "banks", "verify", "banks"), OK),
        Case(("arena", "banks", "stats", "banks"), OK),
        Case(("arena", "simulate", "--miners", "2", "--validators", "1", "--days", "1", "--catalog-size", "300",
              "--problems", "30", "--qualifying-problems", "3", "--race-problems", "3", "--sandbox", "process",
              "--out", "arena"), OK),
        Case(("arena", "validator", "--api", "http://127.0.0.1:9", "--catalog", "cat", "--store",
              f"sqlite:///{root / 'validator.db'}", *process, "--max-items", "1"), BACKEND),
        Case(("corpus", "build", "--from", subnet, "--catalog", "arena/catalog", "--banks", "arena/banks",
              "--out", "corpus"), OK),
        Case(("corpus", "show", "corpus"), OK),
        Case(("models", "list"), OK),
        Case(("models", "prepare", "smollm2-135m", "--out", "smollm2"), USAGE, "train"),
        Case(("models", "gguf", "model"), USAGE, "train"),
        Case(("train", "tiny", "--corpus", "corpus", "--catalog", "arena/catalog", "--out", "train"), USAGE,
             "train"),
        Case(("evaluate", "--model", "policy:expert", *small[:2], "--problems", "problems.jsonl", "--out", "eval",
              "-n", "1", "--limit", "2", "--report"), OK),
        Case(("evaluate", "--model", "hf:model", *small[:2], "--problems", "problems.jsonl", "--out", "eval-hf",
              "-n", "1", "--limit", "1"), USAGE, "hf"),
        Case(("loop", "--out", "loop"), USAGE, "train"),
        Case(("demo", "--out", "demo"), USAGE, "train"),
        Case(("serve", "--model", "policy:expert", "--port", str(_free_port())), SERVING, server=True),
        Case(("serve", "--model", "hf:model", "--port", str(_free_port())), USAGE, "hf", server=True),
        Case(("llm", "serve", "--model", "policy:expert", "--port", str(_free_port())), SERVING, server=True),
        Case(("catalog", "serve", "--catalog", "cat", "--port", str(_free_port())), SERVING, server=True),
        Case(("web", "--store", subnet, "--port", str(_free_port())), SERVING, server=True),
    ]
    if "reproduce table1" in _leaf_commands():
        cases.append(Case(("reproduce", "table1", "--profile", "smoke", "--out", "reproduce"), USAGE, "train"))
    return cases


def _leaf_commands() -> set[str]:
    import typer.main

    from shoparena.cli import app

    out: set[str] = set()

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if not subs:
            out.add(" ".join(path))
            return
        for name, sub in subs.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return out


def _command_of(args: tuple[str, ...], leaves: set[str]) -> str | None:
    for n in range(len(args), 0, -1):
        if " ".join(args[:n]) in leaves:
            return " ".join(args[:n])
    return None


def _walk(root: Path, hidden: set[str], python: str = sys.executable) -> list[tuple[Case, int | str, str]]:
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}", encoding="utf-8")  # where a prepared checkpoint would be
    return [(case, *_run(case, root, hidden, python)) for case in _cases(root)]


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[Case, int | str, str]]]:
    yield _walk(tmp_path_factory.mktemp("base_install"), blocked_modules())


def test_the_walk_hides_every_extra_and_keeps_the_base() -> None:
    hidden = blocked_modules()
    assert set(EXTRA_TOP_MODULES) - {"llama_cpp", "bittensor", "sentence_transformers"} <= hidden
    # not installed here at all, so hidden as well: a find_spec for them answers None either way
    base = base_distributions()
    assert {"pyyaml", "typer", "rich", "pydantic", "numpy"} <= base
    assert "yaml" not in hidden and "torch" in hidden


def test_hidden_modules_look_uninstalled(tmp_path: Path) -> None:
    code = ("import importlib.util, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from base_install import hide_modules\n"
            "hide_modules({'torch', 'yaml'})\n"
            "print(importlib.util.find_spec('torch'), importlib.util.find_spec('json') is not None)\n"
            "try:\n    import torch.nn\nexcept ModuleNotFoundError as e:\n    print('missing', e.name)\n")
    done = subprocess.run([sys.executable, "-c", code, str(SCRIPT.parent)], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["None", "True", "missing", "torch"]


def test_every_command_is_walked(tmp_path: Path) -> None:
    leaves = _leaf_commands()
    walked = {_command_of(c.args, leaves) for c in _cases(tmp_path)}
    assert leaves - walked == set(), "add a base-install case for these commands"


@pytest.mark.slow  # about 40 subprocesses, some of them serving: under a minute
def test_no_command_is_an_internal_error_and_missing_extras_are_named(
        walk: list[tuple[Case, int | str, str]]) -> None:
    _check(walk)


@pytest.mark.slow  # a venv and `pip install .` (about 30 s here), then the same walk
def test_a_real_base_install_answers_every_command(tmp_path: Path) -> None:
    """The same walk in a fresh virtual environment where ``pip install .`` (no extras) installed the package from
    a copy of the repository's ``pyproject.toml``, ``README.md`` and ``shoparena/``: nothing is hidden, the base
    install simply lacks the extras."""
    import shutil
    import venv

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PYPROJECT.parent / name, src / name)
    shutil.copytree(PYPROJECT.parent / "shoparena", src / "shoparena",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", str(src)], capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0 and "No matching distribution" in done.stderr:
        pytest.skip(f"the package index cannot serve the base dependencies here: {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr
    probe = subprocess.run([python, "-c", "import importlib.util as u; print([m for m in ('torch', 'trl', "
                            "'transformers', 'psycopg') if u.find_spec(m)])"],
                           capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.strip() == "[]"  # the extras are really absent
    (tmp_path / "walk").mkdir()
    _check(_walk(tmp_path / "walk", set(), python))


def _check(walk: list[tuple[Case, int | str, str]]) -> None:
    report = "\n".join(f"{code!s:>8}  shoparena {' '.join(c.args)}" for c, code, _ in walk)
    wrong = []
    for case, code, err in walk:
        lines = [line.strip() for line in err.splitlines() if line.strip()]
        ok = code == case.expect
        if ok and code == USAGE:  # one error line saying what is missing, then the hint installing the extra
            errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
            ok = (len(errors) == 1 and lines[errors[0] + 1:] == [f"hint: pip install 'shoparena[{case.extra}]'"])
        if not ok:
            wrong.append(f"shoparena {' '.join(case.args)} → {code} (expected {case.expect}"
                         f"{f', naming {case.extra!r}' if case.extra else ''}):\n{err}")
    assert all(code != INTERNAL for _, code, _ in walk), report
    assert not wrong, "\n".join(wrong) + "\n--- the walk:\n" + report


def test_each_extra_installs_the_modules_it_is_named_for() -> None:
    """The table the CLI names extras from agrees with pyproject.toml: every extra exists, and its requirements
    (with theirs) install each module it is named for."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    from shoparena.cli._extras import COMMAND_EXTRAS, EXTRA_MODULES

    optional = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert "scale" not in optional
    providers = metadata.packages_distributions()
    base = base_distributions()
    for module, extras in EXTRA_MODULES.items():
        for extra in extras:
            assert extra in optional, f"{module}: no extra {extra!r} in pyproject.toml"
            dists = {canonicalize_name(d) for d in providers.get(module, [])}
            if not dists:
                continue  # not installed here (llama_cpp, bittensor, sentence_transformers): name checked above
            with_extra = base_distributions((extra,))
            assert dists & with_extra, f"pip install 'shoparena[{extra}]' does not install {module}"
            assert not dists & base, f"{module} is in the base install: it needs no extra"
    assert set(COMMAND_EXTRAS.values()) <= set(optional)


def test_dev_installs_every_extra_the_tests_use() -> None:
    optional = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].lower() for line in optional["dev"]}
    for extra in ("train", "hf", "pg"):
        wanted = {re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].lower() for line in optional[extra]}
        assert wanted <= names, f"dev lacks {wanted - names} of the {extra!r} extra"
