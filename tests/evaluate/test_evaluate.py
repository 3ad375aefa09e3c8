"""``shoparena evaluate``: several models through the real evaluation core, figures with intervals, paired
comparisons, and a summary that is a pure function of the stored runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.evaluate import EvalConfig, evaluate_models, parse_models, split_problems, summarise
from tests.worlds import small_world


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list]:
    root = tmp_path_factory.mktemp("eval")
    catalog, problems, _ = small_world(root, size=400, catalog_seed=3, n=8, problem_seed=5)
    config = EvalConfig(models=parse_models("expert=policy:expert,policy:random"), agent="react", n_samples=2,
                        temperature=0.7, seed=1, concurrency=2, timeout_s=60, n_resamples=500)
    body = evaluate_models(catalog, problems, config, root / "out")
    return root / "out", body, problems


def test_every_model_has_figures_with_intervals(evaluated) -> None:
    out, body, problems = evaluated
    assert body["format"] == "shoparena-evaluation/1"
    assert list(body["models"]) == ["expert", "policy-random"]
    expert, rand = body["models"]["expert"], body["models"]["policy-random"]
    assert expert["n_problems"] == len([p for p in problems if p.bucket != "knowledge"])
    for m in (expert, rand):
        lo, hi = m["ci"]["asr"]
        assert 0.0 <= lo <= m["asr"] <= hi <= 1.0
        assert set(m["pass@k"]) == {"1", "2"} and set(m["pass^k"]) == {"1", "2"}
        assert m["pass^k"]["2"] <= m["pass@k"]["1"] <= m["pass@k"]["2"]  # pass^k ≤ pass@1 ≤ pass@k
        assert m["pass@k"]["1"] == pytest.approx(m["asr"])
        for b in m["by_bucket"].values():
            assert b["ci"][0] <= b["asr"] <= b["ci"][1]
        assert (out / m["run_dir"] / "scores.jsonl").is_file()
    assert expert["asr"] > rand["asr"]  # the expert policy solves what the random one does not


def test_paired_comparison_against_the_baseline(evaluated) -> None:
    out, body, _ = evaluated
    [c] = body["comparisons"]
    assert (c["a"], c["b"]) == ("expert", "policy-random")
    e, r = body["models"]["expert"]["asr"], body["models"]["policy-random"]["asr"]
    assert c["diff"] == pytest.approx(r - e, abs=1e-6)
    assert c["ci"][0] <= c["diff"] <= c["ci"][1]
    assert 0.0 <= c["mcnemar"]["p_value"] <= 1.0 and 0.0 <= c["p_value"] <= 1.0
    assert c["mdd"] > 0
    # the sign test: problems where each model's success rate is higher, recounted from the stored score rows
    rates = {}
    for label in ("expert", "policy-random"):
        per: dict[str, list[bool]] = {}
        for line in (out / "models" / label / "scores.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            per.setdefault(row["problem_id"], []).append(bool(row["success"]))
        rates[label] = {p: sum(v) / len(v) for p, v in per.items()}
    e_rates, r_rates = rates["expert"], rates["policy-random"]
    s = c["sign"]
    assert s["a_better"] == sum(1 for p in e_rates if e_rates[p] > r_rates[p])
    assert s["b_better"] == sum(1 for p in e_rates if r_rates[p] > e_rates[p])
    assert s["b_better"] + s["a_better"] + s["ties"] == c["n_problems"] and 0.0 < s["p_value"] <= 1.0


def test_summary_is_a_pure_function_of_the_stored_runs(evaluated) -> None:
    out, body, problems = evaluated
    config = EvalConfig.model_validate(body["config"])
    again = summarise(out, config, problems)
    assert json.dumps(again, sort_keys=True) == json.dumps(body, sort_keys=True)
    assert json.loads((out / "evaluation.json").read_text()) == body


def test_resume_keeps_finished_runs(evaluated, tmp_path: Path) -> None:
    out, body, problems = evaluated
    config = EvalConfig.model_validate(body["config"])
    stamp = (out / "models" / "expert" / "scores.jsonl").stat().st_mtime_ns
    messages: list[str] = []
    again = evaluate_models(Path(out).parent / "cat", problems, config, out, resume=True, progress=messages.append)
    assert (out / "models" / "expert" / "scores.jsonl").stat().st_mtime_ns == stamp
    assert sum("kept the finished run" in m for m in messages) == 2
    assert again["models"]["expert"]["asr"] == body["models"]["expert"]["asr"]


def test_reuse_grows_an_evaluation_running_only_its_new_problems(evaluated, tmp_path: Path) -> None:
    out, body, problems = evaluated
    config = EvalConfig.model_validate(body["config"])
    catalog = Path(out).parent / "cat"
    half = tmp_path / "half"
    evaluate_models(catalog, problems[:4], config, half)
    grown = evaluate_models(catalog, problems, config, tmp_path / "grown", reuse=[half])
    for label in ("expert", "policy-random"):  # the same figures as the evaluation that ran every problem at once
        a, b = grown["models"][label], body["models"][label]
        assert (a["asr"], a["ci"], a["pass@k"], a["by_axis"]) == (b["asr"], b["ci"], b["pass@k"], b["by_axis"])
        lent = [json.loads(x) for x in (half / "models" / label / "runs.jsonl").read_text().splitlines()]
        runs = {(r["problem_id"], r["sample"]): r for r in
                map(json.loads, (tmp_path / "grown" / "models" / label / "runs.jsonl").read_text().splitlines())}
        assert all(runs[(r["problem_id"], r["sample"])]["seconds"] == r["seconds"] for r in lent)  # not run again
    with pytest.raises(NotFoundError, match="not an evaluation directory"):
        evaluate_models(catalog, problems, config, tmp_path / "x", reuse=[tmp_path / "nowhere"])


def test_two_partitions_evaluated_apart_pool_into_one_paired_test_without_running_again(evaluated,
                                                                                       tmp_path: Path) -> None:
    out, body, problems = evaluated
    config = EvalConfig.model_validate(body["config"])
    catalog = Path(out).parent / "cat"
    first, second = tmp_path / "first", tmp_path / "second"  # as eval and never_touch are, each on its own
    evaluate_models(catalog, problems[:4], config, first)
    evaluate_models(catalog, problems[4:], config, second)
    messages: list[str] = []
    pooled = evaluate_models(catalog, problems, config, tmp_path / "pooled", reuse=[first, second],
                             progress=messages.append)
    assert pooled["comparisons"] == body["comparisons"]  # one paired test over both, as if run at once
    for label in ("expert", "policy-random"):
        lent = {(r["problem_id"], r["sample"]): r["seconds"] for d in (first, second) for r in
                map(json.loads, (d / "models" / label / "runs.jsonl").read_text().splitlines())}
        runs = {(r["problem_id"], r["sample"]): r["seconds"] for r in
                map(json.loads, (tmp_path / "pooled" / "models" / label / "runs.jsonl").read_text().splitlines())}
        assert runs == lent  # every episode lent, none run again


def test_model_specs_are_checked() -> None:
    assert [m.label for m in parse_models("a=policy:expert, hf:runs/x/sft/model")] == ["a", "hf-sft"]
    with pytest.raises(ConfigError, match="used twice"):
        parse_models("a=policy:expert,a=policy:random")
    with pytest.raises(ConfigError, match="not a model URI"):
        parse_models("a=expert")
    with pytest.raises(ConfigError):
        parse_models(" , ")


def test_split_refuses_train_and_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not held out"):
        split_problems(f"{tmp_path}:train")
    with pytest.raises(NotFoundError):
        split_problems(f"{tmp_path}:eval")
    (tmp_path / "split.json").write_text("{}")
    with pytest.raises(DataError):
        split_problems(f"{tmp_path}:eval", problems=tmp_path)


def test_per_bucket_is_stratified_and_seeded(evaluated) -> None:
    from collections import Counter

    from shoparena.evaluate import per_bucket

    _, _, problems = evaluated
    picked = per_bucket(problems, 1, seed=0)
    assert Counter(p.bucket for p in picked) == Counter({b: 1 for b in {p.bucket for p in problems}})
    assert per_bucket(problems, 1, seed=0) == picked
    assert [p.problem_id for p in picked] == sorted(p.problem_id for p in picked)
    assert len(per_bucket(problems, 100)) == len(problems)
    with pytest.raises(ConfigError):
        per_bucket(problems, 0)


def test_retrieval_and_choice_sit_beside_the_asr(evaluated) -> None:
    """Every product-bucket success recommended a ground-truth product, so ``chosen`` bounds them from above."""
    out, body, problems = evaluated
    product = {p.problem_id for p in problems if p.bucket == "product"}
    for m in body["models"].values():
        c = m["choice"]
        assert c["episodes"] == m["n_problems"] * 2
        assert c["chosen"] <= c["recommended"] and c["passed_over"] <= c["retrieved"]
        wins = [json.loads(x) for x in (out / m["run_dir"] / "scores.jsonl").read_text().splitlines()]
        assert c["chosen"] >= sum(1 for s in wins if s["problem_id"] in product and s["success"])
    assert body["models"]["expert"]["choice"]["chosen"] > 0


def test_baseline_picks_the_model_compared_against(evaluated, tmp_path: Path) -> None:
    import shutil

    out, body, problems = evaluated
    copy = tmp_path / "copy"
    shutil.copytree(out / "models", copy / "models")
    config = EvalConfig.model_validate({**body["config"], "baseline": "policy-random"})
    again = summarise(copy, config, problems)
    [c] = again["comparisons"]
    assert again["baseline"] == "policy-random" and (c["a"], c["b"]) == ("policy-random", "expert")
    assert c["diff"] == pytest.approx(-body["comparisons"][0]["diff"], abs=1e-6)
    assert body["baseline"] == "expert"  # default: the first model
    bad = EvalConfig.model_validate({**body["config"], "baseline": "nobody"})
    with pytest.raises(ConfigError) as exc:
        summarise(copy, bad, problems)
    assert "nobody" in exc.value.message and "expert" in exc.value.hint and "policy-random" in exc.value.hint


def test_comparison_pairs_baseline_first_then_neighbours() -> None:
    from shoparena.evaluate.core import comparison_pairs

    labels = ["base", "s1", "s2", "teacher"]
    assert comparison_pairs(labels, "base") == [("base", "s1"), ("base", "s2"), ("base", "teacher"), ("s1", "s2"),
                                                ("s2", "teacher")]
    assert comparison_pairs(labels, "s1") == [("s1", "base"), ("s1", "s2"), ("s1", "teacher"), ("s2", "teacher")]
    assert comparison_pairs(["only"], "only") == []
