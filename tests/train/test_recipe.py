"""Recipes and ``shoparena train``: built-ins validate, a bad recipe is one clear line, a missing stage module
fails before any work, the CLI writes a manifest, ``--resume`` skips finished stages with the same hashes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shoparena.env.tools import PROFILES
from shoparena.errors import ConfigError
from shoparena.train import recipe as recipe_mod
from shoparena.train.recipe import BUILTIN_RECIPES, load_recipe, run_recipe
from tests.train.conftest import TrainWorld


@pytest.mark.parametrize("name", BUILTIN_RECIPES)
def test_builtin_recipes_load(name: str) -> None:
    recipe, text = load_recipe(name)
    assert recipe.name == name and text.startswith("#")
    # stage 1's later legs are SFT only; cpu-mini-teacher is stage 3 alone, continuing the last leg
    only = {"cpu-mini-sft2": ("sft",), "cpu-mini-sft3": ("sft",), "cpu-mini-freeze": ("sft",),
            "cpu-mini-fit": ("sft",), "cpu-mini-rs": ("rs",), "cpu-mini-teacher": ("teacher",),
            "cpu-mini-kto": ("kto",), "cpu-mini-grpo": ("grpo",), "cpu-mini-grpo-headroom": ("grpo",)}
    assert recipe.stages == only.get(name, ("sft", "rs", "teacher", "kto", "grpo"))
    assert recipe.sft.lora is None or recipe.sft.lora.target_modules  # explicit LoRA targets (bug #11)

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus / tiny-model fixtures


def test_cpu_mini_second_leg_trains_on_the_react_evaluations_tools() -> None:
    more, _ = load_recipe("cpu-mini-sft2")
    first, _ = load_recipe("cpu-mini-v2")
    assert sorted(more.sft.tools or ()) == sorted(PROFILES["upstream4"])  # what `react` evaluation offers
    assert more.base == "runs/cpu-mini-v2/sft/model" and more.sft.seed != first.sft.seed  # new data order
    assert (more.sft.format(), more.sft.lora) == (first.sft.format(), first.sft.lora)  # served like the first leg


def test_cpu_mini_third_leg_continues_the_second_and_keeps_two_products_details_whole() -> None:
    third, _ = load_recipe("cpu-mini-sft3")
    second, _ = load_recipe("cpu-mini-sft2")
    assert third.base == "runs/cpu-mini-v3/sft/model" and third.sft.seed not in (second.sft.seed, 0)
    assert third.sft.tools == second.sft.tools and third.sft.lora == second.sft.lora
    compact = third.sft.format().compact
    assert compact is not None and compact.max_items == 2 and compact.max_chars == 800
    assert {"attributes", "sku_options"} <= set(compact.detail_fields)  # what view_product_information tells


def test_cpu_mini_teacher_continues_sft_v4_served_the_same_way() -> None:
    teacher, _ = load_recipe("cpu-mini-teacher")
    third, _ = load_recipe("cpu-mini-sft3")
    assert teacher.base == "runs/cpu-mini-v4/sft/model"  # cpu-mini-sft3's output
    assert teacher.teacher.format() == third.sft.format()  # same tools prompt, system prompt and compaction
    assert teacher.teacher.tools == third.sft.tools and teacher.teacher.lora == third.sft.lora
    assert (teacher.teacher.teacher, teacher.teacher.upsample_bucket, teacher.teacher.upsample_factor) == \
        ("policy:expert", "voucher", 3)  # paper §4
    assert teacher.teacher.seed not in (third.sft.seed, 0) and teacher.teacher.n_samples >= 2


def test_cpu_mini_freeze_starts_from_the_base_on_whole_trajectories_served_like_the_third_leg() -> None:
    freeze, _ = load_recipe("cpu-mini-freeze")
    third, _ = load_recipe("cpu-mini-sft3")
    first, _ = load_recipe("cpu-mini-v2")
    assert freeze.base == first.base  # stage 1 from the untrained SmolLM2, not a continuation
    assert freeze.sft.truncation == "drop"  # a row cut before its recommend turn is left out, not trained
    assert freeze.sft.format().model_copy(update={"truncation": "keep_start"}) == third.sft.format()
    assert freeze.sft.tools == third.sft.tools and freeze.sft.lora == third.sft.lora
    assert freeze.sft.seed not in (0, 1, 2)  # a data order of its own


def test_paper_recipe_carries_the_papers_settings() -> None:
    paper, _ = load_recipe("paper")
    assert paper.sft.lr_sweep == (1e-5, 3e-5, 1e-4) and paper.sft.max_length == 14336 and paper.sft.bf16
    assert (paper.rs.k, paper.rs.temperature, paper.rs.mix_ratio) == (8, 0.9, 0.5)
    assert paper.teacher.upsample_factor == 3 and paper.kto["learning_rate"] == 5e-6
    assert paper.verified is None  # not yet run on a GPU


@pytest.mark.parametrize(("text", "match"), [
    ("name: x\nsft: {learning_rate: -1}\n", r"recipe .*: sft\.learning_rate: Input should be greater than 0"),
    ("name: x\nstages: [sft, dpo]\n", r"recipe .*: stages: .*unknown stage\(s\) dpo"),
    ("name: x\nsft: {lerning_rate: 1}\n", r"recipe .*: sft\.lerning_rate: Extra inputs are not permitted"),
    ("name: x\nsft: [1, 2\n", r"recipe .*: not valid YAML at line \d+"),
    ("- just a list\n", r"expected a mapping"),
])
def test_bad_recipe_is_one_clear_line(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load_recipe(path)
    assert "\n" not in info.value.message


def test_missing_stage_module_fails_before_any_work(train_world: TrainWorld, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(recipe_mod.STAGES, "kto", "shoparena.train._not_built_kto")
    recipe, _ = load_recipe("tiny")
    with pytest.raises(ConfigError, match=r"stage 'kto' is not available in this build"):
        run_recipe(recipe, train_world.corpus, tmp_path / "out", stages=["sft", "kto"])
    assert not (tmp_path / "out").exists()


def test_harness_stages_need_a_catalog(train_world: TrainWorld, tmp_path: Path) -> None:
    recipe, _ = load_recipe("tiny")
    with pytest.raises(ConfigError, match="need the catalog"):
        run_recipe(recipe, train_world.corpus, tmp_path / "out", stages=["sft", "rs"])


def test_cli_tiny_sft_writes_a_manifest_and_resume_skips(train_world: TrainWorld, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    out = tmp_path / "run"
    main(["train", "tiny", "--corpus", str(train_world.corpus), "--out", str(out), "--stages", "sft", "--json"])
    printed = json.loads(capsys.readouterr().out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert printed == manifest and manifest["complete"] and manifest["stages_requested"] == ["sft"]
    corpus_manifest = json.loads((train_world.corpus / "manifest.json").read_text())
    assert manifest["corpus_manifest_sha256"] == corpus_manifest["manifest_hash"]
    assert manifest["recipe_text"] == load_recipe("tiny")[1] and manifest["seeds"]["sft"] == 0
    assert manifest["versions"]["trl"] == "1.16.0"
    (sft,) = manifest["stages"]
    assert manifest["checkpoints"] == {"sft": sft["checkpoint_sha256"]} and sft["steps"] == 6
    assert manifest["final_model"] == str(out / "sft" / "model")

    main(["train", "tiny", "--corpus", str(train_world.corpus), "--out", str(out), "--stages", "sft", "--resume",
          "--json"])
    again = json.loads(capsys.readouterr().out)
    assert again["skipped"] == ["sft"] and again["checkpoints"] == manifest["checkpoints"]


def test_cli_help_names_every_builtin_recipe() -> None:
    import re

    from shoparena.cli.train import RECIPE_HELP

    listed = re.search(r"\((.*):", RECIPE_HELP).group(1).split(", ")
    assert listed == list(BUILTIN_RECIPES)


def test_cli_bad_recipe_exits_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    with pytest.raises(SystemExit) as info:
        main(["train", "no-such-recipe", "--corpus", str(tmp_path), "--out", str(tmp_path / "o")])
    assert info.value.code != 0
    err = capsys.readouterr().err
    assert "no recipe 'no-such-recipe'" in err and "Traceback" not in err


def test_resume_reruns_from_the_first_unfinished_stage(train_world: TrainWorld, tmp_path: Path) -> None:
    recipe, text = load_recipe("tiny")
    recipe = recipe.model_copy(update={  # fewer steps: the chain is what is tested here
        "sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1}),
        "rs": recipe.rs.model_copy(update={"max_steps": 1, "max_problems": 1})})
    out = tmp_path / "run"
    first = run_recipe(recipe, train_world.corpus, out, stages=["sft", "rs"], catalog_dir=train_world.catalog,
                       recipe_text=text)
    assert [s.stage for s in first.stages] == ["sft", "rs"] and first.complete and first.skipped == []
    rs = first.stages[1].metrics
    assert rs["kept"] > 0 and rs["mix"]["rs_rows"] == rs["kept"]  # the expert sampler succeeds on some problems
    (out / "sft" / "stage.json").unlink()  # sft reruns (from its last checkpoint), so rs must rerun too
    second = run_recipe(recipe, train_world.corpus, out, stages=["sft", "rs"], catalog_dir=train_world.catalog,
                       resume=True, recipe_text=text)
    assert second.skipped == [] and second.checkpoints == first.checkpoints
    assert second.stages[0].resumed_from is not None and second.stages[1].resumed_from is None


def test_resume_reruns_a_stage_whose_config_changed(train_world: TrainWorld, tmp_path: Path) -> None:
    """A finished stage is reused only for the config, input checkpoint and corpus it was made from; an interrupted
    one continues only from checkpoints started with the same key (stale ones are removed)."""
    recipe, text = load_recipe("tiny")
    recipe = recipe.model_copy(update={"sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1})})
    out = tmp_path / "run"
    first = run_recipe(recipe, train_world.corpus, out, stages=["sft"], recipe_text=text)
    key = first.stages[0].key_sha256
    assert key and json.loads((out / "sft" / "stage.json").read_text())["key_sha256"] == key
    assert (out / "sft" / "stage-key.txt").read_text().strip() == key
    same = run_recipe(recipe, train_world.corpus, out, stages=["sft"], resume=True, recipe_text=text)
    assert same.skipped == ["sft"]

    lr = recipe.sft.learning_rate / 2
    changed = recipe.model_copy(update={"sft": recipe.sft.model_copy(update={"learning_rate": lr})})
    (out / "sft" / "stage.json").unlink()  # interrupted after its checkpoints, under the old config
    again = run_recipe(changed, train_world.corpus, out, stages=["sft"], resume=True, recipe_text=text)
    assert again.skipped == [] and again.stages[0].resumed_from is None  # the old checkpoints were not used
    assert again.stages[0].key_sha256 != key and again.checkpoints != first.checkpoints
    back = run_recipe(recipe, train_world.corpus, out, stages=["sft"], resume=True, recipe_text=text)
    assert back.skipped == [] and back.checkpoints == first.checkpoints  # finished, but for another config


def test_cli_tiny_runs_all_five_stages_with_clean_json(rl_world: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 10: the tiny recipe chains sft → rs → teacher → kto → grpo; trainers' log lines never reach stdout,
    so --json prints the manifest alone."""
    from shoparena.cli import main

    out = tmp_path / "all"
    main(["train", "tiny", "--corpus", str(rl_world.corpus), "--catalog", str(rl_world.catalog),
          "--out", str(out), "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["complete"] and [s["stage"] for s in printed["stages"]] == ["sft", "rs", "teacher", "kto", "grpo"]
    assert all(s["metrics"].get("loss_last") is not None and s["steps"] >= 1 for s in printed["stages"])
    assert printed["final_model"] == str(out / "grpo" / "model") and (out / "grpo" / "model").is_dir()
    assert set(printed["checkpoints"]) == {"sft", "rs", "teacher", "kto", "grpo"}
    from shoparena.llm.compact import FORMAT_FILE

    # KTO and GRPO choose no observation rendering: they serve the one their input was trained with
    formats = {s: (out / s / "model" / FORMAT_FILE).read_text() for s in ("teacher", "kto", "grpo")}
    assert formats["kto"] == formats["grpo"] == formats["teacher"]
    main(["train", "tiny", "--corpus", str(rl_world.corpus), "--catalog", str(rl_world.catalog),
          "--out", str(out), "--resume", "--json"])
    again = json.loads(capsys.readouterr().out)  # every stage re-checked by its hash (one hash for all stages)
    assert again["skipped"] == ["sft", "rs", "teacher", "kto", "grpo"] and again["checkpoints"] == printed["checkpoints"]


def test_cpu_mini_fit_is_freeze_with_every_trained_turn_within_the_bases_serving_cap() -> None:
    fit, _ = load_recipe("cpu-mini-fit")
    freeze, _ = load_recipe("cpu-mini-freeze")
    assert fit.base == freeze.base and fit.sft.seed == freeze.sft.seed and fit.sft.tools == freeze.sft.tools
    assert fit.sft.format() == freeze.sft.format().model_copy(update={"turn_tokens": 256})
    from shoparena.llm.models import MODELS

    assert fit.sft.turn_tokens == MODELS.get("smollm2-135m").max_new_tokens  # the cap `models prepare` writes


def test_cpu_mini_rs_samples_stage_one_as_it_is_evaluated_and_retrains_on_its_rendering() -> None:
    rs, _ = load_recipe("cpu-mini-rs")
    fit, _ = load_recipe("cpu-mini-fit")
    assert rs.base == "runs/gpu/s1fit-lr0.002/model"  # sft-gpu-fit: cpu-mini-fit's rows trained on a GPU
    assert rs.rs.format() == fit.sft.format() and rs.rs.tools == fit.sft.tools  # trained as stage 1 was rendered
    assert rs.rs.sampler is not None and rs.rs.sampler.startswith("llamacpp:{model}?dtype=Q8_0")  # served as evaluated
    assert (rs.rs.agent, rs.rs.timeout_s, rs.rs.temperature) == ("react", 60, 0.9)  # the eval's harness; paper T
    assert rs.rs.max_problems is None and rs.rs.mix_ratio == 0.5  # every train problem; RS and stage-1 rows 50/50
    assert rs.rs.seed != fit.sft.seed  # a new data order


def test_cpu_mini_kto_renders_rows_as_stage_one_was_trained_and_keeps_the_papers_rule() -> None:
    """docs/training.md §3 row 4: β 0.02, LoRA r16 on q/k/v/o, the emission-rate stop below 0.9; the CPU recipe keeps
    those and renders its rows as stage 1 (sft-gpu-fit, cpu-mini-fit's rendering) was trained."""
    from shoparena.train.kto import ATTENTION_TARGETS, KTOConfig

    recipe, _ = load_recipe("cpu-mini-kto")
    fit, _ = load_recipe("cpu-mini-fit")
    kto = KTOConfig.model_validate(recipe.kto)
    assert recipe.base == "runs/gpu/s1fit-lr0.002/model"
    assert kto.beta == 0.02 and kto.probe_threshold == 0.9 and kto.loss_type == "kto"
    assert kto.lora is not None and kto.lora.r == 16 and tuple(kto.lora.target_modules) == ATTENTION_TARGETS
    assert (kto.system, kto.turn_tokens, kto.tools) == (fit.sft.system, fit.sft.turn_tokens, fit.sft.tools)
    assert kto.max_rows is not None and kto.max_rows % kto.batch_size == 0


def test_cpu_mini_grpo_is_dr_grpo_over_the_served_rendering() -> None:
    """docs/training.md §3 row 5: dr_grpo, no reward scaling, β 0.2, w 0.5, T 1.0; the CPU recipe continues stage 4 and
    rolls out as the checkpoint is served (system turn, tool profile, the serving cap per turn)."""
    from shoparena.llm.models import MODELS
    from shoparena.train.grpo import GRPOConfig

    recipe, _ = load_recipe("cpu-mini-grpo")
    fit, _ = load_recipe("cpu-mini-fit")
    grpo = GRPOConfig.model_validate(recipe.grpo)
    assert recipe.base == "runs/cpu-mini-kto/kto/model"  # stage 5 continues stage 4
    assert (grpo.loss_type, grpo.scale_rewards, grpo.beta, grpo.w, grpo.temperature) == ("dr_grpo", "none", 0.2,
                                                                                          0.5, 1.0)
    assert (grpo.system, grpo.tools) == (fit.sft.system, fit.sft.tools)
    assert grpo.turn_max_tokens == MODELS.get("smollm2-135m").max_new_tokens


def test_cpu_mini_grpo_headroom_is_cpu_mini_grpo_on_the_headroom() -> None:
    """docs/training.md §3 (stage 5 converts pass@k headroom): the same stage-5 settings, prompts narrowed to the train
    problems stage 2's sampling of stage 1 solved."""
    from shoparena.train.grpo import GRPOConfig

    plain, _ = load_recipe("cpu-mini-grpo")
    room, _ = load_recipe("cpu-mini-grpo-headroom")
    a, b = GRPOConfig.model_validate(plain.grpo), GRPOConfig.model_validate(room.grpo)
    assert a.prompts_from is None and b.prompts_from == "runs/cpu-mini-rs/rs/samples"
    assert b.model_copy(update={"prompts_from": None, "max_steps": a.max_steps}) == a
    assert room.base == plain.base and b.max_steps > a.max_steps


def test_grpo_prompts_from_names_the_runs_own_directory(rl_world: Any, tmp_path: Path) -> None:
    """``prompts_from: "{out}/…"``: a chained recipe points stage 5 at a harness run inside its own output directory
    (stage 2's ``rs/samples``), wherever the run is written; the key keeps the placeholder."""
    from shoparena.train.recipe import RUN_DIR, in_run

    assert in_run({"prompts_from": f"{RUN_DIR}/rs/samples", "w": 0.5}, tmp_path) == {
        "prompts_from": f"{tmp_path}/rs/samples", "w": 0.5}
    assert in_run({"prompts_from": "runs/x"}, tmp_path) == {"prompts_from": "runs/x"}
    pid = next(r["problem_id"] for r in rl_world.rows("grpo_train"))
    text = ("name: room\nbase: tiny\nstages: [grpo]\ngrpo:\n  max_steps: 1\n  num_generations: 2\n  batch_size: 2\n"
            "  max_turns: 1\n  max_completion_length: 1024\n  turn_max_tokens: 64\n  save_steps: 1\n"
            "  prompts_from: '{out}/samples'\n")
    (tmp_path / "room.yaml").write_text(text)
    recipe, recipe_text = load_recipe(str(tmp_path / "room.yaml"))
    for where in ("a", "b"):
        out = tmp_path / where
        (out / "samples").mkdir(parents=True)
        (out / "samples" / "runs.jsonl").write_text(
            json.dumps({"problem_id": pid, "sample": 0, "success": True}) + "\n")
        run_recipe(recipe, rl_world.corpus, out, catalog_dir=rl_world.catalog, recipe_text=recipe_text)
    stages = [json.loads((tmp_path / w / "grpo" / "stage.json").read_text()) for w in "ab"]
    assert [s["metrics"]["prompts_from"] for s in stages] == [str(tmp_path / w / "samples") for w in "ab"]
    assert all(s["metrics"]["prompts"] == 1 for s in stages) and stages[0]["key_sha256"] == stages[1]["key_sha256"]


def test_cpu_mini_chains_the_five_stages_each_as_its_measured_recipe() -> None:
    """Issue 10 (cpu-mini: the five stages on the CPU): stage 1 is cpu-mini-fit's data and rendering at 1e-3 in bf16
    autocast; stages 2–5 are cpu-mini-rs, -teacher, -kto and -grpo-headroom served the same way, GRPO on the headroom
    of stage 2's sampling in the same run (docs/training.md §3)."""
    from shoparena.train.grpo import GRPOConfig
    from shoparena.train.kto import KTOConfig

    mini, _ = load_recipe("cpu-mini")
    fit, _ = load_recipe("cpu-mini-fit")
    rs, _ = load_recipe("cpu-mini-rs")
    kto, _ = load_recipe("cpu-mini-kto")
    room, _ = load_recipe("cpu-mini-grpo-headroom")
    assert tuple(mini.stages) == ("sft", "rs", "teacher", "kto", "grpo") and mini.base == fit.base
    assert mini.sft.bf16 and mini.sft.learning_rate == 1e-3 > fit.sft.learning_rate
    assert mini.sft.format() == fit.sft.format() and mini.sft.tools == fit.sft.tools and mini.sft.lora == fit.sft.lora
    assert mini.rs.model_copy(update={"bf16": False}) == rs.rs
    assert mini.teacher.format() == mini.sft.format() and mini.teacher.tools == mini.sft.tools
    assert mini.teacher.teacher == "policy:expert" and mini.teacher.upsample_factor == 3  # paper §4
    a, b = KTOConfig.model_validate(mini.kto), KTOConfig.model_validate(kto.kto)
    assert a.model_copy(update={"max_rows": b.max_rows}) == b and a.max_rows < b.max_rows
    g, h = GRPOConfig.model_validate(mini.grpo), GRPOConfig.model_validate(room.grpo)
    assert g.prompts_from == "{out}/rs/samples" and g.max_steps <= h.max_steps
    assert g.model_copy(update={"prompts_from": h.prompts_from, "max_steps": h.max_steps}) == h
