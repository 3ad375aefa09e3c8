"""A reader that stops early (``| head``) ends a command, a script or a bench quietly, with exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Far more than a pipe buffer holds, so writes go on after the reader has gone.
LINES = 200_000


def _read_one_line_and_close(code: str = "", *, argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (or the command ``argv``) with stdout on a pipe, read its first line, close the pipe, and collect
    the exit and stderr."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv or [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    rc = proc.wait(timeout=300)
    return subprocess.CompletedProcess(proc.args, rc, first, err)


def test_a_plain_script_shows_the_failure_this_module_removes() -> None:
    done = _read_one_line_and_close(f"""
        for i in range({LINES}):
            print("line", i, "x" * 60)
    """)
    assert done.stdout.startswith("line 0")
    assert "BrokenPipeError" in done.stderr  # what a script printed before: a traceback


@pytest.mark.parametrize("returns", ["None", "0", "3"])
def test_run_script_exits_one_without_a_word_when_the_reader_goes(returns: str) -> None:
    done = _read_one_line_and_close(f"""
        from shoparena.cli.pipes import run_script
        def main():
            for i in range({LINES}):
                print("line", i, "x" * 60)
            return {returns}
        run_script(main)
    """)
    assert done.stdout.startswith("line 0")
    assert done.returncode == 1
    assert done.stderr == ""


def test_run_script_flushes_inside_its_guard() -> None:
    # Output small enough to stay in Python's buffer to the end: the last flush is what meets the closed pipe.
    code = """
        import sys
        from shoparena.cli.pipes import run_script
        def main():
            print("buffered, not yet written")
            sys.stdin.readline()  # the reader closes its end before this returns
            return 0
        run_script(main)
    """
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=buffered)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stdin.write("go\n")
    proc.stdin.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=120), err) == (1, "")


@pytest.mark.parametrize(("returns", "code"), [("None", 0), ("0", 0), ("4", 4)])
def test_run_script_passes_main_s_exit_code_through(returns: str, code: int) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from shoparena.cli.pipes import run_script
        run_script(lambda: print("all of it") or {returns})
    """)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (code, "all of it\n", "")


def test_run_script_lets_other_os_errors_through() -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from shoparena.cli.pipes import run_script
        def main():
            raise PermissionError(13, "denied")
        run_script(main)
    """)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1
    assert "PermissionError" in done.stderr


def test_the_cli_ends_quietly_when_its_reader_goes() -> None:
    # A real command registered on the real app, run through the console entry point.
    done = _read_one_line_and_close(f"""
        from shoparena.cli import app, main
        @app.command("emit-many")
        def emit_many() -> None:
            for i in range({LINES}):
                print("line", i, "x" * 60)
        main(["emit-many"])
    """)
    assert done.stdout.startswith("line 0")
    assert done.returncode == 1
    assert done.stderr == ""


def test_a_repository_script_ends_quietly_when_its_reader_goes(tmp_path: Path) -> None:
    # scripts/stop_turns.py over many call-log directories prints a line each; the reader takes one and goes.
    runs = []
    for i in range(4000):
        run = tmp_path / f"r{i}"
        run.mkdir()
        (run / "calls.jsonl").write_text("")
        runs.append(str(run))
    done = _read_one_line_and_close(argv=[sys.executable, str(ROOT / "scripts" / "stop_turns.py"), *runs])
    assert done.stdout.startswith(runs[0])
    assert (done.returncode, done.stderr) == (1, "")
