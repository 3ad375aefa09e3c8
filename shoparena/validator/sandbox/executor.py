"""Batch mode inside the sandbox, the trusted side: the executor (standard library only; loaded by :mod:`entry`).

ORO's ``sandbox_executor`` (docs/arena.md §3) with the agent's code kept out of it: the executor forks the zygote
(:mod:`zygote`, which imports the agent once), then reads the batch (problems and each problem's environment,
run token included) from an inherited memfd that it closes at once, and runs up to ``workers`` problems at a
time, each in its own process forked by the zygote and re-parented to the executor (a child subreaper). It is not
dumpable, so processes of the agent (same uid) can neither read its memory nor its /proc files; they can only
signal it, which ends the batch early (the validator keeps what was reported and fails the rest).

Per problem (:class:`job.Job`): start (``spawn`` to the zygote) → the process reports its pid → the executor checks
it is its child and leads its own group → (where the validator has cgroups) a pidfd goes to the validator over the
control socket, which moves the process into the problem's own cgroups and answers → the executor writes the
problem, its environment (only this problem's token) and a fresh working directory into the go pipe → the agent
runs. The executor enforces the per-problem timeout (TERM to the problem's process group, KILL after the grace
period) and the output cap, keeps stdout/stderr tails, and streams one framed message per problem to the
validator as each finishes: a JSON header line, then the raw report, stdout tail and stderr tail (``len``).
Without per-problem cgroups, a fork the sandbox's process cap refuses makes it kill the problem with the most
processes (a fork bomb), so that the others can still start.
"""

import errno
import json
import os
import selectors
import shutil
import signal
import socket
import time

_RETRY_S = 0.05


