"""``shoparena evaluate --judge``: stored episodes judged after the runs, rule × judge confusion, κ against the rule
and between the judges of a panel; failed verdicts counted, never scored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, DataError
from shoparena.evaluate import (
    EvalConfig,
    JudgeEntry,
    evaluate_models,
    judge_run,
    judge_summary,
    parse_judges,
    parse_models,
    summarise,
)
from shoparena.evaluate.core import JUDGE_GATE
from shoparena.evaluate.report import write_report
from shoparena.validator.judge import RubricJudge
from tests.worlds import small_world


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list]:
    root = tmp_path_factory.mktemp("judged")
    catalog, problems, _ = small_world(root, size=400, catalog_seed=3, n=6, problem_seed=5)
    config = EvalConfig(models=parse_models("expert=policy:expert,novice=policy:novice"), agent="react",
                        n_samples=2, temperature=0.7, seed=1, concurrency=2, timeout_s=60, n_resamples=200,
                        judges=parse_judges(["rubric", "again=rubric"]))
    body = evaluate_models(catalog, problems, config, root / "out")
    return root / "out", body, problems


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_every_success_episode_gets_a_verdict(judged) -> None:
    out, body, _ = judged
    for label in ("expert", "novice"):
        runs = _lines(out / "models" / label / "runs.jsonl")
        verdicts = _lines(out / "models" / label / "judges" / "rubric.jsonl")
        assert [(v["problem_id"], v["sample"]) for v in verdicts] == [(r["problem_id"], r["sample"]) for r in runs]
        for r, v in zip(runs, verdicts, strict=True):
            assert v["judged"] == (r["status"] == "SUCCESS" and r["steps"] > 0)
            if v["judged"]:
                assert v["ok"] and v["score"] in (0.1, 0.3, 0.5, 0.7, 0.9)
        f = body["models"][label]["judges"]["rubric"]
        judged_n = sum(v["judged"] for v in verdicts)
        assert (f["episodes"], f["judged"], f["usable"], f["failed"]) == (len(runs), judged_n, judged_n, 0)
        c = f["confusion"]
        assert sum(c[k] for k in c if k != "agreement") == f["usable"]
        # the rule side of the confusion is the stored rule outcome of the same episodes
        rule_pass = sum(r["success"] for r, v in zip(runs, verdicts, strict=True) if v["judged"])
        assert c["rule_pass_judge_pass"] + c["rule_pass_judge_fail"] == rule_pass
        gate_pass = sum(v["score"] >= JUDGE_GATE for v in verdicts if v["judged"])
        assert f["pass_rate"] == pytest.approx(gate_pass / judged_n)
        assert -1.0 <= f["kappa_vs_rule"] <= 1.0


def test_verdicts_are_the_judges_own_on_the_stored_episode(judged) -> None:
    out, _, problems = judged
    run_dir = out / "models" / "expert"
    runs, rollouts = _lines(run_dir / "runs.jsonl"), _lines(run_dir / "rollouts.jsonl")
    calls = _lines(run_dir / "calls.jsonl")
    verdicts = _lines(run_dir / "judges" / "rubric.jsonl")
    i = next(i for i, v in enumerate(verdicts) if v["judged"])
    pid, sample = runs[i]["problem_id"], runs[i]["sample"]
    query = next(p.query for p in problems if p.problem_id == pid)
    mine = [{k: v for k, v in c.items() if k != "sample"} for c in calls
            if c["problem_id"] == pid and c["sample"] == sample]
    v = asyncio.run(RubricJudge().judge(query, rollouts[i], mine))
    assert (v.score, v.gate, v.trace_sha256) == (verdicts[i]["score"], verdicts[i]["gate"],
                                                 verdicts[i]["trace_sha256"])


def test_identical_judges_agree_perfectly(judged) -> None:
    _, body, _ = judged
    panel = body["judges"]["panel"]
    assert panel["judges"] == ["rubric", "again"]
    assert panel["items"] == sum(body["models"][m]["judges"]["rubric"]["usable"] for m in body["models"])
    assert panel["fleiss_kappa"] == 1.0 and panel["cohen_kappa"] == {"rubric|again": 1.0}
    assert body["judges"]["by_judge"]["rubric"] == body["judges"]["by_judge"]["again"]
    assert body["judges"]["specs"] == {"rubric": "rubric", "again": "rubric"}


def test_judge_figures_are_a_pure_function_of_the_stored_verdicts(judged) -> None:
    out, body, problems = judged
    again = summarise(out, EvalConfig.model_validate(body["config"]), problems)
    assert json.dumps(again, sort_keys=True) == json.dumps(body, sort_keys=True)


def test_resume_keeps_verdicts_of_unchanged_rollouts(judged, tmp_path: Path) -> None:
    out, body, problems = judged
    verdicts = out / "models" / "expert" / "judges" / "rubric.jsonl"
    stamp = verdicts.stat().st_mtime_ns
    evaluate_models(out.parent / "cat", problems, EvalConfig.model_validate(body["config"]), out, resume=True)
    assert verdicts.stat().st_mtime_ns == stamp
    # a changed rollout file is judged again
    meta = json.loads((out / "models" / "expert" / "judges" / "rubric.json").read_text())
    meta["rollouts_sha256"] = "0" * 64
    (out / "models" / "expert" / "judges" / "rubric.json").write_text(json.dumps(meta))
    judge_run(out / "models" / "expert", problems, JudgeEntry(label="rubric", spec="rubric"))
    assert verdicts.stat().st_mtime_ns != stamp
    assert json.loads((out / "models" / "expert" / "judges" / "rubric.json").read_text())["rollouts_sha256"] != "0" * 64


def test_a_failing_judge_is_counted_never_scored(judged, tmp_path: Path) -> None:
    """An LLM judge that cannot answer the rubric (an offline shopping policy) fails every verdict."""
    out, _, problems = judged
    run_dir = out / "models" / "expert"
    entry = JudgeEntry(label="broken", spec="llm:policy:novice")
    rows = _lines(judge_run(run_dir, problems, entry))
    assert rows and all(not r["ok"] and r["score"] is None for r in rows if r["judged"])
    per, overall = judge_summary({"expert": run_dir}, [entry], 0.5)
    f = per["expert"]["broken"]
    assert f["failed"] == f["judged"] > 0 and f["usable"] == 0
    assert f["pass_rate"] is None and f["kappa_vs_rule"] is None and f["confusion"]["agreement"] is None
    assert "panel" not in overall


def _episodes(run_dir: Path, success: list[bool], verdicts: dict[str, list[float | None]]) -> None:
    (run_dir / "judges").mkdir(parents=True)
    (run_dir / "runs.jsonl").write_text("".join(json.dumps({"problem_id": f"p{i}", "sample": 0, "status": "SUCCESS",
                                                            "steps": 3, "success": s}) + "\n"
                                                for i, s in enumerate(success)))
    for label, scores in verdicts.items():
        (run_dir / "judges" / f"{label}.jsonl").write_text("".join(
            json.dumps({"problem_id": f"p{i}", "sample": 0, "judged": True, "ok": x is not None, "score": x}) + "\n"
            for i, x in enumerate(scores)))


def test_confusion_and_kappas_by_hand(tmp_path: Path) -> None:
    # rule:  T T F F F T ; judge a (gate 0.5): T F T F F T (p5 fails in b) ; judge b: T T F F – T
    _episodes(tmp_path, [True, True, False, False, False, True],
              {"a": [0.9, 0.3, 0.7, 0.1, 0.3, 0.5], "b": [0.9, 0.7, 0.3, 0.1, None, 0.9]})
    per, overall = judge_summary({"m": tmp_path}, [JudgeEntry(label="a", spec="rubric"),
                                                   JudgeEntry(label="b", spec="rubric")], 0.5)
    a, b = per["m"]["a"], per["m"]["b"]
    assert a["confusion"] == {"rule_pass_judge_pass": 2, "rule_pass_judge_fail": 1, "rule_fail_judge_pass": 1,
                              "rule_fail_judge_fail": 2, "agreement": pytest.approx(4 / 6)}
    # κ(rule, a): p_o = 4/6, p_e = ½·½ + ½·½ = ½ → κ = (4/6 − ½) / ½ = 1/3
    assert a["kappa_vs_rule"] == pytest.approx(1 / 3, abs=1e-6)
    assert a["pass_rate"] == pytest.approx(0.5) and a["mean_score"] == pytest.approx(2.8 / 6, abs=1e-6)
    assert (b["usable"], b["failed"]) == (5, 1) and b["kappa_vs_rule"] == pytest.approx(1.0)
    panel = per["m"]["panel"]
    # items both scored: p0 p1 p2 p3 p5 → a: T F T F T, b: T T F F T → p_o = 3/5, marginals 3/5 and 3/5 T
    # p_e = .6·.6 + .4·.4 = .52 → κ = (.6 − .52) / .48 = 1/6
    assert panel["items"] == 5 and panel["cohen_kappa"]["a|b"] == pytest.approx(1 / 6, abs=1e-6)
    # Fleiss with two raters: P̄ = 3/5, p_T = 6/10 → P_e = .52 → κ = (.6 − .52) / .48 = 1/6
    assert panel["fleiss_kappa"] == pytest.approx(1 / 6, abs=1e-6)
    assert overall["by_judge"]["a"]["confusion"] == a["confusion"]


def test_stale_verdicts_are_refused(tmp_path: Path) -> None:
    _episodes(tmp_path, [True, False], {"a": [0.9]})
    with pytest.raises(DataError, match="stale"):
        judge_summary({"m": tmp_path}, [JudgeEntry(label="a", spec="rubric")], 0.5)


def test_judge_specs_are_checked() -> None:
    assert [(j.label, j.spec) for j in parse_judges(["rubric", "p=llm:policy:expert,policy:novice"])] == [
        ("rubric", "rubric"), ("p", "llm:policy:expert,policy:novice")]
    assert parse_judges(["llm:policy:expert"])[0].label == "llm-policy-expert"
    for bad in (["nojudge:x"], ["rubric:extra"], ["rubric", "rubric"], ["panel=rubric"], ["b@d=rubric"]):
        with pytest.raises(ConfigError):
            parse_judges(bad)


def test_judge_gate_is_the_corpus_filters() -> None:
    from shoparena.corpus.filter.config import FilterConfig

    assert FilterConfig().min_judge_score == JUDGE_GATE


def test_report_has_the_judge_section(judged, tmp_path: Path) -> None:
    out, _, _ = judged
    md, html = write_report(out)
    text = md.read_text()
    assert "## Judges" in text and "Fleiss' κ 1.000" in text
    assert text.count("| expert | rubric |") == 1 and "| novice | again |" in text
    assert "Judges" in html.read_text()
