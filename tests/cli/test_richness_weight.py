"""``--richness-weight`` is untrusted input: outside [0, 1], NaN or not a number → one ``error:`` line, exit 2, no
traceback, before any simulation starts (``docs/incentives.md``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = 2


@pytest.mark.parametrize("value", ["-0.1", "1.5", "nan", "inf", "lots"])
@pytest.mark.parametrize("command", [["arena", "simulate"],
                                     ["arena", "validator", "--api", "http://127.0.0.1:9", "--catalog", "cat",
                                      "--store", "sqlite:///x.db"]])
def test_a_bad_weight_is_a_usage_error(value: str, command: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    env.pop("SHOPARENA_DEBUG", None)
    out = subprocess.run([sys.executable, "-m", "shoparena", *command, "--richness-weight", value, "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == USAGE, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error:") and "richness" in out.stderr.lower()
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing ran