class Executor:
    def __init__(self, config: dict, out_fd: int, cmd: socket.socket, zpid: int, jobs: list,
                 sel: selectors.BaseSelector, killpg) -> None:
        self.c, self.out_fd, self.cmd, self.zpid, self.sel, self.killpg = config, out_fd, cmd, zpid, sel, killpg
        self.ctl = socket.socket(fileno=config["ctl_fd"]) if config.get("ctl_fd") is not None else None
        self.me = os.getpid()
        self.queue, self.running, self.by_pid = list(jobs), [], {}
        self.imported = False
        self.import_deadline = time.monotonic() + config["timeout_s"]
        self.stopping = False
        self.wake, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        sel.register(self.wake, selectors.EVENT_READ, ("wake", None))
        sel.register(cmd, selectors.EVENT_READ, ("zygote", None))
        if self.ctl is not None:
            sel.register(self.ctl, selectors.EVENT_READ, ("ctl", None))

    def _on_signal(self, sig: int, _frame) -> None:
        if sig == signal.SIGTERM:
            self.stopping = True

    def send(self, header: dict, *payloads: bytes) -> None:
        if payloads:
            header["len"] = [len(p) for p in payloads]
        view = memoryview(json.dumps(header).encode() + b"\n" + b"".join(payloads))
        try:
            while view:
                view = view[os.write(self.out_fd, view):]
        except OSError:  # the validator is gone
            self.stopping = True

    def loop(self) -> None:
        while (self.queue or self.running) and not self.stopping:
            now = time.monotonic()
            if not self.imported and now >= self.import_deadline:
                self._end_all({"type": "Timeout", "message": "importing the agent file exceeded "
                                                             f"{self.c['timeout_s']:g} s"}, timed_out=True)
                break
            self._fill(now)
            for job in list(self.running):
                if job.state == "retry" and now >= job.retry_at:
                    self._dispatch(job, now)
                if job.tick(now, self.c["kill_grace_s"]):
                    self._finish(job, now)
            self._fill(now)  # a slot a finished job freed is taken now, not after the next wait
            marks = [self.import_deadline] if not self.imported else []
            for job in self.running:
                marks += job.marks(now)
            for key, _mask in self.sel.select(max(0.0, min([0.25, *[m - now for m in marks]]))):
                kind, job = key.data
                self._event(kind, job)
            self._reap()
        for job in self.running:
            job.killpg(signal.SIGKILL)
        self.killpg(self.zpid, signal.SIGKILL)

    def _fill(self, now: float) -> None:
        while self.imported and self.queue and len(self.running) < self.c["workers"]:
            self._dispatch(self.queue.pop(0), now)

    def _event(self, kind: str, job) -> None:
        if kind == "report":
            if job.on_report(self.c["output_cap"]):
                self.by_pid[job.pid] = job
                self._verify(job)
        elif kind in ("out", "err"):
            job.on_tail(kind, self.c["tail"])
        elif kind == "go":
            job.on_go()
        elif kind == "zygote":
            self._on_zygote()
        elif kind == "ctl":
            self._on_ctl()
        else:  # a signal woke us: reaping follows
            try:
                os.read(self.wake, 512)
            except OSError:
                pass

    # -- starting a problem ---------------------------------------------------------------------------------------
    def _dispatch(self, job, now: float) -> None:
        theirs = job.open()
        try:
            socket.send_fds(self.cmd, [json.dumps({"spawn": job.index}).encode()], theirs)
            ok = True
        except OSError:
            ok = False
        for fd in theirs:
            os.close(fd)
        if job.start is None:
            job.start, job.deadline = now, now + self.c["timeout_s"]
            self.running.append(job)
            self.send({"start": job.index, "t": time.time()})
        if not ok:
            job.fail("SandboxError", "the agent's zygote process is gone")

    def _on_zygote(self) -> None:
        try:
            data = self.cmd.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._zygote_lost()
            return
        try:  # the zygote has run the agent's module code: its messages are checked, never trusted
            msg = json.loads(data)
            assert isinstance(msg, dict)
        except (ValueError, AssertionError):
            return
        if "imported" in msg:
            if self.imported:
                return
            self.send({"imported": bool(msg["imported"]), "seconds": msg.get("seconds")})
            if msg["imported"]:
                self.imported = True
            else:
                error = msg.get("error")
                ok = isinstance(error, dict) and all(isinstance(error.get(k), str) for k in ("type", "message"))
                self._end_all(error if ok else {"type": "AgentError", "message": "importing the agent failed"})
            return
        job = next((j for j in self.running if j.index == msg.get("spawned")), None)
        if job is None or job.state != "spawning":
            return
        if msg.get("ok"):
            job.spawned = True
            self._verify(job)
            return
        job.close()
        code = msg.get("errno")
        if code in (errno.EAGAIN, errno.ENOMEM) and time.monotonic() + _RETRY_S < job.deadline:
            if not self.c.get("problem_cgroups"):
                self._kill_biggest_group()
            job.state, job.retry_at = "retry", time.monotonic() + _RETRY_S
        else:
            why = os.strerror(code) if isinstance(code, int) and code > 0 else "the fork was killed"
            job.fail("SandboxError", f"could not fork the problem's process: {why}")

    def _verify(self, job) -> None:
        if not job.spawned or job.pid is None or job.state != "spawning":
            return
        try:
            with open(f"/proc/{job.pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            ok = int(fields[1]) == self.me and int(fields[2]) == job.pid
        except (OSError, ValueError, IndexError):
            ok = False
        if not ok:
            self.by_pid.pop(job.pid, None)
            job.fail("SandboxError", "the problem's process could not be verified")
            return
        if self.ctl is None:
            self._go(job)
            return
        try:
            pidfd = os.pidfd_open(job.pid)
        except OSError:  # it is gone already: its reaping finishes it
            job.fail("SandboxError", "the problem's process ended before it started")
            return
        job.state = "moving"
        try:
            socket.send_fds(self.ctl, [json.dumps({"move": job.index}).encode()], [pidfd])
        finally:
            os.close(pidfd)

    def _on_ctl(self) -> None:
        data = self.ctl.recv(4096)
        if not data:
            self.stopping = True
            return
        index = json.loads(data).get("moved")
        job = next((j for j in self.running if j.index == index), None)
        if job is not None and job.state == "moving":
            self._go(job)

    def _go(self, job) -> None:
        job.dir = os.path.join(self.c["tmp"], f"problem-{job.index}")
        shutil.rmtree(job.dir, ignore_errors=True)
        os.mkdir(job.dir, 0o700)
        env = dict(job.env, PWD=job.dir)
        for name in self.c.get("dir_vars") or ("HOME",):
            env[name] = job.dir
        job.send_go(json.dumps({"problem": job.problem, "env": env, "dir": job.dir}).encode())

    # -- ends -----------------------------------------------------------------------------------------------------
    def _reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid, job = info.si_pid, self.by_pid.get(info.si_pid)
            if job is not None:
                self.killpg(pid, signal.SIGKILL)  # what it left behind, while its zombie still holds the group id
            try:
                status = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                continue
            if pid == self.zpid:
                self._zygote_lost()
            elif job is not None:
                del self.by_pid[pid]
                job.exit_code, job.exited_at = os.waitstatus_to_exitcode(status), time.monotonic()

    def _finish(self, job, now: float) -> None:
        job.close()
        self.running.remove(job)
        if job.pid is not None:
            self.by_pid.pop(job.pid, None)
        if job.dir:
            shutil.rmtree(job.dir, ignore_errors=True)
        header, payloads = job.done(now)
        self.send(header, *payloads)

    def _kill_biggest_group(self) -> None:
        groups = {j.pid: j for j in self.running if j.pid is not None and j.state == "running"}
        counts = dict.fromkeys(groups, 0)
        for entry in os.scandir("/proc"):
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    pgrp = int(fh.read().rsplit(b")", 1)[1].split()[2])
            except (OSError, ValueError, IndexError):
                continue
            if pgrp in counts:
                counts[pgrp] += 1
        if counts and max(counts.values()) > 1:
            victim = groups[max(counts, key=lambda p: counts[p])]
            victim.error = {"type": "ProcessLimit", "message": f"the problem's {counts[victim.pid]} processes "
                            "filled the sandbox's process limit; it was killed so that the other problems could run"}
            victim.killpg(signal.SIGKILL)
            victim.killed_at = time.monotonic()

    def _zygote_lost(self) -> None:
        self.zpid = -1
        try:
            self.sel.unregister(self.cmd)
        except (KeyError, ValueError):
            pass
        if not self.imported:
            self._end_all({"type": "AgentCrashed", "message": "the agent process died while importing the agent"})
            return
        for job in self.running:
            if job.state in ("spawning", "retry"):
                job.state = "failed"
                job.fail("SandboxError", "the agent's zygote process died before it started this problem")
        self._end_all({"type": "SandboxError", "message": "the agent's zygote process died before this problem"})

    def _end_all(self, error: dict, timed_out: bool = False) -> None:
        """Every problem not started yet gets ``error`` (the agent could not be imported, the zygote died)."""
        for job in self.queue:
            self.send({"start": job.index, "t": time.time()})
            self.send({"done": job.index, "exit_code": None, "timed_out": timed_out, "over_cap": False,
                       "wall_s": 0.0, "error": error}, b"", b"", b"")
        self.queue = []


def main(config: dict, entry, zygote) -> None:
    """The executor's life: prepare, fork the zygote, read the batch, run it, exit."""
    job_mod = entry.sibling("job")
    out_fd = int(config["out_fd"])
    zygote.prctl(zygote.PR_SET_DUMPABLE, 0)
    zygote.prctl(zygote.PR_SET_CHILD_SUBREAPER, 1)
    entry.set_limits(config.get("rlimits") or {})
    os.write(out_fd, json.dumps({"ready": time.time()}).encode() + b"\n")
    cmd, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zpid = os.fork()
    if zpid == 0:
        cmd.close()
        zygote.serve(theirs, config, entry)
        os._exit(0)
    theirs.close()
    with os.fdopen(int(config["input_fd"]), "rb") as fh:  # read after the fork: the zygote never holds it
        batch = json.loads(fh.read())
    sel = selectors.DefaultSelector()
    jobs = [job_mod.Job(i, p, e, sel) for i, (p, e) in enumerate(zip(batch["problems"], batch["envs"], strict=True))]
    del batch
    Executor(config, out_fd, cmd, zpid, jobs, sel, job_mod.killpg).loop()
    os._exit(0)
