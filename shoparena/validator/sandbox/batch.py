"""Batch mode, the validator's side: one sandbox for a whole batch, one outcome per problem as each finishes.

:func:`run_batch` asks every problem's environment up front (``env_for``), starts the backend's sandbox once with
the executor (:mod:`executor`) as its command, hands it the batch through a memfd (problems, environments: the run
tokens never appear in an argv, an environment of the sandbox, or a file), and then, on a supervisor thread:
reads the executor's framed stream (``ready``, ``imported``, ``start``, ``done`` + report, stdout and stderr
tails), turns each ``done`` into an :class:`Outcome` with the same rules as the per-problem mode
(:func:`~shoparena.validator.sandbox.supervise.make_outcome`), serves the executor's requests to move a problem's
process into that problem's own cgroups (:class:`~shoparena.validator.sandbox.batch_cgroup.BatchCgroup`), and enforces
the batch deadline (``(n + 1) × (timeout + grace + slack)``, the import counted as one problem). If the sandbox runs
past the deadline, the problems it had not finished are still reported: ``TIMED_OUT`` where they had started,
``FAILED`` (``SandboxError``) otherwise. The host also checks each problem's wall time against the per-problem
timeout by its own clock. Closing the iterator kills the sandbox.

A sandbox that dies on its own (killed from outside, failed to start, launch error) is presumed the validator's
failure: the problems it had not finished run again in a fresh sandbox, at most :data:`RETRIES` more times (those
that were running when a sandbox died first, one at a time). The agent is charged (``FAILED``, ``SandboxError``)
only with what it can have done: a death by the batch's memory cap (an OOM kill in the executor's group); a problem
that was running each time two sandboxes died under it; or a problem whose every sandbox died after the agent's
code had started (its processes share the executor's uid and can signal it, so no one outside can tell such a death
from a kill by the machine). What still has no outcome after the last retry is reported with
:attr:`Outcome.infra_failure` set, which scoring and records never count as the agent's.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any, Protocol

from shoparena.validator.sandbox import seccomp
from shoparena.validator.sandbox.base import RETRIES, base_env, memfd
from shoparena.validator.sandbox.batch_cgroup import RESERVE_PIDS, BatchCgroup, batch_cgroup, host_pid
from shoparena.validator.sandbox.supervise import Watched, make_outcome, signal_name
from shoparena.validator.sandbox.types import Envelope, Outcome, SandboxLimits

_log = logging.getLogger(__name__)

__all__ = ["Launch", "run_batch"]

_SLACK_S = 2.0
_SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")


@dataclass
class Launch:
    """What a backend started for one batch."""

    proc: Popen[bytes]
    kill: Callable[[], None]
    """Kill everything the sandbox runs (idempotent)."""
    enforced: dict[str, str]
    cleanup: Callable[[], None] = field(default=lambda: None)
    ancestors: tuple[int, ...] = ()
    """Host pids one of which every process of the sandbox descends from (checked before a cgroup move)."""


class BatchBackend(Protocol):
    name: str

    def _launch_batch(self, agent: bytes, config: dict[str, Any], fds: list[int], env: dict[str, str],
                      gateway_socket: Path, limits: SandboxLimits, cgroup: BatchCgroup | None) -> Launch: ...


def batch_config(limits: SandboxLimits, workers: int, *, nproc: bool, problem_cgroups: bool) -> dict[str, Any]:
    """The executor's settings (the backend adds ``agent``, ``tmp`` and the fds)."""
    from shoparena.validator.sandbox.limits import rlimits

    problem = rlimits(limits, nproc=nproc and not problem_cgroups)
    sandbox = {"CORE": 0, "NOFILE": limits.open_files, "FSIZE": limits.file_size_mb << 20}
    if nproc:
        sandbox["NPROC"] = workers * limits.pids + RESERVE_PIDS
    return {"mode": "batch", "workers": workers, "timeout_s": limits.timeout_s, "kill_grace_s": limits.kill_grace_s,
            "output_cap": (limits.output_mb << 20) + 4096, "tail": limits.tail_kb << 10, "rlimits": sandbox,
            "problem_rlimits": problem, "problem_cgroups": problem_cgroups,
            "group_filter": seccomp.group_filter().hex() if seccomp.supported() else None}


