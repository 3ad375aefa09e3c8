"""What runs inside the sandbox: set the limits, import the agent file, call ``agent_main`` once, report.

Run as a script (``python -I -B entry.py CONFIG_JSON``), never imported by the validator: it uses the standard
library only, so the interpreter starts without loading the package. ``CONFIG_JSON`` holds ``agent`` (the agent
file), ``problem`` (the sanitised problem JSON file), ``rlimits`` (name → value) and either ``out_fd`` (an
inherited pipe) or ``out_path`` (a file in a bound directory).

The report channel is that fd or file, never stdout (agent prints cannot forge it). Exactly two JSON lines go
there: ``{"ready": wall time}`` just before the agent file is imported (the validator's start-overhead mark), then
``{"envelope": {status, error, dialogue, execution_time}}``. The agent runs in this same process, so it *can*
write to the channel; it gains nothing by it: the validator trusts the envelope only for what ``agent_main``
could have returned anyway (its steps or an error) and decides timeouts, timings and the problem id itself.
"""

import importlib.util
import json
import os
import resource
import sys
import time
import traceback

_RLIMITS = {"AS": resource.RLIMIT_AS, "NOFILE": resource.RLIMIT_NOFILE, "FSIZE": resource.RLIMIT_FSIZE,
            "CORE": resource.RLIMIT_CORE, "CPU": resource.RLIMIT_CPU, "NPROC": resource.RLIMIT_NPROC}
_MESSAGE_CAP = 4000


def _set_limits(limits: dict) -> None:
    for name, value in limits.items():
        which = _RLIMITS[name]
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(int(value), hard)
        resource.setrlimit(which, (int(value), int(value)))


def _error(exc: BaseException) -> dict:
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"type": type(exc).__name__, "message": detail[:_MESSAGE_CAP]}


def _run(config: dict, out) -> dict:
    with open(config["problem"], encoding="utf-8") as fh:
        problem = json.load(fh)
    spec = importlib.util.spec_from_file_location("submitted_agent", config["agent"])
    module = importlib.util.module_from_spec(spec)
    sys.modules["submitted_agent"] = module  # as ORO's executor: registered before it runs
    t0 = time.perf_counter()
    try:
        spec.loader.exec_module(module)
        agent_main = getattr(module, "agent_main", None)
        if not callable(agent_main):
            return {"status": "FAILED", "error": {"type": "AgentError",
                                                 "message": "the agent file defines no callable agent_main"}}
        steps = agent_main(problem)
    except BaseException as exc:  # the agent's failure, SystemExit and KeyboardInterrupt included, is data
        try:
            traceback.print_exc()
        except BaseException:
            pass
        return {"status": "FAILED", "error": _error(exc), "execution_time": time.perf_counter() - t0}
    elapsed = time.perf_counter() - t0
    if not isinstance(steps, list):
        return {"status": "FAILED", "execution_time": elapsed, "error": {
            "type": "AgentError", "message": f"agent_main returned {type(steps).__name__}, not a list of steps"}}
    return {"status": "SUCCESS", "error": None, "dialogue": steps, "execution_time": elapsed}


def main() -> None:
    config = json.loads(sys.argv[1])
    _set_limits(config.get("rlimits") or {})
    if "out_fd" in config:
        out = os.fdopen(int(config["out_fd"]), "wb", buffering=0)
    else:
        out = open(config["out_path"], "wb", buffering=0)
    out.write(json.dumps({"ready": time.time()}).encode() + b"\n")
    me = os.getpid()
    try:
        envelope = _run(config, out)
        if os.getpid() != me:  # a process the agent forked came back up through agent_main: not ours to report
            os._exit(0)
        line = json.dumps({"envelope": envelope}, allow_nan=False)
    except BaseException as exc:  # e.g. a dialogue that is not JSON, MemoryError
        if os.getpid() != me:
            os._exit(1)
        what = "the dialogue could not be encoded as JSON" if isinstance(exc, TypeError | ValueError) else ""
        error = _error(exc)
        if what:
            error["message"] = f"{what}: {error['message']}"[:_MESSAGE_CAP]
        line = json.dumps({"envelope": {"status": "FAILED", "error": error}})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the agent may have closed or replaced them
            pass
    try:
        out.write(line.encode() + b"\n")
    except OSError:
        os._exit(3)  # the validator stopped reading (an over-size envelope): it reports that
    os._exit(0)  # no atexit hooks or lingering non-daemon threads of the agent


if __name__ == "__main__":
    main()
