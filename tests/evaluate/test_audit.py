"""The judge audit on a real simulated arena day (store + arena tables in one ``subnet.db``) and on a tiny
hand-made store whose κ and confusion can be checked by hand; the CLI's errors as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shoparena.arena.simulate import SimulationConfig, simulate
from shoparena.errors import BackendError, ConfigError, NotFoundError
from shoparena.evaluate.audit import FORMAT, audit_judges
from shoparena.store import open_store
from tests.hung_server import hung_server
from tests.validator.judge import THINKS, call_log, trajectory


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One real simulated day: 4 miners, 2 validators, one completed race, records judged by the rubric."""
    out = tmp_path_factory.mktemp("audit-sim")
    return simulate(SimulationConfig(miners=4, validators=2, days=1, seed=0, catalog_size=800, problems=90,
                                     qualifying_problems=4, race_problems=4, sandbox="process", out=str(out))).store


@pytest.fixture(scope="module")
def audit(day: str) -> dict[str, Any]:
    return audit_judges(day, sample=24, seed=0)


@pytest.fixture(scope="module")
def tiny(day: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Four records with known rubric scores 0.3 / 0.5 / 0.7 / 0.9 and rule outcomes F / F / T / T."""
    url = f"sqlite:///{tmp_path_factory.mktemp('tiny') / 'tiny.db'}"
    with open_store(day, create=False) as src:
        base = next(iter(src.query(status="SUCCESS", limit=1)))
    body = base.model_dump(exclude={"record_id", "idempotency_key", "trace_sha256", "call_log_sha256",
                                    "pipeline_version", "created_at"})
    with open_store(url) as store:
        for i, (score, success) in enumerate(zip(sorted(THINKS), (False, False, True, True), strict=True)):
            steps = trajectory(THINKS[score])
            body.update(eval_run_id=f"ev-tiny-{i}", problem_id=f"p{i}", steps=steps, messages=[],
                        call_log=call_log(steps), success=success, judge=None, judge_score=None)
            assert store.append(type(base).model_validate(body).sealed(1_000 + i))
    return url


def test_the_report_has_the_stable_schema_and_sound_figures(audit: dict[str, Any]) -> None:
    assert audit["format"] == FORMAT and list(audit["judges"]) == ["rubric", "strict", "lenient", "noisy"]
    s = audit["sample"]
    assert s["judged"] == s["requested"] == 24 == len(s["record_ids"]) == len(set(s["record_ids"]))
    assert s["trace_reproduced"] == s["stored_verdicts"] == 24  # the judges read the very trace the verdict cited
    for label, f in audit["by_judge"].items():
        c = f["confusion"]
        assert f["failed"] == 0 and f["usable"] == 24, label
        assert sum(c[k] for k in c if k != "agreement") == f["usable"]
        assert c["rule_pass_judge_pass"] + c["rule_pass_judge_fail"] == s["rule_success"]
        assert f["pass_rate"] == round((c["rule_pass_judge_pass"] + c["rule_fail_judge_pass"]) / 24, 6)
        assert -1.0 <= f["kappa_vs_rule"] <= 1.0 and 0.1 <= f["mean_score"] <= 0.9
    p = audit["panel"]
    assert p["items"] == 24 and -1 <= p["fleiss_kappa"] <= 1 and -1 <= p["fleiss_kappa_score"] <= 1
    assert set(p["cohen_kappa"]) == {"rubric|strict", "rubric|lenient", "rubric|noisy", "strict|lenient",
                                     "strict|noisy", "lenient|noisy"}
    # the stored verdicts are the rubric's: it reproduces every one; the LLM panel members do not
    assert audit["by_judge"]["rubric"]["stored_verdict"] == {"items": 24, "same_score": 1.0, "same_gate": 1.0,
                                                            "kappa_gate": 1.0}
    assert audit["by_judge"]["strict"]["stored_verdict"]["same_score"] < 1.0 or \
        audit["by_judge"]["lenient"]["stored_verdict"]["same_score"] < 1.0


def test_the_race_replay_reproduces_the_stored_winner(audit: dict[str, Any]) -> None:
    races = audit["races"]
    assert audit["races_reason"] is None and len(races) == 1
    race = races[0]
    assert race["replayed_winner"] == race["stored_winner"] is not None and len(race["racers"]) >= 2
    rubric = race["by_judge"]["rubric"]  # the judge the records were judged by: the very same scores and winner
    assert rubric["scores"] == race["stored_scores"] and rubric["winner"] == race["stored_winner"]
    assert not rubric["changed"] and not rubric["undecided"]
    for label, r in audit["race_summary"].items():
        assert r["races"] == 1 == r["decided"] + r["undecided"] and r["winner_changed"] <= r["decided"], label
        changed = sum(x["by_judge"][label]["changed"] for x in races)
        assert r["winner_changed"] == changed


def test_a_panel_of_identical_judges_agrees_and_changes_no_winner(day: str) -> None:
    out = audit_judges(day, ["a=llm:policy:judge-strict", "b=llm:policy:judge-strict", "c=rubric", "d=rubric"],
                       sample=12, seed=5)
    assert out["panel"]["cohen_kappa"]["a|b"] == out["panel"]["cohen_kappa"]["c|d"] == 1.0
    assert out["by_judge"]["a"] == out["by_judge"]["b"]
    race = out["races"][0]
    assert race["by_judge"]["a"] == race["by_judge"]["b"] and race["by_judge"]["c"] == race["by_judge"]["d"]
    assert out["race_summary"]["c"]["winner_changed"] == out["race_summary"]["d"]["winner_changed"] == 0


def test_same_inputs_same_bytes_another_seed_another_sample(day: str, audit: dict[str, Any]) -> None:
    again = audit_judges(day, sample=24, seed=0)
    assert json.dumps(again, sort_keys=True) == json.dumps(audit, sort_keys=True)
    other = audit_judges(day, ["rubric"], sample=24, seed=1, races=False)
    assert other["sample"]["record_ids"] != audit["sample"]["record_ids"] and other["races"] is None
    assert other["panel"] is None  # one judge: no panel


def test_kappa_and_confusion_by_hand_on_a_tiny_store(tiny: str) -> None:
    out = audit_judges(tiny, ["rubric", "strict=llm:policy:judge-strict"], sample=10, seed=0)
    assert out["sample"]["judged"] == 4 and out["sample"]["stored_verdicts"] == 0
    r = out["by_judge"]["rubric"]
    # scores 0.3 0.5 0.7 0.9 → gate F T T T; rule F F T T. p_o = 3/4; p_e = (2·3 + 2·1)/16 = 1/2 → κ = 1/2
    assert r["mean_score"] == 0.6 and r["pass_rate"] == 0.75 and r["kappa_vs_rule"] == 0.5
    assert r["confusion"] == {"rule_pass_judge_pass": 2, "rule_pass_judge_fail": 0, "rule_fail_judge_pass": 1,
                              "rule_fail_judge_fail": 1, "agreement": 0.75}
    # the strict judge reads the count-only analysis (0.5) as 0.3: gates F F T T = the rule, κ 1; rubric vs strict:
    # p_o = 3/4, p_e = (3·2 + 1·2)/16 = 1/2 → κ = 1/2; Fleiss (2 raters, 4 items): P̄ = 3/4, P_e = (5/8)² + (3/8)²
    s = out["by_judge"]["strict"]
    assert s["kappa_vs_rule"] == 1.0 and s["mean_score"] == 0.55
    assert out["panel"]["cohen_kappa"] == {"rubric|strict": 0.5}
    assert out["panel"]["fleiss_kappa"] == round((0.75 - 34 / 64) / (1 - 34 / 64), 6)
    assert out["races"] is None and "no arena tables" in out["races_reason"]


def test_bad_input_is_a_typed_error(day: str, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        audit_judges(f"sqlite:///{tmp_path / 'missing.db'}", ["rubric"], sample=3)
    for judges, sample in ((["llm:policy:judge-bogus"], 3), (["nope"], 3), (["rubric"], 0), (["panel=rubric"], 3)):
        with pytest.raises(ConfigError):
            audit_judges(day, judges, sample=sample)


def shoparena(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shoparena", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_cli(day: str, tmp_path: Path) -> None:
    ok = shoparena("judge", "audit", "--store", day, "--judge", "rubric", "--judge", "s=llm:policy:judge-strict",
                   "--sample", "6", "--json")
    assert ok.returncode == 0, ok.stderr
    body = json.loads(ok.stdout)
    assert body["format"] == FORMAT and list(body["judges"]) == ["rubric", "s"] and body["sample"]["judged"] == 6
    table = shoparena("judge", "audit", "--store", day, "--judge", "rubric", "--sample", "4")
    assert table.returncode == 0 and "judge audit" in table.stdout and "winner changed" in table.stdout
    for args, code in (((f"sqlite:///{tmp_path / 'missing.db'}",), 4), ((day, "--judge", "llm:policy:judge-x"), 2),
                       ((day, "--judge", "bogus"), 2), ((day, "--sample", "0"), 2)):
        bad = shoparena("judge", "audit", "--store", *args)
        assert bad.returncode == code, (args, bad.stderr)
        assert bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def test_a_hung_judge_model_is_refused_and_timeout_bounds_each_verdict(tiny: str) -> None:
    """An ``openai:`` judge that accepts connections and never answers is refused before any record is read; one
    that looks alive but never answers a completion costs each verdict at most ``timeout_s``, then fails."""
    with hung_server("silent") as base, pytest.raises(BackendError, match="did not answer") as info:
        audit_judges(tiny, [f"llm:openai:{base}/m"], sample=4)
    assert info.value.hint
    with hung_server("chat") as base:
        out = audit_judges(tiny, [f"j=llm:openai:{base}/m"], sample=4, timeout_s=1.0)
    assert out["sample"]["judged"] == 4 and out["by_judge"]["j"]["failed"] == 4
