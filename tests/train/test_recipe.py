"""Recipes and ``shoparena train``: every recipe (the built-ins and the experiments' recipes, run by path) loads
with every section typed, a misspelt key or a wrong type in any section is refused at load naming it, a missing stage
module fails before any work, the CLI writes a manifest and keeps the console clean, ``--resume`` skips finished
stages with the same hashes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import ConfigError
from shoparena.train import recipe as recipe_mod
from shoparena.train.grpo import GRPOConfig
from shoparena.train.kto import KTOConfig
from shoparena.train.recipe import BUILTIN_RECIPES, load_recipe, run_recipe
from shoparena.train.rs import RSConfig
from shoparena.train.sft import SFTConfig
from shoparena.train.teacher import TeacherConfig
from tests.train.conftest import TrainWorld

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus / tiny-model fixtures

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "docs" / "experiments" / "recipes").glob("*.yaml"))
ALL_RECIPES = [*BUILTIN_RECIPES, *(str(p.relative_to(ROOT)) for p in EXPERIMENTS)]
SECTIONS = {"sft": SFTConfig, "rs": RSConfig, "teacher": TeacherConfig, "kto": KTOConfig, "grpo": GRPOConfig}


def _header(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))


def test_the_builtins_are_the_shipped_files_and_the_experiments_live_outside_the_package() -> None:
    shipped = {p.stem for p in (ROOT / "shoparena" / "train" / "recipes").glob("*.yaml")}
    assert shipped == set(BUILTIN_RECIPES) == {"tiny", "cpu-mini", "paper", "gpu-smollm2"}
    assert EXPERIMENTS and not {p.stem for p in EXPERIMENTS} & shipped


@pytest.mark.parametrize("spec", ALL_RECIPES)
def test_every_recipe_loads_typed_and_says_where_it_was_run(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # experiment recipes run by path from the repository root
    recipe, text = load_recipe(spec)
    assert recipe.name == Path(spec).stem and _header(text)  # a header saying what it is and how to run it
    assert isinstance(recipe.verified, str) and recipe.verified.strip()
    for name, cls in SECTIONS.items():
        section = getattr(recipe, name)
        assert type(section) is cls  # typed at load, not a dict checked when the stage runs
        assert section.lora is None or section.lora.target_modules  # explicit LoRA targets (docs/training.md §4.5)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\bissue \d+|#\d+", _header(text))  # no dates or issue numbers


def test_no_recipe_starts_from_a_run_without_the_command_that_makes_it() -> None:
    """A ``base: runs/…`` is the output of a command given in a recipe header (``--out DIR`` of ``shoparena train``
    or the destination of ``scripts/gpu/rebuild.py``), and the recipe's own header gives that command or names the
    recipe whose header does."""
    headers = {p.stem: _header(p.read_text()) for p in EXPERIMENTS}
    made_by: dict[str, set[str]] = {}
    for name, header in headers.items():
        flat = header.replace("\\\n#", " ")
        for out in re.findall(r"--out (runs/\S+)", flat) + re.findall(r"rebuild\.py \S+ \S+ (runs/\S+)", flat):
            made_by.setdefault(out, set()).add(name)
    for path in EXPERIMENTS:
        recipe, _ = load_recipe(path)
        if not recipe.base.startswith("runs/"):
            continue
        makers = set().union(*(names for out, names in made_by.items() if recipe.base.startswith(out)))
        assert makers, f"{path.name}: no recipe header gives the command that makes {recipe.base}"
        assert path.stem in makers or any(m in headers[path.stem] for m in makers), \
            f"{path.name} does not say how {recipe.base} is made"


@pytest.mark.parametrize(("text", "match"), [
    ("name: x\nsft: {learning_rate: -1}\n", r"recipe .*: sft\.learning_rate: Input should be greater than 0"),
    ("name: x\nstages: [sft, dpo]\n", r"recipe .*: stages: .*unknown stage\(s\) dpo"),
    ("name: x\nsft: {lerning_rate: 1}\n", r"recipe .*: unknown key 'lerning_rate' in sft \(did you mean 'learning_rate'"),
    ("name: x\nsft: [1, 2\n", r"recipe .*: not valid YAML at line \d+"),
    ("- just a list\n", r"expected a mapping"),
    ("name: x\nstagez: [sft]\n", r"unknown key 'stagez' in the recipe's top level"),
    ("name: x\nverified: [gpu]\n", r"verified: Input should be a valid string"),
    ("name: x\nsft: {lora: {rank: 8}}\n", r"unknown key 'rank' in sft\.lora"),
    ("name: x\ngrpo: {num_generations: 3}\n", r"grpo: batch_size × grad_accum = 8 is not a multiple"),
])
def test_bad_recipe_is_one_clear_line(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load_recipe(path)
    assert "\n" not in info.value.message and info.value.hint and "accepts:" in info.value.hint


@pytest.mark.parametrize("stage", [*SECTIONS, "sft.lora"])
@pytest.mark.parametrize(("value", "what"), [("{learning_ratte: 1.0e-4}", "key"), ("{seed: '3'}", "type"),
                                             ("{learning_rate: true}", "type"), ("{max_steps: 2.5}", "type")])
def test_a_misspelt_key_or_a_wrong_type_in_any_section_is_refused_at_load(tmp_path: Path, stage: str, value: str,
                                                                          what: str) -> None:
    """Every section is typed strictly when the recipe loads (no key it does not know; numbers are numbers, flags
    booleans): the error names the section and the key, the hint lists the keys the section accepts."""
    if stage == "sft.lora":
        value = value.replace("learning_ratte", "alphaa").replace("seed", "r").replace("learning_rate", "dropout")
        value = value.replace("max_steps", "r")
        text = f"name: x\nsft:\n  lora: {value}\n"
        model: Any = recipe_mod.Recipe.model_fields["sft"].annotation.model_fields["lora"].annotation
        model = next(a for a in model.__args__ if a is not type(None))
    else:
        text = f"name: x\n{stage}: {value}\n"
        model = SECTIONS[stage]
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    key = re.search(r"\{(\w+):", value).group(1)
    message, hint = info.value.message, info.value.hint or ""
    if what == "key":
        assert f"unknown key {key!r} in {stage}" in message
    else:
        assert f"{stage}.{key}: Input should be" in message
    assert f"{stage} accepts: " + ", ".join(model.model_fields) in hint


@pytest.mark.parametrize("stage", list(SECTIONS))
def test_cli_refuses_a_bad_stage_section_before_any_stage_runs(tmp_path: Path, stage: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    path = tmp_path / "r.yaml"
    path.write_text(f"name: x\nbase: tiny\n{stage}: {{betaa: 0.1}}\n")
    with pytest.raises(SystemExit) as info:
        main(["train", str(path), "--corpus", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    lines = [line.strip() for line in err.strip().splitlines()]
    assert lines[0].startswith("error:") and f"unknown key 'betaa' in {stage}" in lines[0]
    assert lines[1].startswith("hint:") and f"{stage} accepts: seed, learning_rate" in " ".join(lines[1:])
    assert not (tmp_path / "out").exists()  # nothing ran


def test_cli_run_refused_before_any_work_leaves_no_directory(train_world: TrainWorld, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    for i, (args, code) in enumerate(((["--corpus", str(tmp_path / "missing")], 4),
                                      (["--corpus", str(train_world.corpus), "--stages", "sft,rs",  # rs searches it
                                        "--catalog", str(tmp_path / "no-catalog")], 4))):
        out = tmp_path / "new" / f"out{i}"
        with pytest.raises(SystemExit) as info:
            main(["train", "tiny", *args, "--out", str(out)])
        assert info.value.code == code and capsys.readouterr().err.startswith("error:")
        assert not out.exists() and not out.parent.exists()


def test_yaml_exponents_without_a_dot_are_numbers(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: x\nsft: {learning_rate: 3e-4}\nkto: {learning_rate: 5.0e-6, beta: 2E-2}\n")
    recipe, _ = load_recipe(path)
    assert (recipe.sft.learning_rate, recipe.kto.learning_rate, recipe.kto.beta) == (3e-4, 5e-6, 0.02)


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
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    from shoparena.cli import main

    out = tmp_path / "run"
    main(["train", "tiny", "--corpus", str(train_world.corpus), "--out", str(out), "--stages", "sft", "--json",
          "--verbose"])
    console = capfd.readouterr()
    printed = json.loads(console.out)  # stdout is the manifest alone, --verbose or not
    assert re.search(r"shoparena\.train: sft step 6 \{.*\"loss\": ", console.err)  # --verbose: the logs, live
    assert not (out / "train.log").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert printed == manifest and manifest["complete"] and manifest["stages_requested"] == ["sft"]
    corpus_manifest = json.loads((train_world.corpus / "manifest.json").read_text())
    assert manifest["corpus_manifest_sha256"] == corpus_manifest["manifest_hash"]
    assert manifest["recipe_text"] == load_recipe("tiny")[1] and manifest["seeds"]["sft"] == 0
    assert manifest["versions"]["trl"] == "1.16.0"
    (sft,) = manifest["stages"]
    assert manifest["checkpoints"] == {"sft": sft["checkpoint_sha256"]} and sft["steps"] == 6
    assert manifest["final_model"] == "sft/model" and sft["model_dir"] == "sft/model"  # relative to the run

    main(["train", "tiny", "--corpus", str(train_world.corpus), "--out", str(out), "--stages", "sft", "--resume",
          "--json"])
    again = json.loads(capfd.readouterr().out)
    assert again["skipped"] == ["sft"] and again["checkpoints"] == manifest["checkpoints"]


def test_cli_help_names_every_builtin_recipe() -> None:
    from shoparena.cli.train import RECIPE_HELP

    listed = re.search(r"\(([^:]*):", RECIPE_HELP).group(1).split(", ")
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
    # the continued stage's compute adds both processes'; the rerun one (its input retrained) starts from zero
    s1, s2 = first.stages[0].metrics, second.stages[0].metrics
    assert s1["stage_processes"] == 1 and s2["stage_processes"] == 2 and s2["stage_cpu_s"] > s1["stage_cpu_s"]
    assert second.stages[1].metrics["stage_processes"] == 1
    assert second.cpu_s == pytest.approx(sum(s.metrics["stage_cpu_s"] for s in second.stages), abs=1e-2)
    assert second.stages_wall_s == pytest.approx(sum(s.metrics["stage_wall_s"] for s in second.stages), abs=1e-2)


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


def test_cli_tiny_runs_all_five_stages_with_a_clean_console(rl_world: Any, tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    """The tiny recipe chains sft → rs → teacher → kto → grpo through the CLI. The console gets one line per stage and
    the result table: no trainer log dict and no library warning, which go to OUT/train.log; --json prints the
    manifest alone."""
    from shoparena.cli import main

    out = tmp_path / "all"
    main(["train", "tiny", "--corpus", str(rl_world.corpus), "--catalog", str(rl_world.catalog), "--out", str(out)])
    console = capfd.readouterr()
    for stream in (console.out, console.err):
        assert "{'loss'" not in stream and "Warning" not in stream and "Traceback" not in stream
    assert [line.split(":")[0].strip() for line in console.err.splitlines()] == ["sft", "rs", "teacher", "kto", "grpo"]
    assert "final model: hf:" in console.out and "loss first → last" in console.out
    log = (out / "train.log").read_text()
    for stage in ("sft", "rs", "teacher", "kto", "grpo"):  # every trainer's per-step log dicts
        assert re.search(rf"shoparena\.train: {stage} step \d+ \{{.*\"loss\": ", log), stage
    assert "Warning" in log  # the libraries' warnings (TRL's and transformers' deprecations) are kept here
    printed = json.loads((out / "manifest.json").read_text())
    assert printed["complete"] and [s["stage"] for s in printed["stages"]] == ["sft", "rs", "teacher", "kto", "grpo"]
    assert all(s["metrics"].get("loss_last") is not None and s["steps"] >= 1 for s in printed["stages"])
    assert printed["final_model"] == "grpo/model" and (out / "grpo" / "model").is_dir()  # relative to the run
    assert set(printed["checkpoints"]) == {"sft", "rs", "teacher", "kto", "grpo"}
    # every stage's compute, sampling included, and the run's total, in the manifest and on the console
    spent = [s["metrics"]["stage_cpu_s"] for s in printed["stages"]]
    assert all(c > 0 for c in spent) and all(s["metrics"]["stage_processes"] == 1 for s in printed["stages"])
    assert printed["cpu_s"] == pytest.approx(sum(spent), abs=1e-2)
    assert printed["stages_wall_s"] == pytest.approx(sum(s["metrics"]["stage_wall_s"] for s in printed["stages"]),
                                                    abs=1e-2)
    assert f"compute: {printed['cpu_s']:.0f} CPU-s, {printed['stages_wall_s']:.0f} s wall" in console.out
    # every stage's memory: this process's resident set when it began, its own peak, what stayed once released
    from shoparena.train.clock import reset_peak_rss

    assert "peak GiB" in console.out
    if reset_peak_rss():  # Linux: the stage's own high-water mark
        for s in printed["stages"]:
            m = s["metrics"]
            assert m["stage_peak_rss_mib"] >= m["stage_rss_start_mib"] - 1 > 100  # a loaded model is resident
            assert 0 < m["stage_rss_after_mib"] <= m["stage_peak_rss_mib"]
    from shoparena.llm.compact import FORMAT_FILE

    # KTO and GRPO choose no observation rendering: they serve the one their input was trained with
    formats = {s: (out / s / "model" / FORMAT_FILE).read_text() for s in ("teacher", "kto", "grpo")}
    assert formats["kto"] == formats["grpo"] == formats["teacher"]
    main(["train", "tiny", "--corpus", str(rl_world.corpus), "--catalog", str(rl_world.catalog),
          "--out", str(out), "--resume", "--json"])
    console = capfd.readouterr()
    again = json.loads(console.out)  # every stage re-checked by its hash (one hash for all stages)
    assert again["skipped"] == ["sft", "rs", "teacher", "kto", "grpo"] and again["checkpoints"] == printed["checkpoints"]
    assert again["cpu_s"] == printed["cpu_s"] and again["stages_wall_s"] == printed["stages_wall_s"]  # kept
    assert "{'loss'" not in console.err


def test_grpo_prompts_from_names_the_runs_own_directory(rl_world: Any, tmp_path: Path) -> None:
    """``prompts_from: "{out}/…"``: a chained recipe points stage 5 at a harness run inside its own output directory
    (stage 2's ``rs/samples``), wherever the run is written; the key keeps the placeholder."""
    from shoparena.train.recipe import RUN_DIR, in_run

    assert in_run(GRPOConfig(prompts_from=f"{RUN_DIR}/rs/samples", w=0.3), tmp_path) == GRPOConfig(
        prompts_from=f"{tmp_path}/rs/samples", w=0.3)
    assert in_run(GRPOConfig(prompts_from="runs/x"), tmp_path).prompts_from == "runs/x"
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


def _resealed_copy(corpus: Path, out: Path, edit: str, change: Any) -> Path:
    """A copy of ``corpus`` with one file rewritten line by line by ``change`` and its manifest sealed again, as a
    rebuild that differs only there would write it."""
    import shutil

    from shoparena.seal import file_hashes, read_json, seal, write_json

    shutil.copytree(corpus, out)
    path = out / edit
    path.write_text("".join(change(line) for line in path.read_text().splitlines(keepends=True)))
    body = read_json(out / "manifest.json")
    body["files"] = file_hashes(out, exclude={"manifest.json"})
    write_json(out / "manifest.json", seal(body, "manifest_hash"))
    return out


def test_resume_keys_stages_on_the_training_files_not_the_provenance(train_world: TrainWorld, tmp_path: Path) -> None:
    """A corpus rebuilt from a store rerun with the same seed has byte-identical training files but other record ids
    in ``provenance.jsonl`` (so another manifest hash): ``--resume`` reuses the stage for it. One changed training row
    retrains it."""
    from shoparena.corpus import read_manifest
    from shoparena.corpus.export.manifest import training_hash

    recipe, text = load_recipe("tiny")
    recipe = recipe.model_copy(update={"sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1})})
    out = tmp_path / "run"
    first = run_recipe(recipe, train_world.corpus, out, stages=["sft"], recipe_text=text)

    def other_record(line: str) -> str:
        row = json.loads(line)  # the record id the row was exported from, as a rerun's clock readings change it
        prov = row.get("provenance")
        row["provenance"] = {**prov, "record_id": "f" * 64} if isinstance(prov, dict) else "f" * 64
        return json.dumps(row) + "\n"

    rerun = _resealed_copy(train_world.corpus, tmp_path / "rerun", "provenance.jsonl", other_record)
    was, now = read_manifest(train_world.corpus), read_manifest(rerun)  # both verify
    assert was["manifest_hash"] != now["manifest_hash"] and training_hash(was) == training_hash(now)
    same = run_recipe(recipe, rerun, out, stages=["sft"], resume=True, recipe_text=text)
    assert same.skipped == ["sft"] and same.checkpoints == first.checkpoints
    assert same.corpus_training_sha256 == training_hash(was)

    lines = (train_world.corpus / "sft_train.jsonl").read_text().splitlines(keepends=True)
    dropped = _resealed_copy(train_world.corpus, tmp_path / "dropped", "sft_train.jsonl",
                             lambda line: "" if line == lines[-1] else line)
    assert training_hash(read_manifest(dropped)) != training_hash(was)
    again = run_recipe(recipe, dropped, out, stages=["sft"], resume=True, recipe_text=text)
    assert again.skipped == [] and again.stages[0].resumed_from is None  # its checkpoints were for other rows


def test_a_run_keyed_on_the_corpus_manifest_is_still_resumed(train_world: TrainWorld, tmp_path: Path) -> None:
    """A stage finished when keys held the whole corpus manifest's hash is reused for that same corpus."""
    from shoparena.train.checkpoint import stage_key

    recipe, text = load_recipe("tiny")
    recipe = recipe.model_copy(update={"sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1})})
    out = tmp_path / "run"
    first = run_recipe(recipe, train_world.corpus, out, stages=["sft"], recipe_text=text)
    old = stage_key("sft", recipe.sft, first.base_sha256, first.corpus_manifest_sha256)
    stage = json.loads((out / "sft" / "stage.json").read_text())
    assert stage["key_sha256"] != old
    (out / "sft" / "stage.json").write_text(json.dumps({**stage, "key_sha256": old}))
    again = run_recipe(recipe, train_world.corpus, out, stages=["sft"], resume=True, recipe_text=text)
    assert again.skipped == ["sft"] and again.checkpoints == first.checkpoints


def test_resume_retrains_the_stages_that_play_episodes_on_another_catalog(train_world: TrainWorld,
                                                                         tmp_path: Path) -> None:
    """RS samples episodes over the catalog, so its key holds the catalog's content hash: a catalog with one
    product's title changed reruns RS and keeps stage 1, which reads the corpus only."""
    from shoparena.catalog.directory import create_catalog, index_path, iter_catalog_products
    from shoparena.catalog.index import SearchIndex

    recipe, text = load_recipe("tiny")
    recipe = recipe.model_copy(update={
        "sft": recipe.sft.model_copy(update={"max_steps": 2, "save_steps": 1}),
        "rs": recipe.rs.model_copy(update={"max_steps": 1, "max_problems": 1})})
    out = tmp_path / "run"
    first = run_recipe(recipe, train_world.corpus, out, stages=["sft", "rs"], catalog_dir=train_world.catalog,
                       recipe_text=text)
    same = run_recipe(recipe, train_world.corpus, out, stages=["sft", "rs"], catalog_dir=train_world.catalog,
                      resume=True, recipe_text=text)
    assert same.skipped == ["sft", "rs"]

    products = list(iter_catalog_products(train_world.catalog))
    products[-1] = products[-1].model_copy(update={"title": products[-1].title + " (renamed)"})
    other = tmp_path / "catalog"
    was = SearchIndex.open(index_path(train_world.catalog)).catalog_sha256
    assert create_catalog(products, other).catalog_sha256 != was
    again = run_recipe(recipe, train_world.corpus, out, stages=["sft", "rs"], catalog_dir=other, resume=True,
                       recipe_text=text)
    assert again.skipped == ["sft"] and again.stages[1].key_sha256 != first.stages[1].key_sha256
