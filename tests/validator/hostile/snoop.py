"""Looks for things it must never see: the catalog, a ground-truth file, the validator's /proc, its own env,
and every readable non-system file of the sandbox (searching them for the canary it was not given)."""

import json
import os
import sys

NEEDLE = ("CAN" + "ARY-").encode()  # the canary's prefix, spelled so that this file does not contain it
SYSTEM = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)  # stock files, the same as the host's


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return "READ: " + fh.read(4000).decode("utf-8", "replace")
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def agent_main(problem_data: dict) -> list:
    targets = json.loads(problem_data["query"])
    found = {p: _read(p) for p in targets["paths"]}
    vpid = targets["validator_pid"]
    for p in (f"/proc/{vpid}/environ", f"/proc/{vpid}/cmdline", "/proc/1/cmdline", "/proc/1/environ",
              "/proc/self/environ", "/proc/self/mountinfo", "/etc/passwd", "/sandbox/problem.json"):
        found[p] = _read(p)
    found["proc"] = sorted(os.listdir("/proc"))[:50]
    found["env"] = dict(os.environ)
    readable = []
    for root, dirs, files in os.walk("/"):
        if root.startswith(SYSTEM):
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as fh:
                    if NEEDLE in fh.read(1 << 20):
                        readable.append(path)
            except OSError:
                pass
    found["files_mentioning_canary"] = readable
    print(json.dumps(found)[:20000])
    return [{"snoop": found}]
