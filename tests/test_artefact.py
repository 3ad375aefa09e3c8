"""Every artefact directory says what it is, and no command writes into one it does not own.

Through the CLI: ``train`` / ``corpus build`` / ``evaluate`` / ``run`` refuse (exit 2, ``error:`` + ``hint:``) an
``--out`` that is another command's artefact, one made with other settings, a non-empty foreign directory, or one of
their own inputs, and leave the victim byte-identical; ``--force`` replaces an artefact of the same kind; a failed
run leaves no directory behind; an evaluation copied elsewhere is resumed from another working directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shoparena.artefact import claim_out, identify, relative_to, resolve_input
from shoparena.errors import ConfigError
from tests.worlds import small_world


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from shoparena.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _refused(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and any(line.strip().startswith("hint: ") for line in lines), err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("artefact-world")
    catalog, _, problems_file = small_world(root, size=300, catalog_seed=3, n=2, problem_seed=5)
    return catalog, problems_file


@pytest.fixture(scope="module")
def evaluation(world: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real evaluation: policy:expert and policy:careful on two problems, one sample each."""
    from shoparena.cli import main

    catalog, problems = world
    out = tmp_path_factory.mktemp("eval") / "ev"
    main(["evaluate", "--model", "a=policy:expert,b=policy:careful", "--catalog", str(catalog), "--problems",
          str(problems), "-n", "1", "--concurrency", "1", "--out", str(out), "--json"])
    assert (out / "evaluation.json").is_file()
    return out


def _corpus(root: Path) -> Path:
    """A corpus directory as `corpus build` seals it (its real manifest writer, over one export file)."""
    from shoparena.corpus.export import write_manifest

    root.mkdir(parents=True)
    (root / "sft_train.jsonl").write_text('{"messages": []}\n', encoding="utf-8")
    write_manifest(root, sources={"kind": "store"}, filter_config={"seed": 0})
    return root


def _train_run(root: Path) -> Path:
    """A training run's directory as `train` writes it first (its manifest, before any stage)."""
    from shoparena.train.recipe import TrainManifest, _write_manifest

    root.mkdir(parents=True)
    _write_manifest(root, TrainManifest(recipe="tiny", recipe_sha256="ab" * 32, recipe_text="name: tiny\n",
                                        corpus=str(root.parent / "corpus"), corpus_manifest_sha256=None, base="tiny",
                                        base_sha256="cd" * 32, stages_requested=["sft"], seeds={"recipe": 0},
                                        versions={}))
    return root


def test_identify_reads_each_kind_from_its_manifest(tmp_path: Path, evaluation: Path) -> None:
    assert identify(_corpus(tmp_path / "c")).kind == "corpus"  # type: ignore[union-attr]
    assert identify(_train_run(tmp_path / "t")).kind == "train"  # type: ignore[union-attr]
    assert identify(evaluation).kind == "evaluation"  # type: ignore[union-attr]
    run = evaluation / "models" / "a"
    assert identify(run).kind == "harness-run"  # type: ignore[union-attr]
    assert json.loads((run / "summary.json").read_text())["kind"] == "harness-run"  # the summary says what it is
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "reproduce.json").write_text('{"format": "shoparena-reproduce/1"}')
    assert identify(tmp_path / "r").kind == "reproduction"  # type: ignore[union-attr]
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "manifest.json").write_text('{"format": "someone-else/1"}')
    assert identify(tmp_path / "f") is None and identify(tmp_path / "missing") is None


