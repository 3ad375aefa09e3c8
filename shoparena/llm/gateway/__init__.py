"""The logging gateway: the only service a sandboxed agent can reach.

``/search/*`` (find and view only; never ``get_product_raw``) and ``/inference/chat/completions``
(OpenAI-compatible, forwarded to the configured backends), behind per-run capability tokens, a model allowlist
and request limits, on TCP or a Unix socket. Every request of a run is logged by the gateway itself as a frozen
:class:`CallRecord`, with each search call attributed to axis A (the LLM asked for it) or B (Python issued it):
see :mod:`shoparena.llm.gateway.attribution` for the exact rule.

    gw = Gateway(SearchService(index), allowed_models={"policy:expert"}, limits=Limits())
    with gw.serve(uds="/run/gw.sock") as srv:
        run = gw.open_run("run-1", problem_id="p1")
        ...  # the agent runs with srv.env(run) in its environment (shoparena.sdk reads it)
        log = gw.close_run(run.token)
    write_call_log("out/calls.jsonl", log)
"""

from shoparena.llm.gateway.app import GatewayServer, create_app
from shoparena.llm.gateway.attribution import COMPOSITE_TOOLS, Attribution, Attributor, find_key, view_key
from shoparena.llm.gateway.calllog import (
    CallLogWriter,
    CallRecord,
    EmittedCall,
    dump_record,
    log_sha256,
    read_call_log,
    write_call_log,
)
from shoparena.llm.gateway.core import Gateway
from shoparena.llm.gateway.runs import BUDGET_SPENT, Limits, RunHandle

__all__ = [
    "BUDGET_SPENT", "COMPOSITE_TOOLS", "Attribution", "Attributor", "CallLogWriter", "CallRecord", "EmittedCall", "Gateway",
    "GatewayServer", "Limits", "RunHandle", "create_app", "dump_record", "find_key", "log_sha256",
    "read_call_log", "view_key", "write_call_log",
]
