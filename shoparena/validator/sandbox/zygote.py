"""Batch mode inside the sandbox, the agent's side: the zygote that imports the agent once and forks one process
per problem (standard library only; loaded by :mod:`entry` from this directory, never by the validator).

The executor (:mod:`executor`) forks the zygote before it reads the batch's problems and run tokens, so none of
them is in the zygote's memory. The zygote imports the agent file (module ``submitted_agent``, registered in
``sys.modules`` first, as ORO's ``sandbox_executor``), reports the result, then serves ``spawn`` requests: each
carries four pipe ends (report, go, stdout, stderr) and no data. For each it double-forks, so the problem's
process is re-parented to the executor (a child subreaper), which alone waits for it and signals it.

The problem's process, before any agent code runs in it: its own session and process group (``setsid``), a seccomp
filter that forbids leaving them (so killing the group kills everything the problem started), not dumpable (other
problems' processes, same uid, cannot read its memory or its /proc files), the per-problem rlimits, the first to
go under memory pressure (``oom_score_adj`` 1000), stdout and stderr on its own pipes; it reports ``{"pid": n}``,
then reads its problem, environment and working directory from the go pipe (sent by the executor only, after the
validator moved the process into the problem's own cgroups), sets exactly that environment and runs
``agent_main`` through :func:`entry.run_agent` / :func:`entry.report`, like a per-problem sandbox.
"""

import gc
import json
import os
import signal
import socket
import sys
import time

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP = 1, 4, 22
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
_SECCOMP_MODE_FILTER = 2
_libc = None


def prctl(option: int, arg: int = 0, ptr=None) -> None:
    """``prctl(2)`` through ctypes (the standard library has no binding); raises OSError."""
    global _libc
    import ctypes

    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    third = ptr if ptr is not None else ctypes.c_ulong(0)
    if _libc.prctl(option, ctypes.c_ulong(arg), third, ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def install_filter(program: bytes) -> None:
    """Install a compiled seccomp program (``struct sock_filter`` array) on this process."""
    import ctypes

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(program, len(program))
    prog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog))


def close_fds(keep: set) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _oom_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(value))
    except OSError:
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # in the sandbox: the agent's own stream failed; logging would use it too
            pass


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        os._exit(0)  # the executor is gone


def serve(sock: socket.socket, config: dict, entry) -> None:
    """The zygote: import the agent, then fork problem processes on request until the executor hangs up."""
    for sig in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    os.setpgid(0, 0)
    close_fds({0, 1, 2, sock.fileno()})
    _oom_adj(500)
    error = None
    t0 = time.perf_counter()
    try:
        entry.set_limits({k: v for k, v in config["problem_rlimits"].items() if k in ("AS", "NOFILE", "FSIZE")})
        sys.argv = [config["agent"]]
        module = entry.import_agent(config["agent"])
        error = entry.no_agent_main(module)
    except BaseException as exc:  # SyntaxError, SystemExit, MemoryError …: every problem fails with it
        try:
            import traceback

            traceback.print_exc()
            error = entry.error_of(exc)
        except BaseException:
            error = {"type": "AgentError", "message": "importing the agent file failed"}
    _flush()
    _send(sock, {"imported": error is None, "seconds": time.perf_counter() - t0, "error": error})
    if error is not None:
        os._exit(0)
    gc.freeze()  # the imported modules stay shared with the forks (no copy-on-write from the collector)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 4096, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        index = json.loads(msg)["spawn"]
        _flush()
        try:
            pid = os.fork()
        except OSError as exc:
            pid, err = -1, exc.errno
        if pid == 0:
            try:
                child = os.fork()
            except OSError as exc:
                os._exit(100 + min(exc.errno or 0, 99))
            if child == 0:
                _problem(fds, config, entry, module)
            os._exit(0)
        for fd in fds:
            os.close(fd)
        if pid > 0:
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            err = code - 100 if code >= 100 else (0 if code == 0 else None)
        _send(sock, {"spawned": index, "ok": err == 0, "errno": err})


def _problem(fds: list, config: dict, entry, module) -> None:
    """One problem's process (never returns)."""
    try:
        report_w, go_r, out_w, err_w = fds
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        for src, dst in ((null, 0), (out_w, 1), (err_w, 2)):
            os.dup2(src, dst)
        close_fds({0, 1, 2, report_w, go_r})
        _oom_adj(1000)
        if config.get("group_filter"):
            install_filter(bytes.fromhex(config["group_filter"]))
        prctl(PR_SET_DUMPABLE, 0)
        entry.set_limits(config["problem_rlimits"])
        me = os.getpid()
        os.write(report_w, json.dumps({"pid": me}).encode() + b"\n")
        chunks = []
        while True:
            data = os.read(go_r, 1 << 16)
            if not data:
                break
            chunks.append(data)
        os.close(go_r)
        if not chunks:
            os._exit(0)  # the executor decided not to run it
        go = json.loads(b"".join(chunks))
        os.environ.clear()
        os.environ.update(go["env"])
        os.chdir(go["dir"])
        sys.argv = [config["agent"], json.dumps({"out_fd": report_w})]
        out = os.fdopen(report_w, "wb", buffering=0)
        out.write(json.dumps({"ready": time.time()}).encode() + b"\n")
    except BaseException:
        os._exit(70)
    entry.report(out, lambda: entry.run_agent(go["problem"], module=module), me)
