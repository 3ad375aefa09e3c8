"""One agent, many behaviours, chosen by the problem's query, so that one batch can mix hostile and good problems:
``search`` (a real gateway search), ``sleep:<s>``, ``forkbomb``, ``membomb`` (spread over processes), ``loop``
(ignores SIGTERM), ``segv``, ``exit``, ``kill-executor`` / ``stop-executor`` (SIGKILL / SIGSTOP to its parent, the
batch executor)."""

import os
import signal
import subprocess
import sys
import time

from shoparena.sdk import GatewayError, find_product


def agent_main(problem_data: dict) -> list:
    what = problem_data["query"]
    if what == "search":
        try:
            hits = find_product("wireless headphones")
        except GatewayError as exc:
            return [{"error": str(exc)}]
        return [{"problem_id": problem_data["problem_id"], "hits": [h["product_id"] for h in hits]}]
    if what.startswith("sleep:"):
        time.sleep(float(what[6:]))
        return [{"slept": float(what[6:]), "at": time.time()}]
    if what == "forkbomb":
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.001)
    if what == "membomb":
        code = "import time; x = b'\\x01' * (300 << 20); time.sleep(3)"
        procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
        return [{"children": [p.wait() for p in procs]}]
    if what == "loop":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    if what == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "exit":
        os._exit(9)
    if what == "kill-executor":
        os.kill(os.getppid(), signal.SIGKILL)
        return [{"killed": os.getppid()}]
    if what == "stop-executor":
        os.kill(os.getppid(), signal.SIGSTOP)
        time.sleep(60)
    raise RuntimeError(f"unknown behaviour {what!r}")
