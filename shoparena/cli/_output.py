"""What a command shows on the console and what goes to its log file.

Commands show progress bars and result tables. The libraries underneath (transformers, TRL, datasets, torch,
accelerate, peft, the HTTP clients) speak through Python's ``warnings`` and ``logging``: inside
``library_output`` both go to the run's log file instead of the console, and ``--verbose`` leaves them on the
console as they are.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

#: The loggers of the libraries a command runs on; their records go to the log file.
LIBRARY_LOGGERS: tuple[str, ...] = (
    "py.warnings", "transformers", "trl", "datasets", "accelerate", "peft", "torch", "huggingface_hub",
    "urllib3", "httpx", "httpcore", "openai", "filelock", "matplotlib", "fsspec",
)

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def library_output(log_file: Path | None, *, verbose: bool = False) -> Iterator[Path | None]:
    """Route library warnings and log records to ``log_file`` (appended; ``None``: dropped) unless ``verbose``.

    Yields the log file (``None`` when nothing is kept). Everything is put back as it was on exit, so tests
    and library callers see Python's defaults again.
    """
    if verbose:
        yield None
        return
    handler: logging.Handler
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter(_FORMAT))
    else:
        handler = logging.NullHandler()
    saved = []
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate))
        logger.handlers = [handler]
        logger.propagate = False
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        logging.captureWarnings(True)
        try:
            yield log_file
        finally:
            logging.captureWarnings(False)
            for logger, handlers, propagate in saved:
                logger.handlers = handlers
                logger.propagate = propagate
            handler.close()