def run_batch(backend: BatchBackend, agent: bytes, problems: Sequence[dict[str, Any]],
              env_for: Callable[[str], dict[str, str]], address: str, gateway_socket: Path, limits: SandboxLimits,
              workers: int, problem_cgroups: bool = True, retries: int = RETRIES) -> Iterator[Outcome]:
    """Outcomes of ``problems`` run in one sandbox of ``backend`` (and, where it dies, in up to ``retries`` fresh
    ones), as they finish (see the module docstring). ``env_for`` is asked again for a problem that is retried."""
    pending = list(problems)
    died_under: dict[str, int] = {}
    """Problem → how many sandboxes died while it was running."""
    deaths: dict[str, list[bool]] = {}
    """Problem → for each sandbox that died before giving its outcome: whether the agent's code had started there."""
    for attempt in range(retries + 1):
        suspects = [p for p in pending if died_under.get(p["problem_id"])]
        rest = [p for p in pending if not died_under.get(p["problem_id"])]
        again: list[dict[str, Any]] = []
        # a problem that was running when a sandbox died is retried alone, so a second death names its cause
        for group, n in ((suspects, 1), (rest, workers)):
            if not group:
                continue
            agent_ran: dict[str, bool] = {}
            with closing(_one_batch(backend, agent, group, env_for, address, gateway_socket, limits, n,
                                    problem_cgroups, agent_ran)) as outs:
                for out in outs:
                    pid = out.envelope.problem_id
                    if not out.infra_failure:
                        yield out
                        continue
                    deaths.setdefault(pid, []).append(agent_ran.get(pid, False))
                    if out.started_at is not None:
                        died_under[pid] = died_under.get(pid, 0) + 1
                    if died_under.get(pid, 0) >= 2:
                        yield _charged(out, "this problem was running each time: twice in a row, the second time "
                                            "alone")
                    elif attempt < retries:
                        again.append(next(p for p in group if p["problem_id"] == pid))
                    elif all(deaths[pid]):  # the agent's processes can signal their executor: no outsider's proof
                        yield _charged(out, f"each of the {len(deaths[pid])} sandboxes died after the agent's code "
                                            "had started")
                    else:
                        yield out
        if not again:
            return
        _log.warning("batch sandbox of %s died; %d problem(s) run again in a fresh sandbox (retry %d of %d)",
                     backend.name, len(again), attempt + 1, retries)
        pending = again


def _charged(out: Outcome, why: str) -> Outcome:
    """A sandbox death the agent is held to (``why``): its envelope is the agent's ``FAILED`` outcome."""
    error = dict(out.envelope.error or {})
    error["message"] = (error.get("message", "") + f" ({why})")[:2000]
    return out.model_copy(update={"infra_failure": False,
                                  "envelope": out.envelope.model_copy(update={"error": error})})


def _one_batch(backend: BatchBackend, agent: bytes, problems: Sequence[dict[str, Any]],
               env_for: Callable[[str], dict[str, str]], address: str, gateway_socket: Path, limits: SandboxLimits,
               workers: int, problem_cgroups: bool, agent_ran: dict[str, bool]) -> Iterator[Outcome]:
    """Outcomes of ``problems`` run in one sandbox of ``backend``, as they finish; ``agent_ran`` gets, for each
    problem given an infrastructure outcome, whether the agent's code had started in the sandbox."""
    results: queue.Queue[Outcome | None] = queue.Queue()
    cancel = threading.Event()
    batch = _Batch(backend, agent, list(problems), env_for, address, gateway_socket, limits,
                   max(1, min(workers, len(problems))), problem_cgroups, results, cancel, agent_ran)
    thread = threading.Thread(target=batch.run, daemon=True, name="sandbox-batch")
    thread.start()
    try:
        while (out := results.get()) is not None:
            yield out
    finally:
        cancel.set()
        thread.join()


