"""A small world for sandbox tests: a catalog, problems, a real gateway on a Unix socket, planted secrets."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from shoparena.catalog.directory import create_catalog, documents_path
from shoparena.catalog.search import SearchService
from shoparena.catalog.synthetic import generate_catalog
from shoparena.llm.gateway import Gateway, Limits
from shoparena.tasks.generator import generate_problems
from shoparena.tasks.types import Problem

MODEL = "policy:expert"


@dataclass
class World:
    root: Path
    catalog: Path
    documents: Path
    problems: list[Problem]
    gateway: Gateway
    socket: Path
    gt_file: Path
    canary: str
    tokens: dict[str, str] = field(default_factory=dict)

    def env_for(self, problem_id: str) -> dict[str, str]:
        """Opens a gateway run for the problem (the validator's side of the SDK environment); a problem retried in a
        fresh sandbox gets a fresh run, as the validator gives it."""
        if problem_id in self.tokens:
            self.gateway.close_run(self.tokens.pop(problem_id))
        handle = self.gateway.open_run(f"run-{problem_id}", problem_id=problem_id, models={MODEL})
        self.tokens[problem_id] = handle.token
        return {"SHOPARENA_RUN_TOKEN": handle.token, "SHOPARENA_MODEL": MODEL}

    def calls(self, problem_id: str) -> list:
        return self.gateway.close_run(self.tokens.pop(problem_id))


@contextmanager
def gateway_world(n_problems: int = 4) -> Iterator[World]:
    """Catalog + problems + a gateway served on a socket in a private directory, and a ground-truth file
    holding a canary string (the problems written with their answers, as a validator's bank would be)."""
    root = Path(tempfile.mkdtemp(prefix="sbx-"))  # short: Unix socket paths are limited to ~100 bytes
    try:
        index = create_catalog(generate_catalog(300, seed=11), root / "cat")
        problems = generate_problems(index, n=n_problems, seed=3, paraphrases=0)
        canary = "CANARY-" + secrets.token_hex(12)
        gt_file = root / "bank" / "ground_truth.jsonl"
        gt_file.parent.mkdir()
        with gt_file.open("w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(json.dumps({"canary": canary, **p.model_dump(mode="json")}) + "\n")
        gateway = Gateway(SearchService(index), allowed_models={MODEL}, limits=Limits.unlimited())
        sock = root / "gw" / "gateway.sock"
        sock.parent.mkdir(mode=0o700)
        with gateway.serve(uds=str(sock), uds_mode=0o666):
            yield World(root, root / "cat", documents_path(root / "cat"), problems, gateway, sock, gt_file,
                        canary)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def processes_with_uid_in(lo: int, n: int = 8) -> set[int]:
    """Pids of live processes whose real uid is in ``[lo, lo + n)`` (a sandbox's uid range): empty once every
    sandboxed process is gone."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/status", encoding="utf-8") as fh:
                    uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if lo <= uid < lo + n:
                found.add(int(entry.name))
    return found
