"""Tries to write everywhere but its tmpfs, to change what it can see, and to fill its tmpfs."""

import json
import os


def _try(what, fn) -> str:
    try:
        fn()
        return "OK"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _write(path: str, size: int = 3) -> None:
    with open(path, "wb") as fh:
        fh.write(b"x" * size)


def agent_main(problem_data: dict) -> list:
    targets = json.loads(problem_data["query"])
    here = os.path.dirname(os.__file__)
    res = {}
    for path in ["/sandbox/agent.py", "/sandbox/new.py", "/etc/passwd", "/x", "/run/x", "/usr/lib/x",
                 "/dev/x", "/proc/sys/kernel/hostname", os.path.join(here, "os.py"), os.path.join(here, "evil.py"),
                 *targets["paths"], "/tmp/ok.txt"]:
        res[path] = _try("write", lambda p=path: _write(p))
    res["unlink gateway socket"] = _try("unlink", lambda: os.unlink("/run/gateway.sock"))
    res["chmod /dev/null"] = _try("chmod", lambda: os.chmod("/dev/null", 0o600))
    res["chmod agent"] = _try("chmod", lambda: os.chmod("/sandbox/agent.py", 0o777))
    res["file over RLIMIT_FSIZE"] = _try("write", lambda: _write("/tmp/big", 9 << 20))
    os.unlink("/tmp/big") if os.path.exists("/tmp/big") else None

    def fill() -> None:
        for i in range(1000):
            _write(f"/tmp/fill{i}", 4 << 20)

    res["fill tmpfs"] = _try("write", fill)
    return [{"writes": res}]
