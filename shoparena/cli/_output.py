"""What a command shows on the console and what goes to its log file.

Commands show progress bars and result tables (the two consoles of :mod:`shoparena.cli._common`). The libraries
underneath (transformers, TRL, datasets, torch, accelerate, peft, the HTTP clients) speak through Python's
``warnings`` and ``logging``, through handlers they attach to their own loggers when first imported, and by
printing (a trainer's log dicts, tqdm bars). Inside ``library_output`` all of that goes to the run's log file —
warnings a library emits while it is being imported inside the block included — and the trainers' per-step logs
(the ``shoparena.train`` logger) are kept there too. ``--verbose`` shows the same records on the console as they
happen and leaves the libraries' own printing there (commands then pass no log file).
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from rich.file_proxy import FileProxy

#: The loggers of the libraries a command runs on: inside the block they lose their own handlers and pass their
#: records up to the block's handler (a library that imports inside the block and adds a console handler of its
#: own finds ``sys.stderr`` pointing at the log file).
LIBRARY_LOGGERS: tuple[str, ...] = (
    "py.warnings", "transformers", "trl", "datasets", "accelerate", "peft", "torch", "huggingface_hub",
    "urllib3", "httpx", "httpcore", "openai", "filelock", "matplotlib", "fsspec", "uvicorn", "uvicorn.error",
    "uvicorn.access", "sentence_transformers", "gguf",
)

#: Our own loggers whose INFO records belong in the log file (``shoparena.train``: every trainer's logged step).
OWN_LOGGERS: tuple[str, ...] = ("shoparena",)

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _LogStream(FileProxy):
    """A text stream onto the log file that stays writable after the block: a handler or a progress bar a
    library kept a reference to then writes nowhere instead of raising on a closed file.

    It is a rich ``FileProxy`` so that a progress bar drawn inside the block (rich's ``Live`` wraps
    ``sys.stdout`` / ``sys.stderr`` in one unless they already are) leaves it in place: what a library prints
    while a bar runs still goes to the log, not above the bar."""

    def __init__(self, file: TextIO | None) -> None:  # no FileProxy.__init__: nothing is proxied to a console
        self._file = file
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)

    @property
    def rich_proxied_file(self) -> Any:  # a rich Console writing to sys.stdout inside the block writes here
        return self

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("the log stream has no file descriptor")

    def write(self, text: str) -> int:
        with self._lock:
            if self._file is not None:
                self._file.write(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def detach_file(self) -> None:
        """Close the log file; later writes are dropped."""
        with self._lock:
            if self._file is not None:
                self._file.close()
            self._file = None


@contextlib.contextmanager
def library_output(log_file: Path | None, *, verbose: bool = False) -> Iterator[Path | None]:
    """Route library warnings, log records and printing to ``log_file`` (appended; ``None``: dropped); with
    ``verbose`` the warnings and records show on the console (and in ``log_file`` when one is given) and the
    libraries' printing stays there.

    Yields ``log_file``. The two consoles of :mod:`shoparena.cli._common` keep writing to the real terminal, so
    the command's own progress bars and tables show as usual. Everything is put back as it was on exit (logger
    handlers, levels, warning filters, ``sys.stdout`` / ``sys.stderr``), so tests and library callers see
    Python's defaults again.
    """
    from shoparena.cli._common import console, err_console

    file: TextIO | None = None
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file = open(log_file, "a", encoding="utf-8", buffering=1)  # closed by _LogStream.detach_file
    stream = _LogStream(file)
    formatter = logging.Formatter(_FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(stream)]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(formatter)

    root = logging.getLogger()
    saved: list[tuple[logging.Logger, list[logging.Handler], bool, int]] = [
        (root, list(root.handlers), root.propagate, root.level)]
    root.handlers = list(handlers)
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
        logger.handlers = []
        logger.propagate = True
    for name in OWN_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)

    pinned: list[tuple[Any, Any]] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("default")  # every warning once per place, DeprecationWarning included
        logging.captureWarnings(True)
        if not verbose:
            for con, real in ((console, sys.stdout), (err_console, sys.stderr)):
                pinned.append((con, con.__dict__.get("_file")))
                con.file = real
            stack.enter_context(contextlib.redirect_stdout(stream))
            stack.enter_context(contextlib.redirect_stderr(stream))
        try:
            yield log_file
        finally:
            logging.captureWarnings(False)
            for con, previous in pinned:
                con.file = previous
            for logger, old_handlers, propagate, level in saved:
                logger.handlers = old_handlers
                logger.propagate = propagate
                logger.setLevel(level)
            for handler in handlers:
                handler.flush()
            stream.detach_file()
