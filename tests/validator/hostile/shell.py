"""Imports os and spawns shells: they run, and see only the sandbox."""

import os
import subprocess


def agent_main(problem_data: dict) -> list:
    status = os.system("id > /tmp/id.txt; ls / > /tmp/ls.txt")
    with open("/tmp/id.txt") as fh:
        ident = fh.read()
    with open("/tmp/ls.txt") as fh:
        root = fh.read().split()
    r = subprocess.run(["/bin/sh", "-c", "ls -a /work/main; echo ---; ls /proc | grep -c '^[0-9]'; echo ---; "
                        "cat /proc/1/cmdline | tr '\\0' ' '; echo; hostname; unshare -U true && echo UNSHARED"],
                       capture_output=True, text=True, timeout=20)
    return [{"system": status, "id": ident, "root": root, "sh": r.stdout, "sh_err": r.stderr}]
