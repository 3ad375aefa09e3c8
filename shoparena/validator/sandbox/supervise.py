"""Watching one sandboxed process, turning what it left behind into an :class:`Outcome`, and the worker pool.

:func:`watch` reads the process's stdout, stderr and report pipe until they close, keeping only the tails and at
most ``output_mb`` of report; at the deadline it sends TERM to the agent's process tree, KILL after the grace
period, and still collects whatever came out. :func:`make_outcome` decides the envelope from the host's own
observations (deadline, exit status, kernel counters) and the entry's report, which it validates strictly:
anything malformed is a ``FAILED`` envelope with a precise error, never an exception.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from subprocess import Popen
from typing import Any, TypeVar

from pydantic import ValidationError

from shoparena.validator.sandbox.types import Envelope, Outcome, SandboxLimits

_log = logging.getLogger(__name__)

__all__ = ["Watched", "descendants", "kill_uid", "make_outcome", "run_parallel", "signal_name", "watch"]

T = TypeVar("T")
_DRAIN_S = 0.5
"""How long pipes are still read after the main process exited (children holding them are then killed)."""


@dataclass
class Watched:
    """What the host saw of one run."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    report: bytearray = field(default_factory=bytearray)
    report_over_cap: bool = False
    timed_out: bool = False
    exit_code: int | None = None
    wall_s: float = 0.0


def _keep_tail(buf: bytearray, data: bytes, cap: int) -> None:
    buf += data
    if len(buf) > cap:
        del buf[: len(buf) - cap]


