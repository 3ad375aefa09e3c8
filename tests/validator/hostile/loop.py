"""An infinite loop that ignores SIGTERM (only the KILL after the grace period ends it)."""

import signal


def agent_main(problem_data: dict) -> list:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    n = 0
    while True:
        n += 1