def test_train_refuses_a_corpus_an_evaluation_and_its_own_input(tmp_path: Path, evaluation: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    corpus, other = _corpus(tmp_path / "corpus"), _corpus(tmp_path / "other")
    before = {d: _snapshot(d) for d in (corpus, other, evaluation)}
    code, err = _cli(capsys, "train", "tiny", "--corpus", str(corpus), "--out", str(other), "--stages", "sft")
    _refused(code, err, "holds a corpus", "another --out")
    code, err = _cli(capsys, "train", "tiny", "--corpus", str(corpus), "--out", str(evaluation), "--stages", "sft")
    _refused(code, err, "holds an evaluation", "`shoparena evaluate`")
    code, err = _cli(capsys, "train", "tiny", "--corpus", str(corpus), "--out", str(corpus), "--stages", "sft")
    _refused(code, err, "is the input --corpus")
    code, err = _cli(capsys, "train", "tiny", "--corpus", str(corpus), "--out", str(corpus / "run"), "--stages",
                     "sft")
    _refused(code, err, "lies inside the input --corpus")
    assert {d: _snapshot(d) for d in before} == before and not (corpus / "run").exists()


def test_train_refuses_a_run_of_another_recipe_without_resume(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    corpus, run = _corpus(tmp_path / "corpus"), _train_run(tmp_path / "run")
    before = _snapshot(run)
    code, err = _cli(capsys, "train", "tiny", "--corpus", str(corpus), "--out", str(run), "--stages", "sft")
    _refused(code, err, "made with other settings", "recipe", "--resume", "--force")
    assert _snapshot(run) == before


def test_corpus_build_refuses_a_training_run_and_a_foreign_directory(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from shoparena.store import open_store

    with open_store(f"sqlite:///{tmp_path / 's.db'}"):
        pass
    run = _train_run(tmp_path / "run")
    before = _snapshot(run)
    code, err = _cli(capsys, "corpus", "build", "--from", f"sqlite:///{tmp_path / 's.db'}", "--out", str(run))
    _refused(code, err, "holds a training run", "`shoparena train`")
    assert _snapshot(run) == before
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine\n")
    code, err = _cli(capsys, "corpus", "build", "--from", f"sqlite:///{tmp_path / 's.db'}", "--out", str(mine))
    _refused(code, err, "not empty", "holds no corpus")
    assert _snapshot(mine) == {"todo.txt": b"mine\n"}
    code, err = _cli(capsys, "corpus", "build", "--from", f"sqlite:///{tmp_path / 's.db'}", "--out", str(tmp_path))
    _refused(code, err, "contains the input --from")


def test_evaluate_refuses_other_settings_and_force_replaces(world: tuple[Path, Path], evaluation: Path,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems = world
    ev = tmp_path / "ev"
    shutil.copytree(evaluation, ev)
    before = _snapshot(ev)
    args = ["evaluate", "--catalog", str(catalog), "--problems", str(problems), "-n", "1", "--concurrency", "1",
            "--out", str(ev)]
    code, err = _cli(capsys, *args, "--model", "c=policy:expert")
    _refused(code, err, "made with other settings", "models", "--force")
    code, err = _cli(capsys, *args, "--model", "a=policy:expert,b=policy:careful", "--seed", "3", "--resume")
    _refused(code, err, "seed")
    assert _snapshot(ev) == before
    code, err = _cli(capsys, *args, "--model", "c=policy:expert", "--force", "--json")
    assert code == 0, err
    body = json.loads((ev / "evaluation.json").read_text())
    assert list(body["models"]) == ["c"] and sorted(p.name for p in (ev / "models").iterdir()) == ["c"]


def test_evaluate_refuses_its_inputs_and_a_failed_run_leaves_no_directory(
        world: tuple[Path, Path], evaluation: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems = world
    before = _snapshot(catalog)
    base = ["evaluate", "--model", "policy:expert", "--catalog", str(catalog), "--problems", str(problems), "-n", "1"]
    for out, words in ((catalog, "is the input --catalog"), (catalog / "ev", "lies inside the input --catalog"),
                       (tmp_path / "x", None)):
        extra = ["--reuse", str(tmp_path / "x")] if words is None else []
        if words is None:
            shutil.copytree(evaluation, tmp_path / "x")
        code, err = _cli(capsys, *base, *extra, "--out", str(out))
        _refused(code, err, words or "is the input --reuse")
    assert _snapshot(catalog) == before
    fresh = tmp_path / "new" / "ev"
    code, err = _cli(capsys, "evaluate", "--model", f"hf:{tmp_path / 'no-model'}", "--catalog", str(catalog),
                     "--problems", str(problems), "-n", "1", "--out", str(fresh))
    assert code == 4, err
    assert not (tmp_path / "new").exists()  # nor the parent --out created
    code, err = _cli(capsys, "evaluate", "--model", "policy:expert", "--catalog", str(tmp_path / "no-catalog"),
                     "--problems", str(problems), "-n", "1", "--out", str(fresh))  # fails after its first log line
    assert code == 4, err
    assert not (tmp_path / "new").exists()
    code, err = _cli(capsys, "run", "--model", f"hf:{tmp_path / 'no-model'}", "--catalog", str(catalog),
                     "--problems", str(problems), "--agent", "react", "--out", str(fresh))  # after its episode header
    assert code == 4, err
    assert not (tmp_path / "new").exists()


def test_run_refuses_other_settings_and_foreign_directories(world: tuple[Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems = world
    out = tmp_path / "run"
    args = ["run", "--catalog", str(catalog), "--problems", str(problems), "--agent", "react", "--json", "--out",
            str(out)]
    assert _cli(capsys, *args)[0] == 0
    before = _snapshot(out)
    code, err = _cli(capsys, *args, "--seed", "9")
    _refused(code, err, "made with other settings", "seed")
    assert _snapshot(out) == before
    assert _cli(capsys, *args, "--seed", "9", "--force")[0] == 0
    assert json.loads((out / "summary.json").read_text())["config"]["seed"] == 9
    corpus = _corpus(tmp_path / "corpus")
    corpus_before = _snapshot(corpus)
    code, err = _cli(capsys, *args[:-1], str(corpus))
    _refused(code, err, "holds a corpus")
    assert _snapshot(corpus) == corpus_before


def test_claim_out_force_never_removes_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(ConfigError, match="holds no evaluation"):
        claim_out(tmp_path, "evaluation", differs=lambda found: ["everything"], force=True)
    assert (tmp_path / "mine.txt").read_text() == "x"


def test_a_copied_evaluation_resumes_from_another_working_directory(
        world: tuple[Path, Path], evaluation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems = world
    copy = tmp_path / "moved" / "ev"
    shutil.copytree(evaluation, copy)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, err = _cli(capsys, "evaluate", "--model", "a=policy:expert,b=policy:careful", "--catalog", str(catalog),
                     "--problems", str(problems), "-n", "1", "--concurrency", "1", "--out", "../moved/ev",
                     "--resume", "--report", "--json")
    assert code == 0, err
    log = (copy / "evaluate.log").read_text()
    assert "a: kept the finished run" in log and "b: kept the finished run" in log
    assert json.loads((copy / "evaluation.json").read_text())["models"] == \
        json.loads((evaluation / "evaluation.json").read_text())["models"]


def test_recorded_paths_are_relative_to_the_artefact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "arena" / "banks").mkdir(parents=True)
    (tmp_path / "corpus").mkdir()
    monkeypatch.chdir(tmp_path)
    rel = relative_to(Path("arena/banks"), Path("corpus"))
    assert rel == "../arena/banks"
    moved = tmp_path / "far" / "tree"
    shutil.copytree(tmp_path / "arena", moved / "arena")
    shutil.copytree(tmp_path / "corpus", moved / "corpus")
    monkeypatch.chdir(tmp_path / "far")
    assert resolve_input(rel, moved / "corpus").resolve() == (moved / "arena" / "banks").resolve()
    # an older corpus recorded the path as given on its command line (relative to where it was built)
    monkeypatch.chdir(tmp_path)
    assert resolve_input("arena/banks", Path("corpus")) == Path("arena/banks")


def test_reproduce_refuses_another_commands_artefact_the_same_way(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _corpus(tmp_path / "corpus")
    before = _snapshot(corpus)
    code, err = _cli(capsys, "reproduce", "table1", "--profile", "smoke", "--out", str(corpus))
    _refused(code, err, "holds a corpus", "`shoparena corpus build`", "not a reproduction")
    assert _snapshot(corpus) == before


def test_loop_refuses_another_commands_artefact_a_foreign_directory_and_other_settings(
        tmp_path: Path, evaluation: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before the loop's first simulated day: nothing is written into the victim."""
    args = ["loop", "--sandbox", "process", "--days", "1", "--out"]
    for victim, words in ((_corpus(tmp_path / "corpus"), ("holds a corpus",)),
                          (evaluation, ("holds an evaluation",))):
        before = _snapshot(victim)
        code, err = _cli(capsys, *args, str(victim))
        _refused(code, err, *words)
        assert _snapshot(victim) == before
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    _refused(*_cli(capsys, *args, str(foreign)), "not empty")
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    done = tmp_path / "loop"
    done.mkdir()
    body = {"format": "shoparena-loop/1", "config": {"out": str(done), "days": 2, "seed": 0}}
    (done / "loop.json").write_text(json.dumps(body))
    _refused(*_cli(capsys, *args, str(done)), "other settings", "days")
    assert json.loads((done / "loop.json").read_text()) == body


def test_no_command_writes_inside_another_artefact_or_over_its_input(world: tuple[Path, Path], evaluation: Path,
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    catalog, problems = world
    corpus = _corpus(tmp_path / "corpus")
    before = {"eval": _snapshot(evaluation), "catalog": _snapshot(catalog), "corpus": _snapshot(corpus)}
    refusals = [
        (["evaluate", "--model", "policy:expert", "--catalog", str(catalog), "--problems", str(problems),
          "--out", str(evaluation / "inner")], "lies inside an evaluation"),
        (["problems", "generate", "--catalog", str(catalog), "--out", str(catalog / "documents.jsonl.gz")],
         "lies inside the input --catalog"),
        (["problems", "generate", "--catalog", str(catalog), "--out", str(catalog / "index" / "x.jsonl")],
         "lies inside the input --catalog"),
        (["problems", "generate", "--catalog", str(catalog), "--out", str(evaluation / "evaluation.json")],
         "lies inside an evaluation"),
        (["catalog", "generate", "--size", "200", "--out", str(evaluation)], "holds an evaluation"),
        (["catalog", "generate", "--size", "200", "--out", str(catalog)], "holds a catalog already"),
        (["catalog", "import", str(tmp_path / "docs.jsonl"), "--out", str(corpus)], "holds a corpus"),
        (["arena", "banks", "build", "--problems", str(problems), "--out", str(corpus)], "holds a corpus"),
        (["arena", "simulate", "--days", "1", "--out", str(evaluation)], "holds an evaluation"),
        (["demo", "--out", str(corpus)], "holds a corpus"),
    ]
    (tmp_path / "docs.jsonl").write_text("")
    for args, words in refusals:
        _refused(*_cli(capsys, *args), words)
    assert before == {"eval": _snapshot(evaluation), "catalog": _snapshot(catalog), "corpus": _snapshot(corpus)}


def test_a_kept_arena_simulation_is_not_continued_or_overwritten(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    arena = tmp_path / "arena"  # as `arena simulate --out` leaves it (arena.json is written last)
    (arena / "catalog").mkdir(parents=True)
    (arena / "subnet.db").write_bytes(b"records")
    assert identify(arena).kind == "arena"  # type: ignore[union-attr]
    _refused(*_cli(capsys, "arena", "simulate", "--days", "1", "--out", str(arena)), "holds an arena simulation",
             "--force")
    assert (arena / "subnet.db").read_bytes() == b"records"  # a second run would have mixed its records in


def test_banks_and_catalogs_are_replaced_only_with_force(world: tuple[Path, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, problems = world
    banks = tmp_path / "banks"
    assert _cli(capsys, "arena", "banks", "build", "--problems", str(problems), "--out", str(banks))[0] == 0
    first = _snapshot(banks)
    _refused(*_cli(capsys, "arena", "banks", "build", "--problems", str(problems), "--out", str(banks),
                   "--seed", "1"), "holds a bank set already")
    assert _snapshot(banks) == first
    assert _cli(capsys, "arena", "banks", "build", "--problems", str(problems), "--out", str(banks), "--seed", "1",
                "--force")[0] == 0
    cat = tmp_path / "cat"
    assert _cli(capsys, "catalog", "generate", "--size", "200", "--out", str(cat))[0] == 0
    assert _cli(capsys, "catalog", "generate", "--size", "200", "--seed", "2", "--out", str(cat), "--force")[0] == 0
    assert identify(cat).kind == "catalog"  # type: ignore[union-attr]


def test_an_earlier_demo_is_replaced_and_anything_else_kept(tmp_path: Path) -> None:
    from shoparena.artefact import claim_file, claim_new

    demo = tmp_path / "demo-out"
    (demo / "arena").mkdir(parents=True)
    (demo / "demo.log").write_text("an earlier demo")
    (demo / "arena" / "subnet.db").write_bytes(b"x")
    (demo / "corpus").mkdir()
    assert identify(demo).kind == "demo"  # type: ignore[union-attr]  # not a loop, though it holds both
    (demo / "loop.json").write_text('{"format": "shoparena-loop/1"}')  # the demo's own loop writes one at its root
    assert identify(demo).kind == "demo"  # type: ignore[union-attr]  # a demo from before demo.json
    (demo / "demo.json").write_text('{"format": "shoparena-demo/1"}')
    assert identify(demo).kind == "demo"  # type: ignore[union-attr]
    assert claim_new(demo, "demo", replace_own=True) is None and not demo.exists()
    work = tmp_path / "work"  # a user's working directory: an arena and a corpus made side by side
    (work / "arena").mkdir(parents=True)
    (work / "arena" / "subnet.db").write_bytes(b"x")
    (work / "corpus").mkdir()
    assert claim_out(work / "eval", "evaluation") is None  # not taken for an interrupted loop run around it
    (work / "train.log").write_text("a redirected log")  # and a prepared base/, as a working directory holds them
    (work / "base").mkdir()
    (work / "base" / "config.json").write_text("{}")
    assert claim_out(work / "eval", "evaluation") is None
    assert identify(work).kind == "train"  # type: ignore[union-attr]  # as an --out, it is still refused
    with pytest.raises(ConfigError, match="lies inside"):
        claim_file(_corpus(tmp_path / "c") / "extra.jsonl")
    with pytest.raises(ConfigError, match="is a directory"):
        claim_file(tmp_path)
    assert claim_file(tmp_path / "free.jsonl") == tmp_path / "free.jsonl"
    model = tmp_path / "model"  # a prepared model: what `models prepare` writes, its prepare.json first of all
    model.mkdir()
    (model / "prepare.json").write_text(json.dumps({"model": "smollm2-135m", "source": {}, "files": {}}))
    assert identify(model).kind == "model"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="lies inside a prepared model"):
        claim_out(model / "eval", "evaluation")