class _Batch:
    def __init__(self, backend: BatchBackend, agent: bytes, problems: list[dict[str, Any]],
                 env_for: Callable[[str], dict[str, str]], address: str, gateway_socket: Path,
                 limits: SandboxLimits, workers: int, problem_cgroups: bool, results: queue.Queue[Outcome | None],
                 cancel: threading.Event, agent_ran: dict[str, bool] | None = None) -> None:
        self.backend, self.agent, self.problems, self.env_for = backend, agent, problems, env_for
        self.socket = gateway_socket
        self.address, self.limits, self.workers, self.want_leaves = address, limits, workers, problem_cgroups
        self.results, self.cancel = results, cancel
        self.agent_ran = agent_ran if agent_ran is not None else {}
        self.started: dict[int, tuple[float, float]] = {}
        self.emitted: set[int] = set()
        self.leaf_enforced: dict[int, dict[str, str]] = {}
        self.stdout, self.stderr = bytearray(), bytearray()
        self.cg: BatchCgroup | None = None
        self.launch: Launch | None = None
        self.launched_wall = time.time()
        self.ready_wall: float | None = None
        self.import_s: float | None = None

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # infrastructure trouble: every problem not reported yet says so
            self._fail_rest("FAILED", {"type": "SandboxError", "message": f"{type(exc).__name__}: {exc}"[:2000]},
                            infra=True)
        finally:
            if self.launch is not None:
                self.launch.kill()
                try:
                    self.launch.proc.wait(timeout=10)
                except Exception as exc:  # cleanup goes on; the problems are already reported
                    _log.warning("batch sandbox pid %s did not exit 10 s after SIGKILL: %s: %s",
                                 self.launch.proc.pid, type(exc).__name__, exc)
                self.launch.cleanup()
            if self.cg is not None:
                self.cg.close()
            self.results.put(None)

    def _run(self) -> None:
        envs = [base_env(self.env_for(p["problem_id"]), self.address) for p in self.problems]
        common = {k: v for k, v in envs[0].items() if not any(w in k.upper() for w in _SECRET_WORDS)
                  and all(e.get(k) == v for e in envs)}
        self.cg = batch_cgroup(self.limits, self.workers)
        leaves = self.cg is not None and self.cg.per_problem and self.want_leaves
        ctl, ctl_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if leaves else (None, None)
        out_r, out_w = os.pipe()
        input_fd = memfd("batch", json.dumps({"problems": self.problems, "envs": envs}).encode())
        config = {"out_fd": out_w, "input_fd": input_fd, "workers": self.workers,
                  "ctl_fd": ctl_theirs.fileno() if ctl_theirs is not None else None}
        fds = [out_w, input_fd, *([ctl_theirs.fileno()] if ctl_theirs is not None else [])]
        try:
            self.launched_wall = time.time()
            self.launch = self.backend._launch_batch(self.agent, config, fds, common, self.socket, self.limits,
                                                     self.cg)
        finally:
            os.close(out_w)
            os.close(input_fd)
            if ctl_theirs is not None:
                ctl_theirs.close()
        try:
            self._supervise(out_r, ctl)
        finally:
            os.close(out_r)
            if ctl is not None:
                ctl.close()

    def _supervise(self, out_r: int, ctl: socket.socket | None) -> None:
        proc = self.launch.proc  # type: ignore[union-attr]
        sel = selectors.DefaultSelector()
        sel.register(out_r, selectors.EVENT_READ, "stream")
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")  # type: ignore[arg-type]
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")  # type: ignore[arg-type]
        if ctl is not None:
            sel.register(ctl, selectors.EVENT_READ, "ctl")
        per = self.limits.timeout_s + self.limits.kill_grace_s
        budget = (len(self.problems) + 1) * (per + _SLACK_S) + 5  # slack per problem: forks are slow on a busy host
        deadline = time.monotonic() + budget
        buf = bytearray()
        exited_at: float | None = None
        try:
            while len(self.emitted) < len(self.problems):
                if self.cancel.is_set():
                    return
                now = time.monotonic()
                if now > deadline:
                    self.launch.kill()  # type: ignore[union-attr]
                    self._fail_rest("TIMED_OUT", {"type": "Timeout", "message": f"the batch exceeded its deadline "
                                                  f"of {budget:g} s"})
                    return
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and (out_r not in _fds(sel) or now - exited_at > 1.0):
                    break
                for key, _ in sel.select(0.25):
                    if key.data == "ctl":
                        self._move(ctl)  # type: ignore[arg-type]
                        continue
                    data = os.read(key.fd, 1 << 16)
                    if not data:
                        sel.unregister(key.fd)
                    elif key.data == "stream":
                        buf += data
                        self._parse(buf)
                    else:
                        _tail(self.stdout if key.data == "stdout" else self.stderr, data, self.limits.tail_kb << 10)
        finally:
            sel.close()
        self._sandbox_ended(proc)

    def _sandbox_ended(self, proc: Popen[bytes]) -> None:
        try:
            code = proc.wait(timeout=5)
        except Exception as exc:  # the exit code is unknown; the problems still fail with the stderr tail
            _log.warning("batch sandbox pid %s: no exit status after 5 s: %s: %s", proc.pid, type(exc).__name__, exc)
            code = None
        last = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        # the executor's group holds no problem: an OOM kill there is the batch's memory cap, i.e. the agent's doing
        oom = self.cg.main.counters().get("oom_kills", 0) if self.cg is not None else 0
        why = f"; the batch's memory limit was reached ({oom} OOM kills)" if oom else ""
        self._fail_rest("FAILED", {"type": "SandboxError", "message": f"the batch sandbox ended (it "
                                   f"{signal_name(code)}{why}) before this problem finished: {last[0][:500]}"},
                        infra=not oom)

    def _parse(self, buf: bytearray) -> None:
        while (nl := buf.find(b"\n")) >= 0:
            header = json.loads(bytes(buf[:nl]))
            lens = [int(x) for x in header.get("len") or []]
            end = nl + 1 + sum(lens)
            if len(buf) < end:
                return
            payloads, at = [], nl + 1
            for n in lens:
                payloads.append(bytes(buf[at:at + n]))
                at += n
            del buf[:end]
            self._message(header, payloads)

    def _message(self, header: dict[str, Any], payloads: list[bytes]) -> None:
        if "ready" in header:
            self.ready_wall = float(header["ready"])
        elif "imported" in header:
            self.import_s = header.get("seconds")
        elif "start" in header:
            self.started[int(header["start"])] = (float(header["t"]), time.monotonic())
        elif "done" in header:
            index = int(header["done"])
            if index not in self.emitted and 0 <= index < len(self.problems):
                self.emitted.add(index)
                self.results.put(self._outcome(index, header, *[*payloads, b"", b"", b""][:3]))

    def _move(self, ctl: socket.socket) -> None:
        msg, fds, _flags, _addr = socket.recv_fds(ctl, 4096, 4)
        if not msg:
            return
        index = int(json.loads(msg)["move"])
        ok = False
        try:
            pid = host_pid(fds[0])
            if pid <= 0 or not self._ours(pid):
                raise OSError(f"process {pid} is not one of this sandbox's")
            self.leaf_enforced[index] = self.cg.attach(index, pid)  # type: ignore[union-attr]
            ok = True
        except (OSError, IndexError, ValueError) as exc:
            self.leaf_enforced[index] = {"pids": f"no per-problem cgroup ({exc})"}
        finally:
            for fd in fds:
                os.close(fd)
        ctl.send(json.dumps({"moved": index, "ok": ok}).encode())

    def _ours(self, pid: int) -> bool:
        roots = {self.launch.proc.pid, *self.launch.ancestors}  # type: ignore[union-attr]
        for _ in range(64):
            if pid in roots:
                return True
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
            if pid <= 1:
                return False
        return False

    def _enforced(self, index: int) -> dict[str, str]:
        enforced = dict(self.launch.enforced if self.launch else {})
        batch = self.cg.enforced() if self.cg is not None else {}
        leaf = self.leaf_enforced.get(index, {})
        for ctrl in ("pids", "memory", "cpu"):
            if ctrl in leaf or ctrl in batch:
                rest = enforced.get(ctrl, "").partition(";")[2]
                enforced[ctrl] = "; ".join(x for x in (f"{leaf[ctrl]} per problem" if ctrl in leaf else "",
                                                       f"{batch[ctrl]} for the batch" if ctrl in batch else "",
                                                       rest.strip()) if x)
        ready = f"{(self.ready_wall - self.launched_wall) * 1000:.0f} ms" if self.ready_wall else "?"
        imported = f"{self.import_s * 1000:.0f} ms" if isinstance(self.import_s, int | float) else "?"
        enforced["mode"] = (f"batch: one sandbox for {len(self.problems)} problems, {self.workers} at once (ready in "
                            f"{ready}); the agent imported once ({imported}); each problem forked into its own "
                            "session and process group (setsid/setpgid denied), killed as a group")
        return enforced

    def _outcome(self, index: int, header: dict[str, Any], report: bytes, out: bytes, err: bytes) -> Outcome:
        pid = self.problems[index]["problem_id"]
        start_wall, start_mono = self.started.get(index, (time.time(), time.monotonic()))
        counters = self.cg.finish(index) if self.cg is not None else {}
        limits = self.limits
        timed_out = bool(header.get("timed_out")) or (
            time.monotonic() - start_mono > limits.timeout_s + limits.kill_grace_s + _SLACK_S)
        error = header.get("error")
        if isinstance(error, dict):
            error = {"type": str(error.get("type"))[:200], "message": str(error.get("message"))[:4000]}
            envelope = Envelope(problem_id=pid, status="TIMED_OUT" if timed_out else "FAILED",
                                execution_time=0.0, error=error)
            return Outcome(envelope=envelope, backend=self.backend.name, limits=limits, started_at=start_wall,
                           wall_s=round(float(header.get("wall_s") or 0.0), 4), exit_code=header.get("exit_code"),
                           stdout_tail=(out or bytes(self.stdout)).decode("utf-8", "replace"),
                           stderr_tail=(err or bytes(self.stderr)).decode("utf-8", "replace"),
                           enforced=self._enforced(index), counters=counters)
        watched = Watched(stdout=bytearray(out), stderr=bytearray(err), report=bytearray(report),
                          report_over_cap=bool(header.get("over_cap")), timed_out=timed_out,
                          exit_code=header.get("exit_code"), wall_s=float(header.get("wall_s") or 0.0))
        outcome = make_outcome(pid, watched, backend=self.backend.name, limits=limits, launched_wall=start_wall,
                               enforced=self._enforced(index), counters=counters)
        return outcome.model_copy(update={"started_at": start_wall})

    def _fail_rest(self, status: str, error: dict[str, str], infra: bool = False) -> None:
        for index, problem in enumerate(self.problems):
            if index in self.emitted:
                continue
            self.emitted.add(index)
            if infra:  # the executor forks the agent's zygote right after its ready mark
                self.agent_ran[problem["problem_id"]] = self.ready_wall is not None
            started = index in self.started
            envelope = Envelope(problem_id=problem["problem_id"], execution_time=0.0, error=error,
                                status=status if started or status == "FAILED" else "FAILED")  # type: ignore[arg-type]
            if not started and status != "FAILED":
                envelope = envelope.model_copy(update={"error": {"type": "SandboxError", "message": "not started: "
                                                                 + error["message"]}})
            self.results.put(Outcome(envelope=envelope, backend=self.backend.name, limits=self.limits,
                                     started_at=self.started.get(index, (None,))[0],
                                     stdout_tail=bytes(self.stdout).decode("utf-8", "replace"),
                                     stderr_tail=bytes(self.stderr).decode("utf-8", "replace"),
                                     enforced=self._enforced(index), infra_failure=infra))


def _fds(sel: selectors.BaseSelector) -> set[int]:
    return {key.fd for key in sel.get_map().values()}


def _tail(buf: bytearray, data: bytes, cap: int) -> None:
    buf += data
    if len(buf) > cap:
        del buf[: len(buf) - cap]
