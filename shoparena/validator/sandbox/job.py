"""One problem of a batch as the executor (:mod:`executor`) sees it: its pipes, buffers, deadlines and end
(standard library only; loaded by :mod:`entry` from this directory).

States: ``queued`` → ``spawning`` (the zygote was asked to fork it; ``retry`` after a refused fork) → ``moving``
(the validator is moving it into its cgroups) → ``running`` (its problem went down the go pipe) → finished.
A job is finished when its process has been reaped (or is known never to have existed) and its pipes are closed
or drained for :data:`DRAIN_S`; one killed but never reaped is given up after :data:`GIVE_UP_S`.
"""

import json
import os
import selectors
import signal

DRAIN_S, GIVE_UP_S = 0.5, 2.0


class Job:
    """One problem's process: what the executor knows of it and the pipes it reads and writes."""

    def __init__(self, index: int, problem: dict, env: dict, sel: selectors.BaseSelector) -> None:
        self.index, self.problem, self.env, self.sel = index, problem, env, sel
        self.state = "queued"
        self.pid = None
        self.spawned = False
        self.fds: dict = {}
        self.head, self.report, self.out, self.err = bytearray(), bytearray(), bytearray(), bytearray()
        self.go = b""
        self.start = self.deadline = self.kill_at = self.killed_at = self.exited_at = self.retry_at = None
        self.exit_code = None
        self.timed_out = self.over_cap = False
        self.error = None
        self.dir = None

    def fail(self, kind: str, message: str) -> None:
        """The executor's own verdict (the process never ran the agent, or was killed for a shared limit)."""
        self.error = {"type": kind, "message": message}
        self.close()

    # -- pipes ---------------------------------------------------------------------------------------------------
    def open(self) -> list:
        """New pipes; returns the ends the problem's process gets (report, go, stdout, stderr), to be handed over
        and closed by the caller."""
        ends = [os.pipe() for _ in range(4)]
        self.fds = {"report": ends[0][0], "go": ends[1][1], "out": ends[2][0], "err": ends[3][0]}
        for kind, fd in self.fds.items():
            os.set_blocking(fd, False)
            if kind != "go":
                self.sel.register(fd, selectors.EVENT_READ, (kind, self))
        self.state, self.retry_at = "spawning", None
        return [ends[0][1], ends[1][0], ends[2][1], ends[3][1]]

    def close_fd(self, kind: str) -> None:
        fd = self.fds.pop(kind, None)
        if fd is None:
            return
        try:
            self.sel.unregister(fd)
        except (KeyError, ValueError):
            pass
        os.close(fd)

    def close(self) -> None:
        for kind in list(self.fds):
            self.close_fd(kind)

    def read(self, kind: str) -> "bytes | None":
        """What the pipe holds (``b""``: it was closed, and is closed here too; None: nothing yet)."""
        try:
            data = os.read(self.fds[kind], 1 << 16)
        except BlockingIOError:
            return None
        except (OSError, KeyError):
            data = b""
        if not data:
            self.close_fd(kind)
        return data

    def on_report(self, cap: int) -> bool:
        """Read the report pipe; True when the process's pid has just become known (its first line)."""
        data = self.read("report")
        if data is None:
            return False
        if self.pid is not None:
            self.report += data
            if len(self.report) > cap:
                self.over_cap = True
                self.close_fd("report")  # the process's next write fails: it exits
            return False
        self.head += data
        if not data:
            self.fail("SandboxError", "the problem's process ended before it started")
            return False
        if b"\n" not in self.head:
            return False
        line, _, rest = bytes(self.head).partition(b"\n")
        try:
            self.pid = int(json.loads(line)["pid"])
        except (ValueError, KeyError, TypeError):
            self.fail("SandboxError", "the problem's process sent no pid")
            return False
        self.report += rest
        return True

    def on_tail(self, kind: str, cap: int) -> None:
        buf = self.out if kind == "out" else self.err
        buf += self.read(kind) or b""
        if len(buf) > cap:
            del buf[: len(buf) - cap]

    def send_go(self, payload: bytes) -> None:
        self.go, self.state = payload, "running"
        self.sel.register(self.fds["go"], selectors.EVENT_WRITE, ("go", self))

    def on_go(self) -> None:
        try:
            self.go = self.go[os.write(self.fds["go"], self.go):]
        except (OSError, KeyError):
            self.go = b""
        if not self.go:
            self.close_fd("go")  # the process reads to the end: its problem is complete

    # -- time -----------------------------------------------------------------------------------------------------
    def killpg(self, sig: int) -> None:
        if self.pid is not None:
            killpg(self.pid, sig)

    def tick(self, now: float, grace: float) -> bool:
        """Timeouts (TERM to the group, KILL after ``grace``); True when the job is finished."""
        if now >= self.deadline and not self.timed_out and self.exited_at is None and self.error is None:
            self.timed_out = True
            if self.state == "running":
                self.killpg(signal.SIGTERM)
                self.kill_at = now + grace
            else:  # no agent code ran yet
                self.killpg(signal.SIGKILL)
                self.killed_at = now
                self.close()
        if self.kill_at is not None and self.killed_at is None and now >= self.kill_at:
            self.killpg(signal.SIGKILL)
            self.killed_at = now
        if self.exited_at is not None and self.fds and now - self.exited_at > DRAIN_S:
            self.close()
        gone = self.exited_at is not None or self.pid is None or (
            self.killed_at is not None and now - self.killed_at > GIVE_UP_S)
        return not self.fds and gone and self.state != "retry"

    def marks(self, now: float) -> list:
        """When this job next needs attention."""
        out = [m for m in (self.deadline, self.kill_at, self.retry_at) if m is not None]
        if self.exited_at is not None or self.killed_at is not None:
            out.append(now + 0.05)
        return out

    def done(self, now: float) -> tuple:
        """The ``done`` header and payloads (report, stdout tail, stderr tail) for the validator."""
        end = self.exited_at if self.exited_at is not None else now
        header = {"done": self.index, "exit_code": self.exit_code, "timed_out": self.timed_out,
                  "over_cap": self.over_cap, "wall_s": end - self.start, "error": self.error}
        return header, (bytes(self.report), bytes(self.out), bytes(self.err))


def killpg(pgid: int, sig: int) -> None:
    if pgid > 0:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