def watch(proc: Popen[bytes], report_fd: int | None, limits: SandboxLimits, cancel: threading.Event,
          signal_tree: Callable[[int], None], started: float) -> Watched:
    """Supervise ``proc`` until it ends (or is killed). ``signal_tree(sig)`` delivers a signal to everything the
    sandbox runs; ``started`` is the ``time.monotonic()`` of the launch."""
    w = Watched()
    cap_tail, cap_report = limits.tail_kb << 10, (limits.output_mb << 20) + 4096
    sel = selectors.DefaultSelector()
    streams = {proc.stdout.fileno(): w.stdout, proc.stderr.fileno(): w.stderr}  # type: ignore[union-attr]
    for fd in streams:
        sel.register(fd, selectors.EVENT_READ)
    if report_fd is not None:
        sel.register(report_fd, selectors.EVENT_READ)
    deadline = started + limits.timeout_s
    kill_at: float | None = None
    killed_at: float | None = None
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if killed_at is None and (cancel.is_set() or (kill_at is not None and now >= kill_at)):
                signal_tree(signal.SIGKILL)
                killed_at = now
            if kill_at is None and now >= deadline:
                w.timed_out = True
                signal_tree(signal.SIGTERM)
                kill_at = now + limits.kill_grace_s
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if (exited_at is not None and now - exited_at > _DRAIN_S) or \
                    (killed_at is not None and now - killed_at > 2.0):
                break
            nxt = kill_at if kill_at is not None and killed_at is None else deadline
            timeout = max(0.0, min(0.25, nxt - now)) if killed_at is None else 0.1
            for key, _ in sel.select(timeout):
                fd = int(key.fd)
                data = os.read(fd, 1 << 16)
                if not data:
                    sel.unregister(fd)
                elif fd == report_fd:
                    w.report += data
                    if len(w.report) > cap_report:
                        w.report_over_cap = True
                        sel.unregister(fd)
                        os.close(fd)  # the entry's next write fails: it exits
                        report_fd = None
                else:
                    _keep_tail(streams[fd], data, cap_tail)
    finally:
        sel.close()
        if proc.poll() is None:
            signal_tree(signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except Exception as exc:  # a process surviving SIGKILL this long is reported as is
            _log.warning("sandbox pid %s did not exit 10 s after SIGKILL: %s: %s", proc.pid, type(exc).__name__, exc)
        w.exit_code = proc.returncode
        w.wall_s = time.monotonic() - started
        if report_fd is not None:
            os.close(report_fd)
    return w


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from ``/proc/*/stat``), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def uid_processes(uid: int) -> set[int]:
    """Pids of live (or not yet reaped) processes whose real uid is ``uid``, from ``/proc/*/status``."""
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="utf-8") as fh:
                real = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError, IndexError):
            continue
        if real == uid:
            found.add(int(entry.name))
    return found


def kill_uid(uid: int, timeout_s: float = 5.0) -> set[int]:
    """SIGKILL every process of host uid ``uid`` until none is left or ``timeout_s`` passed; the survivors.

    Waiting on the sandbox's first process is not enough: when a pid namespace's init is killed, the kernel kills
    the namespace's other processes asynchronously, and under load they can outlive the outer process by a while.
    A dedicated sandbox uid goes back to the pool only through here, so the next sandbox never shares its uid with
    what is left of the last one."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = uid_processes(uid)
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def parse_report(raw: bytes) -> tuple[float | None, dict[str, Any] | None, str | None]:
    """``(ready wall time, envelope dict, what is wrong)`` from the entry's report lines."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    ready = envelope = None
    try:
        records = [json.loads(line) for line in lines]
    except ValueError as exc:  # invalid JSON, non-UTF-8 bytes, an integer of too many digits
        return None, None, f"the report channel holds a line that is not JSON ({str(exc)[:300]})"
    except RecursionError:  # nesting deeper than the decoder's stack: the agent wrote the channel itself
        return None, None, "the report channel holds JSON nested too deep to decode"
    if records and isinstance(records[0], dict) and isinstance(records[0].get("ready"), int | float):
        ready = float(records[0]["ready"])
    if len(records) > 2 or (records and ready is None):
        return ready, None, f"the report channel holds {len(records)} records, not a ready mark and one envelope"
    if len(records) == 2:
        envelope = records[1].get("envelope") if isinstance(records[1], dict) else None
        if not isinstance(envelope, dict) or set(records[1]) != {"envelope"}:
            return ready, None, "the second report record is not {\"envelope\": {...}}"
    return ready, envelope, None


def signal_name(code: int | None) -> str:
    """How a process ended, in words (``exited with code 3``, ``was killed by SIGKILL``)."""
    if code is None:
        return "did not exit"
    sig = -code if code < 0 else code - 128 if code > 128 else 0
    if sig:
        try:
            return f"was killed by {signal.Signals(sig).name}"
        except ValueError:
            pass
    return f"exited with code {code}"


def make_outcome(problem_id: str, w: Watched, *, backend: str, limits: SandboxLimits, launched_wall: float,
                 enforced: dict[str, str], counters: dict[str, int]) -> Outcome:
    """The outcome of one run: the host's observations first, the entry's envelope only where it is valid."""
    ready, env, problem = parse_report(bytes(w.report)) if not w.report_over_cap else (None, None, None)
    overhead = (ready - launched_wall) * 1000 if ready is not None else None
    status, error, dialogue, exec_time = "FAILED", None, None, w.wall_s
    if env is not None:
        status, error, dialogue, exec_time, problem = _check_envelope(env, w.wall_s)
    if w.timed_out:
        status = "TIMED_OUT"
        error = {"type": "Timeout", "message": f"agent_main exceeded {limits.timeout_s:g} s (TERM, then KILL "
                                                f"after {limits.kill_grace_s:g} s)"}
        dialogue = dialogue if env is not None and env.get("status") == "SUCCESS" else None
    elif w.report_over_cap:
        error = {"type": "OutputTooLarge", "message": f"the envelope exceeded {limits.output_mb} MB"}
    elif problem is not None:
        status, dialogue, error = "FAILED", None, {"type": "MalformedEnvelope", "message": problem}
    elif env is None:
        error = _no_envelope(w, ready, counters, limits)
    tail = limits.tail_kb << 10
    try:
        envelope = Envelope(problem_id=problem_id, status=status, execution_time=round(exec_time, 4),  # type: ignore[arg-type]
                            error=error, dialogue=dialogue)
    except ValidationError as exc:  # e.g. steps that are not objects
        envelope = Envelope(problem_id=problem_id, status="FAILED", execution_time=round(exec_time, 4), error={
            "type": "MalformedEnvelope", "message": f"the dialogue is not a list of step objects: "
                                                    f"{exc.errors()[0]['msg']}"})
    return Outcome(envelope=envelope, backend=backend, exit_code=w.exit_code,
                   stdout_tail=bytes(w.stdout[-tail:]).decode("utf-8", "replace"),
                   stderr_tail=bytes(w.stderr[-tail:]).decode("utf-8", "replace"), wall_s=round(w.wall_s, 4),
                   start_overhead_ms=round(overhead, 2) if overhead is not None else None, limits=limits,
                   enforced=enforced, counters=counters)


def _check_envelope(env: dict[str, Any], wall: float) -> tuple[str, Any, Any, float, str | None]:
    status, error, dialogue = env.get("status"), env.get("error"), env.get("dialogue")
    t = env.get("execution_time")
    exec_time = float(t) if isinstance(t, int | float) and 0 <= t <= wall else wall
    if status not in ("SUCCESS", "FAILED"):
        return "FAILED", None, None, exec_time, f"envelope status {str(status)[:40]!r} is not SUCCESS or FAILED"
    if error is not None and not (isinstance(error, dict) and set(error) == {"type", "message"}
                                  and all(isinstance(v, str) for v in error.values())):
        return "FAILED", None, None, exec_time, "envelope error is not {type: str, message: str}"
    if status == "SUCCESS" and not isinstance(dialogue, list):
        return "FAILED", None, None, exec_time, "a SUCCESS envelope carries no dialogue list"
    if status == "FAILED" and error is None:
        error = {"type": "AgentError", "message": "the agent failed without an error"}
    return status, error, dialogue if status == "SUCCESS" else None, exec_time, None


def _no_envelope(w: Watched, ready: float | None, counters: dict[str, int], limits: SandboxLimits
                 ) -> dict[str, str]:
    how = signal_name(w.exit_code)
    if ready is None:
        last = bytes(w.stderr).decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return {"type": "SandboxError", "message": f"the sandbox did not start (it {how}): {last[0][:500]}"}
    hints = []
    if counters.get("oom_kills"):
        hints.append(f"the memory limit ({limits.memory_mb} MB) was reached")
    if counters.get("pids_max_hits"):
        hints.append(f"the process limit ({limits.pids}) was hit {counters['pids_max_hits']} times")
    why = f" ({'; '.join(hints)})" if hints else ""
    return {"type": "AgentCrashed", "message": f"the agent process {how} before agent_main returned{why}"}


def run_parallel(items: Sequence[T], workers: int, fn: Callable[[T, int, threading.Event], Outcome],
                 on_error: Callable[[T, BaseException], Outcome]) -> Iterator[Outcome]:
    """``fn(item, slot, cancel)`` on ``workers`` threads (``slot`` = the thread's index); outcomes as they finish.
    An exception of ``fn`` becomes ``on_error(item, exc)``. Closing the iterator sets ``cancel`` and waits."""
    results: queue.Queue[Outcome | None] = queue.Queue()
    cancel = threading.Event()
    todo = iter(items)
    lock = threading.Lock()
    n = max(1, min(workers, len(items)))

    def work(slot: int) -> None:
        while not cancel.is_set():
            with lock:
                item = next(todo, _END)
            if item is _END:
                break
            try:
                results.put(fn(item, slot, cancel))  # type: ignore[arg-type]
            except Exception as exc:  # infrastructure trouble is reported per problem
                results.put(on_error(item, exc))  # type: ignore[arg-type]
        results.put(None)

    threads = [threading.Thread(target=work, args=(slot,), daemon=True, name=f"sandbox-{slot}") for slot in range(n)]
    for t in threads:
        t.start()
    try:
        done = 0
        while done < n:
            out = results.get()
            if out is None:
                done += 1
            else:
                yield out
    finally:
        cancel.set()
        for t in threads:
            t.join()


_END = object()
