"""Scale-out: two validator processes share one arena only through its signed HTTP API (docs/arena.md §14.2).

The arena API runs here on loopback; two ``shoparena arena validator`` processes each claim leased work, fetch the
agent and its problems, run the real validator loop (sandbox → score → judge → records) and complete. Every work
item is closed by X = 2 distinct validators, and each validator's records are its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoparena._http import BackgroundServer
from shoparena.agents import agent_path
from shoparena.arena.api import create_app
from shoparena.arena.auth import RequestVerifier
from shoparena.arena.chain import LocalChain
from shoparena.arena.config import ArenaConfig
from shoparena.arena.identity import new_identity
from shoparena.arena.service import Arena
from shoparena.catalog.directory import create_catalog
from shoparena.catalog.synthetic import generate_catalog
from shoparena.clock import SystemClock
from shoparena.store import open_store
from shoparena.tasks.banks import BankSet
from shoparena.tasks.generator import generate_problems


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Arena, Path, list[str]]:
    index = create_catalog(generate_catalog(400, seed=8), tmp_path / "cat")
    banks = BankSet.build(generate_problems(index, n=60, seed=2, paraphrases=0), seed=0)
    chain = LocalChain(seed=0)
    owner = new_identity("owner")
    chain.register(owner.hotkey_ss58, owner.coldkey_ss58)
    names = ["val-a", "val-b"]
    for n in names:
        ident = new_identity(n)
        chain.register(ident.hotkey_ss58, ident.coldkey_ss58)
        chain.add_stake(ident.hotkey_ss58, 50_000.0)
    miner = new_identity("miner-a")
    chain.register(miner.hotkey_ss58, miner.coldkey_ss58)
    arena = Arena(f"sqlite:///{tmp_path / 'arena.db'}", chain=chain, banks=banks, clock=SystemClock(),
                  config=ArenaConfig(qualifying_problems=3, required_successes=2, max_attempts=2), seed=0)
    arena.tick()
    result = arena.submit(miner.hotkey_ss58, "react-agent", agent_path("react").read_text())
    assert result.admission_status == "ACCEPTED", result
    return arena, tmp_path / "cat", names


def test_two_validator_processes_complete_the_work_through_the_api(world, tmp_path: Path) -> None:
    arena, catalog, names = world
    app = create_app(arena, RequestVerifier(arena.chain.metagraph, clock=SystemClock()))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with BackgroundServer(app) as srv:
        procs = [subprocess.Popen(
            [sys.executable, "-m", "shoparena", "arena", "validator", "--api", srv.url, "--catalog", str(catalog),
             "--store", f"sqlite:///{tmp_path / f'{n}.db'}", "--name", n, "--model", "policy:expert",
             "--sandbox", "process", "--allow-non-hermetic", "--workdir", str(tmp_path / "agents"), "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in names]
        outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    items = {n: json.loads(out)["items"] for n, (out, _) in zip(names, outs, strict=True)}
    assert all(len(v) == 1 and v[0]["kind"] == "QUALIFYING" and v[0]["status"] == "SUCCESS" for v in items.values())
    assert items["val-a"][0]["agent_version_id"] == items["val-b"][0]["agent_version_id"]
    board = arena.leaderboard()
    assert len(board) == 1 and board[0].state in ("ELIGIBLE", "DISCARDED")  # closed by 2 of 2 validators
    for n in names:
        with open_store(f"sqlite:///{tmp_path / f'{n}.db'}") as store:
            records = list(store.query())
            assert len(records) == 3 and {r.validator_hotkey for r in records} == {new_identity(n).hotkey_ss58}
    arena.close()
