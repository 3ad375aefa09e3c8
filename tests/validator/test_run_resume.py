"""``run_agents`` streams every finished episode to ``episodes.partial.jsonl`` and a killed run resumes with only
its missing episodes, giving the files of an uninterrupted run; a finished run lends its episodes to a run of the
same config on more problems (``reuse``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoparena.agents import agent_path
from shoparena.errors import DataError, NotFoundError
from shoparena.validator.run import (
    PARTIAL,
    RunConfig,
    _read_partial,
    finished_episodes,
    read_run_file,
    run_agents,
    run_records,
)
from tests.worlds import small_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path, Path]:
    root = tmp_path_factory.mktemp("resume")
    catalog, problems, problems_file = small_world(root, size=400, catalog_seed=8, n=4, problem_seed=2)
    slow = root / "slow_react.py"  # slow enough for the kill to land mid-run
    slow.write_text(agent_path("react").read_text() + "\nimport time as _t\n_main = agent_main\n"
                    "def agent_main(problem_data):\n    _t.sleep(0.5)\n    return _main(problem_data)\n")
    return catalog, problems, problems_file, slow


def _config(slow: Path, **kw: object) -> RunConfig:
    return RunConfig(agent=str(slow), model="policy:expert", n_samples=2, seed=3, timeout_s=60, **kw)  # type: ignore[arg-type]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _no_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def uninterrupted(world, tmp_path_factory: pytest.TempPathFactory) -> Path:
    catalog, problems, _, slow = world
    out = tmp_path_factory.mktemp("whole")
    run_agents(catalog, problems, _config(slow, concurrency=2), out)
    assert not (out / PARTIAL).exists()  # removed once the run's files are written
    return out


def test_killed_run_resumes_with_only_its_missing_episodes(world, uninterrupted: Path, tmp_path: Path) -> None:
    catalog, problems, problems_file, slow = world
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "shoparena", "run", "--catalog", str(catalog), "--problems", str(problems_file),
           "--agent", str(slow), "--model", "policy:expert", "-n", "2", "--seed", "3", "--timeout", "60",
           "--concurrency", "1", "--out", str(out), "--json"]
    proc = subprocess.Popen(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline, partial = time.monotonic() + 120, out / PARTIAL
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if partial.is_file() and len(partial.read_bytes().splitlines()) >= 4:  # header + 3 episodes
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = _lines(partial)[1:]
    assert 3 <= len(kept) < 2 * len(problems) and not (out / "summary.json").exists()

    seen: list[int] = []
    summary = run_agents(catalog, problems, _config(slow, concurrency=2), out, progress=seen.append, resume=True)
    assert seen[0] == len(kept) and sum(seen) == 2 * len(problems)  # the kept ones first, then one at a time
    runs = _lines(out / "runs.jsonl")
    by_key = {(r["problem_id"], r["sample"]): r for r in runs}
    for ep in kept:  # kept, not run again: the very same wall times
        assert by_key[(ep["problem_id"], ep["sample"])]["seconds"] == ep["run"]["seconds"]
    # the same files as the uninterrupted run (wall times aside)
    assert (out / "scores.jsonl").read_bytes() == (uninterrupted / "scores.jsonl").read_bytes()
    assert _no_time(runs) == _no_time(_lines(uninterrupted / "runs.jsonl"))
    whole = json.loads((uninterrupted / "summary.json").read_text())["summary"]
    assert (summary.asr, summary.pass_at_k) == (whole["asr"], whole["pass_at_k"])
    assert not partial.exists()


def test_partial_file_of_another_run_or_with_bad_lines(world, uninterrupted: Path, tmp_path: Path) -> None:
    catalog, problems, _, slow = world
    out = tmp_path / "run"
    out.mkdir()
    header = {"format": "shoparena-run-partial/1", "run_id": "other", "config": {}, "problems": []}
    (out / PARTIAL).write_text(json.dumps(header) + "\n" + '{"problem_id": "x", "sample": 0}\n')
    seen: list[int] = []
    run_agents(catalog, problems, _config(slow), out, progress=seen.append, resume=True)
    assert seen == [1] * (2 * len(problems))  # another run's file: everything ran again
    assert (out / "scores.jsonl").read_bytes() == (uninterrupted / "scores.jsonl").read_bytes()

    # a torn last line (killed mid-write) is dropped; a bad line before the end is refused
    sample_dir = tmp_path / "p"
    sample_dir.mkdir()

    hdr = {"format": "shoparena-run-partial/1", "run_id": "r", "config": {"a": 1}, "problems": ["p1"]}
    ep = {"problem_id": "p1", "sample": 0, "steps": [], "calls": [], "run": {}, "score": {}}
    path = sample_dir / PARTIAL
    path.write_text(json.dumps(hdr) + "\n" + json.dumps(ep) + "\n" + '{"problem_id": "p1", "sam')
    assert _read_partial(path, hdr, 2) == [ep]
    path.write_text(json.dumps(hdr) + "\n" + "garbage\n" + json.dumps(ep) + "\n")
    with pytest.raises(DataError, match="not an episode of this run"):
        _read_partial(path, hdr, 2)
    path.write_text(json.dumps(hdr) + "\n" + json.dumps({**ep, "sample": 5}) + "\n" + json.dumps(ep) + "\n")
    with pytest.raises(DataError):  # a sample outside n_samples is not of this run
        _read_partial(path, hdr, 2)
    assert _read_partial(path, {**hdr, "run_id": "s"}, 2) == []


def _scorer(catalog: Path):
    from shoparena.catalog.directory import index_path
    from shoparena.catalog.index import SearchIndex
    from shoparena.scoring.scorer import Scorer
    from shoparena.scoring.similarity import get_similarity

    return Scorer(SearchIndex.open(index_path(catalog)), mode="strict", similarity=get_similarity("lexical"))


@pytest.fixture(scope="module")
def part(world, tmp_path_factory: pytest.TempPathFactory) -> Path:
    catalog, problems, _, slow = world
    out = tmp_path_factory.mktemp("part")
    run_agents(catalog, problems[:2], _config(slow, concurrency=2), out)  # the first two problems only
    return out


def test_a_finished_run_lends_its_episodes_to_a_run_on_more_problems(world, uninterrupted: Path, part: Path,
                                                                      tmp_path: Path) -> None:
    catalog, problems, _, slow = world
    seen: list[int] = []
    summary = run_agents(catalog, problems, _config(slow, concurrency=2), tmp_path, progress=seen.append,
                         reuse=[tmp_path / "not-a-run", part])
    assert seen[0] == 4 and sum(seen) == 2 * len(problems)  # 2 problems × 2 samples lent, the rest run
    runs = {(r["problem_id"], r["sample"]): r for r in _lines(tmp_path / "runs.jsonl")}
    for r in _lines(part / "runs.jsonl"):
        assert runs[(r["problem_id"], r["sample"])]["seconds"] == r["seconds"]  # lent, not run again
    # the files and figures of the run that did every problem at once, the axis rates (from the re-scored
    # episodes' items, which scores.jsonl leaves out) included
    assert (tmp_path / "scores.jsonl").read_bytes() == (uninterrupted / "scores.jsonl").read_bytes()
    assert set((part / "rollouts.jsonl").read_bytes().splitlines()) < set((tmp_path / "rollouts.jsonl").read_bytes()
                                                                          .splitlines())  # the lent steps, as run
    whole = json.loads((uninterrupted / "summary.json").read_text())["summary"]
    assert (summary.asr, summary.pass_at_k, summary.axis_rates) == (whole["asr"], whole["pass_at_k"],
                                                                    whole["axis_rates"])


def test_only_a_finished_run_of_the_same_config_with_scores_its_steps_give_is_lent(world, part: Path,
                                                                                    tmp_path: Path) -> None:
    import shutil

    catalog, problems, _, slow = world
    scorer, config = _scorer(catalog), _config(slow)
    lent = finished_episodes(part, config, problems, scorer)
    assert lent is not None and len(lent) == 4 and all(ep["score"]["items"] for ep in lent)
    assert finished_episodes(part, config.model_copy(update={"seed": 4}), problems, scorer) is None
    assert finished_episodes(part, config.model_copy(update={"concurrency": 7}), problems, scorer) == lent
    assert finished_episodes(tmp_path, config, problems, scorer) is None  # no summary: not a finished run
    assert finished_episodes(part, config, problems[2:], scorer) == []  # no problem in common

    bad = tmp_path / "bad"
    shutil.copytree(part, bad)
    rows = _lines(bad / "scores.jsonl")
    rows[1]["success"] = not rows[1]["success"]
    (bad / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match="not what its steps score here"):
        finished_episodes(bad, config, problems, scorer)
    (bad / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))
    with pytest.raises(DataError, match="do not line up"):
        finished_episodes(bad, config, problems, scorer)
    shutil.copy(part / "scores.jsonl", bad / "scores.jsonl")
    (bad / "runs.jsonl").write_text('{"problem_id": 3}\n' * 4)
    with pytest.raises(DataError, match="not the files of a finished run"):
        finished_episodes(bad, config, problems, scorer)
    (bad / "summary.json").write_text("[]")
    with pytest.raises(DataError, match="not a run summary"):
        finished_episodes(bad, config, problems, scorer)


def test_the_one_reader_reads_back_what_the_run_wrote(uninterrupted: Path, tmp_path: Path) -> None:
    """read_run_file / run_records: the reader of every file run_agents writes (judging, choice, RS, GRPO)."""
    runs_file = uninterrupted / "runs.jsonl"
    assert read_run_file(runs_file) == _lines(runs_file)
    records = run_records(runs_file.read_bytes(), runs_file)
    assert [(r["problem_id"], r["sample"]) for r in records] == [(r["problem_id"], r["sample"])
                                                                for r in _lines(runs_file)]
    assert len(read_run_file(uninterrupted / "scores.jsonl")) == len(records) == 8
    with pytest.raises(NotFoundError, match="missing"):
        read_run_file(tmp_path / "runs.jsonl")
    good = runs_file.read_bytes().splitlines()[0]
    for bad, why in ((b"{not json", "line 3 is not JSON"), (b'{"problem_id": 1, "sample": 0, "success": true}',
                     "line 3 is not a run record"), (b'{"problem_id": "p", "sample": -1, "success": true}',
                     "line 3 is not a run record"), (b'{"problem_id": "p", "sample": true, "success": true}',
                     "line 3 is not a run record"), (b'{"problem_id": "p", "sample": 0, "success": 1}',
                     "line 3 is not a run record")):
        data = good + b"\n\n" + bad + b"\n"
        with pytest.raises(DataError, match=why):
            run_records(data, runs_file)
    assert len(run_records(good + b"\n\n" + good + b"\n", runs_file)) == 2  # blank lines are not records


def test_a_model_text_with_unicode_line_separators_reads_back(tmp_path: Path) -> None:
    """A model may emit U+2028, U+2029 or U+0085; JSON writers leave them raw inside a string, and only ``\\n`` ends a
    JSONL line, so the record reads back whole."""
    import orjson

    records = [{"seq": 0, "content": "Recommending 1234.\u2028<think>"}, {"seq": 1, "content": "a\u2029b\x85c"}]
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert "\u2028" in path.read_text(encoding="utf-8")  # written raw, not escaped
    assert read_run_file(path) == records
