"""A memory bomb: ``inline`` grows one process until it fails; ``children`` spreads the bomb over processes,
each under the per-process cap, so only a cap on the whole tree stops it."""

import json
import subprocess
import sys


def agent_main(problem_data: dict) -> list:
    mode = json.loads(problem_data["query"])["mode"]
    if mode == "inline":
        hoard = []
        while True:
            hoard.append(b"\x01" * (32 << 20))
    code = "import time; x = b'\\x01' * (300 << 20); time.sleep(1)"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
    return [{"children": [p.wait() for p in procs]}]
