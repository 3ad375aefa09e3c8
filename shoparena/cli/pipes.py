"""A reader that stops reading (``| head``, ``| less`` quit early) ends a command quietly.

When the process reading a command's standard output exits, the next write raises ``BrokenPipeError`` and Python
prints a traceback; if that write is the interpreter's own last flush at exit, it prints "Exception ignored ..."
and exits 120. Neither says anything useful: the reader chose to stop. :func:`exit_if_closed_pipe` is the one way a
command, a script or a bench ends then: standard output is pointed at ``/dev/null`` so no later flush can raise
again, and the exit code is 1 (the README's "a failure with no more specific code": the output was not all
delivered). :func:`run_script` runs a script's ``main`` under that rule, the shape every ``scripts/`` and
``bench/`` entry point shares.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import NoReturn

#: The exit code of a command whose reader went away before it finished writing.
EXIT_CLOSED_PIPE = 1


def exit_if_closed_pipe(exc: BaseException) -> None:
    """Exit :data:`EXIT_CLOSED_PIPE` without a traceback when ``exc`` is a write to a pipe whose reader has gone
    (``EPIPE``), with stdout on ``/dev/null`` so the interpreter's last flush is silent; return otherwise, for the
    caller to raise or report ``exc``."""
    if not (isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout already closed or replaced by an object without a fd
        pass
    sys.exit(EXIT_CLOSED_PIPE)


def flush_stdout() -> None:
    """Flush standard output now, where a closed reader ends the process quietly, instead of at interpreter exit."""
    stream = sys.stdout
    if stream is None or stream.closed:
        return
    try:
        stream.flush()
    except OSError as exc:
        exit_if_closed_pipe(exc)
        raise


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's ``main`` and exit with its return value (``None`` is 0); a closed reader exits quietly."""
    try:
        code = main()
    except OSError as exc:
        exit_if_closed_pipe(exc)
        raise
    flush_stdout()
    sys.exit(0 if code is None else code)
