"""What runs inside the sandbox: set the limits, import the agent file, call ``agent_main``, report.

Run as a script (``python -I -B entry.py CONFIG_JSON``), never imported by the validator: it uses the standard
library only, so the interpreter starts without loading the package. Two modes, chosen by ``CONFIG_JSON``:

- per problem (the default): ``agent`` (the agent file), ``problem`` (the sanitised problem JSON file), ``rlimits``
  (name → value) and either ``out_fd`` (an inherited pipe) or ``out_path`` (a file in a bound directory); the agent
  is imported and ``agent_main`` called once, in this process.
- ``"mode": "batch"``: this process becomes the batch executor of :mod:`executor` (loaded from this directory),
  which imports the agent once and runs every problem of the batch in its own forked process; those processes
  report through :func:`run_agent` and :func:`report` below, exactly as the per-problem mode does.

Both modes first put ``package_path`` (when the config names it: the directory holding the validator's own
``shoparena`` package) at the front of ``sys.path``, before anything of the package or the agent is imported, so
the agent's ``import shoparena`` resolves to the copy the validator runs, never to whatever the interpreter's
environment installs (an editable install's finder may point at another checkout, invisible in the sandbox).

The report channel is that fd or file, never stdout (agent prints cannot forge it). Exactly two JSON lines go
there: ``{"ready": wall time}`` just before the agent's code runs (the validator's start-overhead mark), then
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
MODULE = "submitted_agent"


def set_limits(limits: dict) -> None:
    """Apply ``name → value`` rlimits (soft = hard, never above the current hard limit)."""
    for name, value in limits.items():
        which = _RLIMITS[name]
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(int(value), hard)
        resource.setrlimit(which, (int(value), int(value)))


def package_first(path: "str | None") -> None:
    """Put ``path`` (the directory holding the validator's ``shoparena``) first on ``sys.path`` unless it is on it
    already (a package installed into site-packages: moving that directory ahead of the standard library would let
    any of its distributions shadow a standard module)."""
    if not path:
        return
    norm = os.path.normpath(path)
    if any(os.path.normpath(p or os.curdir) == norm for p in sys.path):
        return
    sys.path.insert(0, norm)


def error_of(exc: BaseException) -> dict:
    """``{type, message}`` of an exception (the message capped)."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"type": type(exc).__name__, "message": detail[:_MESSAGE_CAP]}


def import_agent(path: str):
    """Import the agent file as module ``submitted_agent``, registered in ``sys.modules`` before it runs (as ORO's
    executor does). Raises whatever the agent's module code raises."""
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    return module


def no_agent_main(module) -> "dict | None":
    """The error of a module without a callable ``agent_main``, or None."""
    if callable(getattr(module, "agent_main", None)):
        return None
    return {"type": "AgentError", "message": "the agent file defines no callable agent_main"}


def run_agent(problem: dict, *, agent_file: "str | None" = None, module=None) -> dict:
    """The envelope of ``agent_main(problem)``; imports ``agent_file`` first unless ``module`` is given (the
    import's time then counts as execution time, as in a fresh interpreter)."""
    t0 = time.perf_counter()
    try:
        if module is None:
            module = import_agent(agent_file)
        missing = no_agent_main(module)
        if missing:
            return {"status": "FAILED", "error": missing}
        steps = module.agent_main(problem)
    except BaseException as exc:  # the agent's failure, SystemExit and KeyboardInterrupt included, is data
        try:
            traceback.print_exc()
        except BaseException:  # in the sandbox: the agent's own stream failed; logging would use it too
            pass
        return {"status": "FAILED", "error": error_of(exc), "execution_time": time.perf_counter() - t0}
    elapsed = time.perf_counter() - t0
    if not isinstance(steps, list):
        return {"status": "FAILED", "execution_time": elapsed, "error": {
            "type": "AgentError", "message": f"agent_main returned {type(steps).__name__}, not a list of steps"}}
    return {"status": "SUCCESS", "error": None, "dialogue": steps, "execution_time": elapsed}


def report(out, compute, me: int) -> None:
    """Write ``{"envelope": compute()}`` to ``out`` and end the process (``os._exit``: no atexit hooks or lingering
    non-daemon threads of the agent). ``me``: the pid that owns the report; a process the agent forked that comes
    back up through ``agent_main`` exits silently."""
    try:
        envelope = compute()
        if os.getpid() != me:
            os._exit(0)
        line = json.dumps({"envelope": envelope}, allow_nan=False)
    except BaseException as exc:  # e.g. a dialogue that is not JSON, MemoryError
        if os.getpid() != me:
            os._exit(1)
        what = "the dialogue could not be encoded as JSON" if isinstance(exc, TypeError | ValueError) else ""
        error = error_of(exc)
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
    os._exit(0)


def sibling(name: str):
    """Load ``name.py`` from this directory (``-I`` keeps the directory off ``sys.path``, which is right: its
    modules must never shadow the standard library for the agent)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location(f"shoparena_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    config = json.loads(sys.argv[1])
    package_first(config.get("package_path"))
    if config.get("mode") == "batch":
        sibling("executor").main(config, sys.modules[__name__], sibling("zygote"))
        return
    set_limits(config.get("rlimits") or {})
    if "out_fd" in config:
        out = os.fdopen(int(config["out_fd"]), "wb", buffering=0)
    else:
        out = open(config["out_path"], "wb", buffering=0)
    out.write(json.dumps({"ready": time.time()}).encode() + b"\n")
    with open(config["problem"], encoding="utf-8") as fh:
        problem = json.load(fh)
    report(out, lambda: run_agent(problem, agent_file=config["agent"]), os.getpid())


if __name__ == "__main__":
    main()
