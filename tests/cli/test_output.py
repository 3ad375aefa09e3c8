"""Console output vs the run's log file (:func:`shoparena.cli._output.library_output`): the command's own tables
and progress stay on the console; library warnings, library log records (through the libraries' own handlers
too), whatever a library prints and the trainers' per-step logs go to the log file; ``verbose`` shows them live.

The first tests run in this process with stand-ins for what a library does (a ``FutureWarning``, a record on a
library logger, a console handler a library attaches when it is imported, a printed log dict). The others run a
fresh interpreter, where torch and transformers are first imported inside the block, and a real CLI path
(``shoparena train`` on the tiny model: ``demo`` and ``loop`` run the same block around the same trainers but
take minutes).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from shoparena.cli._output import library_output

REPO = Path(__file__).resolve().parents[2]


def _speak() -> None:
    """What a library does while a command runs."""
    warnings.warn("`gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)
    logging.getLogger("transformers.trainer").warning("a library record")
    own = logging.getLogger("datasets")  # a library that sets up its own console handler on first import
    own.addHandler(logging.StreamHandler())
    own.propagate = False
    own.warning("a record through the library's own handler")
    print({"loss": 0.5, "grad_norm": 0.1})
    print("Loading weights: 100%", file=sys.stderr)
    logging.getLogger("shoparena.train").info('sft step 1 {"loss": 0.5}')


def test_library_output_goes_to_the_log_and_the_console_keeps_the_command(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli._common import console, err_console

    log = tmp_path / "run" / "cmd.log"
    filters = list(warnings.filters)
    stdout, stderr = sys.stdout, sys.stderr
    datasets_logger = logging.getLogger("datasets")
    before = (list(datasets_logger.handlers), datasets_logger.propagate, logging.getLogger().handlers[:])
    with library_output(log) as kept:
        console.print("RESULT TABLE")
        err_console.print("PROGRESS LINE")
        _speak()
    assert kept == log
    out, err = capsys.readouterr()
    assert "RESULT TABLE" in out and "PROGRESS LINE" in err
    for stream in (out, err):
        assert "Warning" not in stream and "'loss'" not in stream and "record" not in stream
        assert "Loading weights" not in stream and "sft step" not in stream
    text = log.read_text(encoding="utf-8")
    for expected in ("FutureWarning: `gradient_checkpointing` is deprecated", "a library record",
                     "a record through the library's own handler", "{'loss': 0.5, 'grad_norm': 0.1}",
                     "Loading weights: 100%", 'shoparena.train: sft step 1 {"loss": 0.5}'):
        assert expected in text, expected
    # everything is back as it was
    assert warnings.filters == filters and sys.stdout is stdout and sys.stderr is stderr
    assert (list(datasets_logger.handlers), datasets_logger.propagate, logging.getLogger().handlers) == before
    print("after")
    assert capsys.readouterr().out == "after\n"


def test_verbose_shows_the_library_output_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with library_output(None, verbose=True) as kept:
        _speak()
    assert kept is None
    out, err = capsys.readouterr()
    assert "{'loss': 0.5, 'grad_norm': 0.1}" in out
    assert "FutureWarning: `gradient_checkpointing` is deprecated" in err and "a library record" in err
    assert 'shoparena.train: sft step 1 {"loss": 0.5}' in err
    assert list(tmp_path.iterdir()) == []


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "", "TRANSFORMERS_VERBOSITY": ""}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_warnings_at_import_time_inside_the_block_go_to_the_log(tmp_path: Path) -> None:
    """torch and transformers imported for the first time inside the block: what they (and a module that warns
    while it is imported) say at import and afterwards reaches the log, not the console."""
    (tmp_path / "warns_on_import.py").write_text(
        "import logging, warnings\n"
        "warnings.warn('deprecated at import time', FutureWarning)\n"
        "logging.getLogger('transformers').warning('logged at import time')\n", encoding="utf-8")
    done = _fresh("""
        import sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[2])
        assert "torch" not in sys.modules and "transformers" not in sys.modules
        from shoparena.cli._common import console
        from shoparena.cli._output import library_output

        with library_output(Path(sys.argv[1])):
            import torch
            import transformers
            import warns_on_import
            transformers.TrainingArguments(output_dir=sys.argv[2] + "/args", use_cpu=True, report_to="none",
                                           gradient_checkpointing=True)
            transformers.logging.get_logger("transformers.modeling_utils").warning("transformers speaks")
            print({"loss": 1.0})  # a trainer's log dict
            console.print("the table")
        console.print("done")
        """, str(tmp_path / "cmd.log"), str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["the", "table", "done"] and done.stderr == ""
    text = (tmp_path / "cmd.log").read_text(encoding="utf-8")
    for expected in ("FutureWarning: deprecated at import time", "logged at import time", "transformers speaks",
                     "FutureWarning: `gradient_checkpointing`", "{'loss': 1.0}"):
        assert expected in text, expected


@pytest.mark.slow
def test_a_real_training_command_prints_tables_and_logs_the_trainer(tmp_path: Path) -> None:
    """``shoparena train tiny --stages sft`` in a fresh process: the console carries the stage line and the result
    table, never a FutureWarning or a trainer log dict; the run's log file has both."""
    from shoparena.corpus.build import build_corpus
    from shoparena.corpus.testing import seed_world

    world = seed_world(tmp_path / "world")
    build_corpus(tmp_path / "corpus", store=world.store_url, catalog=world.catalog)
    out = tmp_path / "train"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("SHOPARENA_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "shoparena", "train", "tiny", "--stages", "sft", "--corpus",
                           str(tmp_path / "corpus"), "--catalog", str(world.catalog), "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        assert "FutureWarning" not in stream and "{'loss'" not in stream and '"loss"' not in stream
    assert "loss first → last" in done.stdout
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "FutureWarning" in log and 'shoparena.train: sft step 1 {"loss": ' in log


def test_on_a_terminal_a_progress_bar_leaves_library_printing_in_the_log(tmp_path: Path) -> None:
    """On a terminal rich's progress bar would route whatever is printed while it runs above the bar; inside the
    block that printing still goes to the log. The command runs on a pseudo-terminal, as a user's shell runs it."""
    import pty

    code = textwrap.dedent("""
        import sys, warnings
        from pathlib import Path
        from shoparena.cli._common import console, err_console, progress_bar
        from shoparena.cli._output import library_output

        assert err_console.is_terminal
        with library_output(Path(sys.argv[1])):
            with progress_bar("training", 2) as advance:
                for step in range(2):
                    print({"loss": step})
                    print("Map: 100%", file=sys.stderr)
                    warnings.warn("deprecated while the bar runs", FutureWarning)
                    advance(1)
            console.print("the table")
        """)
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cmd.log")], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    screen = b"".join(chunks).decode(errors="replace")
    assert "the table" in screen
    assert "loss" not in screen and "Map: 100%" not in screen and "FutureWarning" not in screen
    text = (tmp_path / "cmd.log").read_text(encoding="utf-8")
    assert "{'loss': 0}" in text and "{'loss': 1}" in text and "Map: 100%" in text
    assert "FutureWarning: deprecated while the bar runs" in text
