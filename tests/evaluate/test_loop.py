"""``shoparena loop`` end to end at toy size: arena day → corpus → tiny training → held-out evaluation → the
trained model served over the OpenAI API on loopback and raced as a new miner: the loop back into the arena."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from shoparena.evaluate.loop import ENTRANT, LoopConfig, render_loop, run_loop


@pytest.fixture(scope="module")
def looped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("loop")
    # the demo's population (6 miners: the tiny recipe's KTO needs some short prompts), a smaller world
    cfg = LoopConfig(out=str(out), days=1, race_days=1, recipe="tiny", seed=0, miners=6, validators=2,
                     catalog_size=600, problems=80, qualifying_problems=4, race_problems=4, sandbox="process",
                     eval_per_bucket=1, eval_samples=1, timeout_s=20)
    return out, run_loop(cfg)


def test_every_phase_leaves_its_artefacts(looped) -> None:
    out, body = looped
    assert body["format"] == "shoparena-loop/1"
    for path in ("arena/subnet.db", "corpus/manifest.json", "train/manifest.json", "eval/evaluation.json",
                 "eval/report.md", "eval/report.html", "arena-loop/subnet.db", "loop.json", "loop.md"):
        assert (out / path).is_file(), path
    assert json.loads((out / "loop.json").read_text()) == json.loads(json.dumps(body, default=str))
    assert [s["stage"] for s in body["train"]["stages"]] == ["sft", "rs", "teacher", "kto", "grpo"]
    assert set(body["evaluation"]["models"]) == {"base", ENTRANT}
    [cmp] = body["evaluation"]["comparisons"]
    assert (cmp["a"], cmp["b"]) == ("base", ENTRANT)


def test_the_trained_model_enters_the_arena_and_is_evaluated(looped) -> None:
    out, body = looped
    entrant = body["entrant"]
    assert [s["day"] for s in entrant["submissions"]] == [1]  # joins the day after the first arena ended
    assert entrant["submissions"][0]["status"] == "ACCEPTED", entrant["submissions"]
    # its version went through qualifying like every other: eligible (on the leaderboard) or not, with a reason
    [version] = entrant["versions"]
    assert version["state"] in ("ELIGIBLE", "DISCARDED"), version  # its qualifying evaluation finished
    on_board = any(r["miner"] == ENTRANT for r in body["race"]["leaderboard"])
    assert on_board == (version["state"] == "ELIGIBLE")
    from shoparena.store import open_store

    with open_store(f"sqlite:///{out / 'arena-loop' / 'subnet.db'}") as store:
        mine = [r for r in store.query() if r.miner_hotkey == entrant["hotkey"]]
    assert mine, "the entrant's evaluations were stored"
    # its model answered through the gateway: inference calls were made and none was refused by the backend
    calls = [c for r in mine for c in r.call_log if c.get("kind") == "inference"]
    assert calls and all(c.get("status", 200) == 200 for c in calls), calls[:3]
    md = render_loop(body)
    assert f"{ENTRANT} v1: {version['state']}" in md and "held-out ASR" in md
