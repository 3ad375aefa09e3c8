"""Recipes: a base model and the five stages' configs in one YAML file (built-ins in ``shoparena/train/recipes/``),
and :func:`run_recipe`, which chains the stages over a corpus (each stage's ``model/`` is the next one's input),
skips finished stages on ``resume`` (their ``stage.json`` present, their checkpoint hash still valid, their key
— config, input checkpoint and corpus — unchanged, and every stage before them skipped too; the first stage that
runs continues from its last checkpoint when that was started with the same key) and
writes ``out_dir/manifest.json`` atomically after every stage: corpus manifest hash, recipe text and hash,
package versions, seeds, each stage's result and checkpoint hash, wall time.

Every section is typed when the recipe loads (:func:`load_recipe`): a misspelt key or a value of the wrong type in any
stage is a :class:`~shoparena.errors.ConfigError` naming the stage and the key, with the keys the section accepts,
before any stage runs. The stages' trainers are imported only when a recipe runs them."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import platform
import time
import types
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shoparena.errors import ConfigError, DataError, NotFoundError, closest
from shoparena.train import BUILTIN_RECIPES
from shoparena.train.checkpoint import (
    checkpoint_sha256,
    load_stage,
    mark_stage_key,
    stage_key,
    stage_key_matches,
    weights_changed,
    write_stage,
)
from shoparena.train.clock import StageClock
from shoparena.train.grpo import GRPOConfig
from shoparena.train.kto import KTOConfig
from shoparena.train.rs import RSConfig
from shoparena.train.sft import SFTConfig
from shoparena.train.teacher import TeacherConfig
from shoparena.train.trainer import BarFactory, StageProgress, release_memory
from shoparena.train.types import StageResult

__all__ = ["BUILTIN_RECIPES", "RUN_DIR", "STAGES", "Recipe", "TrainManifest", "in_run", "load_recipe",
           "parse_recipe", "portable", "run_recipe"]

STAGES: dict[str, str] = {
    "sft": "shoparena.train.sft", "rs": "shoparena.train.rs", "teacher": "shoparena.train.teacher",
    "kto": "shoparena.train.kto", "grpo": "shoparena.train.grpo",
}
"""Stage name → the module of its trainer (the recipe's order), imported when the stage runs."""
MANIFEST = "manifest.json"
FORMAT = "shoparena-train/1"


class Recipe(BaseModel):
    """A training recipe. ``base``: ``tiny`` (the from-scratch tiny Qwen3, built from ``seed``), ``hf:DIR`` or a
    checkpoint directory (e.g. a prepared SmolLM2). Each stage section is that stage's typed config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    verified: str | None = None
    """Where the recipe has been run and how far (``None``: unverified)."""
    base: str = "tiny"
    seed: int = 0
    stages: tuple[str, ...] = ("sft", "rs", "teacher", "kto", "grpo")
    sft: SFTConfig = Field(default_factory=SFTConfig)
    rs: RSConfig = Field(default_factory=RSConfig)
    teacher: TeacherConfig = Field(default_factory=TeacherConfig)
    kto: KTOConfig = Field(default_factory=KTOConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)

    @field_validator("stages")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_stages(v)


def check_stages(names: Any) -> tuple[str, ...]:
    bad = [s for s in names if s not in STAGES]
    if bad:
        raise ValueError(f"unknown stage(s) {', '.join(bad)} (known: {', '.join(STAGES)})")
    return tuple(s for s in STAGES if s in names)


class TrainManifest(BaseModel):
    """``out_dir/manifest.json`` of a training run."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    recipe: str
    recipe_sha256: str
    recipe_text: str
    corpus: str
    corpus_manifest_sha256: str | None
    corpus_training_sha256: str | None = None
    """The corpus's :func:`~shoparena.corpus.export.manifest.training_hash`: what the stages' keys hold of it."""
    base: str
    base_sha256: str
    stages_requested: list[str]
    seeds: dict[str, int]
    versions: dict[str, str | None]
    stages: list[StageResult] = Field(default_factory=list)
    checkpoints: dict[str, str] = Field(default_factory=dict)
    skipped: list[str] = Field(default_factory=list)
    """Stages found complete on ``--resume`` and not rerun."""
    redone: list[str] = Field(default_factory=list)
    """Stages found complete on ``--resume`` whose weights under the run no longer matched their recorded hash,
    so they were trained again."""
    final_model: str | None = None
    complete: bool = False
    wall_s: float = 0.0
    """Wall seconds of the last process that ran ``train`` on this directory."""
    cpu_s: float | None = None
    """CPU seconds of the run's stages so far, summed over every process that worked on each (``stage_cpu_s`` of
    :mod:`shoparena.train.clock`); None while a stage finished before stages recorded it."""
    stages_wall_s: float | None = None
    """Wall seconds of the run's stages so far, summed over every process that worked on each (``stage_wall_s``):
    the run's elapsed time across interruptions, pauses between processes left out; None like :attr:`cpu_s`."""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (``X``, ``X | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        return next((m for a in get_args(annotation) if (m := _model_of(a)) is not None), None)
    return None


def _section(loc: tuple[Any, ...]) -> tuple[type[BaseModel], tuple[str, ...]]:
    """The model of the section an error's location points into, and that section's path (``("kto",)``)."""
    model: type[BaseModel] = Recipe
    path: tuple[str, ...] = ()
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = _model_of(field.annotation) if field is not None else None
        if inner is None:
            break
        model, path = inner, (*path, part)
    return model, path


def _accepts(model: type[BaseModel], path: tuple[str, ...]) -> str:
    where = ".".join(path) or "a recipe"
    return f"{where} accepts: {', '.join(model.model_fields)}"


def _type_of(field: Any) -> str:
    text = str(field.annotation).replace("typing.", "").replace("shoparena.", "")
    text = text.removeprefix("<class '").removesuffix("'>")
    default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        default = "{…}"
    return f"{text}" + ("" if field.is_required() else f", default {default!r}")


def _config_error(src: str, exc: ValidationError) -> ConfigError:
    """One line naming the section and the key of the first error; the hint lists what the section accepts."""
    errs = exc.errors(include_url=False)
    first = errs[0]
    loc = tuple(first["loc"])
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    model, path = _section(loc) if loc else (Recipe, ())
    section = ".".join(path) or "the recipe's top level"
    key = loc[len(path)] if len(loc) > len(path) else None
    if first["type"] == "extra_forbidden" and isinstance(key, str):
        near = closest(key, tuple(model.model_fields))
        return ConfigError(f"recipe {src}: unknown key {key!r} in {section}"
                           + (f" (did you mean {near!r}?)" if near else "") + more,
                           hint=_accepts(model, path))
    where = ".".join(str(p) for p in loc) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    shown = "" if isinstance(given, dict | list) or first["type"] == "missing" else f" (got {given!r:.60})"
    field = model.model_fields.get(key) if isinstance(key, str) else None
    inner = _model_of(field.annotation) if field is not None else None
    if inner is not None and isinstance(key, str):  # the whole section is wrong (not a mapping, or inconsistent)
        hint = _accepts(inner, (*path, key))
    else:
        hint = (f"{where} takes {_type_of(field)}; " if field is not None else "") + _accepts(model, path)
    return ConfigError(f"recipe {src}: {where}: {msg}{shown}{more}", hint=hint)


def _yaml_loader() -> Any:
    """PyYAML's safe loader that also reads ``1e-4`` as a number (YAML 1.2; YAML 1.1 wants ``1.0e-4``)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                                 re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
                                 list("-+0123456789"))
    return Loader


def parse_recipe(text: str, src: str = "<text>") -> Recipe:
    """A recipe from its YAML text, every section typed strictly (numbers are numbers, flags are booleans, no key
    the section does not know): a bad recipe is one :class:`ConfigError` naming the section and the key."""
    import json

    import yaml

    try:
        data = yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"recipe {src}: not valid YAML{where}: {getattr(exc, 'problem', exc)}",
                          hint="a recipe is a YAML mapping; " + _accepts(Recipe, ())) from None
    if not isinstance(data, dict):
        raise ConfigError(f"recipe {src}: expected a mapping of fields, got {type(data).__name__}",
                          hint=_accepts(Recipe, ()))
    try:  # through JSON: strict validation then takes YAML lists for tuples, as it would JSON arrays
        return Recipe.model_validate_json(json.dumps(data, default=str), strict=True)
    except ValidationError as exc:
        raise _config_error(src, exc) from None


def load_recipe(spec: str | os.PathLike[str]) -> tuple[Recipe, str]:
    """A built-in recipe by name or a YAML file: ``(recipe, its text)``. Bad YAML or fields → :class:`ConfigError`
    (exit 2) naming the first bad section and key (:func:`parse_recipe`); no such recipe → :class:`NotFoundError`."""
    name = str(spec)
    if name in BUILTIN_RECIPES:
        text = resources.files("shoparena.train").joinpath("recipes", f"{name}.yaml").read_text(encoding="utf-8")
    else:
        path = Path(name)
        if not path.is_file():
            raise NotFoundError(f"no recipe {name!r}: neither a built-in ({', '.join(BUILTIN_RECIPES)}) nor a file",
                                hint="the recipes of past experiments run by path: "
                                     "docs/experiments/recipes/<name>.yaml")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"recipe {name}: cannot be read ({exc})") from None
    return parse_recipe(text, name), text


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("shoparena", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def portable(manifest: TrainManifest, out: str | os.PathLike[str]) -> TrainManifest:
    """The manifest as ``out/manifest.json`` holds it: the paths inside the run (each stage's model, the final model)
    and the corpus relative to the run directory ``out``, so the run can be moved or copied (with its corpus beside
    it) and read from any working directory."""
    from shoparena.artefact import relative_to

    def rel(path: str | os.PathLike[str]) -> str:
        return relative_to(path, out)

    return manifest.model_copy(update={
        "corpus": rel(manifest.corpus),
        "stages": [s.model_copy(update={"model_dir": Path(rel(s.model_dir))}) for s in manifest.stages],
        "final_model": rel(manifest.final_model) if manifest.final_model else None})


def _write_manifest(out: Path, manifest: TrainManifest) -> None:
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(portable(manifest, out).model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out / MANIFEST)


def _stage_module(name: str) -> Any:
    try:
        return importlib.import_module(STAGES[name])
    except ModuleNotFoundError as exc:
        if exc.name == STAGES[name]:
            raise ConfigError(f"stage {name!r} is not available in this build ({STAGES[name]} is missing)",
                              hint="run the other stages with --stages sft,rs,teacher") from None
        raise


def _rows(corpus: Path, name: str) -> list[dict[str, Any]]:
    from shoparena.corpus.export.common import read_jsonl_rows

    path = corpus / f"{name}.jsonl"
    return read_jsonl_rows(path) if path.is_file() else []


def check_base(recipe: Recipe) -> Path | None:
    """The directory of ``recipe``'s base checkpoint (None for ``tiny``, built by the run): a
    :class:`~shoparena.errors.NotFoundError` when it holds no checkpoint, so a caller can refuse a recipe that
    cannot run before any other work."""
    if recipe.base == "tiny":
        return None
    path = Path(recipe.base.removeprefix("hf:")).expanduser()
    if not (path / "config.json").is_file():
        raise NotFoundError(f"recipe base {recipe.base!r}: no checkpoint there (config.json missing)",
                            hint="pass --base DIR, or make it: `shoparena models prepare smollm2-135m --out DIR` for "
                                 "the base, or the run whose stage this recipe continues (see its header)")
    return path


def _base_model(recipe: Recipe, out: Path) -> Path:
    path = check_base(recipe)
    if path is None:
        from shoparena.llm.tiny import build_tiny_qwen3

        dest = out / "base"
        if not (dest / "config.json").is_file():
            build_tiny_qwen3(dest, seed=recipe.seed)
        return dest
    return path


def _inherit_format(src: Path, dest: Path) -> None:
    """A stage that does not choose its own observation rendering (KTO, GRPO) serves the one it was trained on:
    the input checkpoint's ``shoparena_format.json`` is copied into its output when the output has none."""
    import shutil

    from shoparena.llm.compact import FORMAT_FILE

    if (src / FORMAT_FILE).is_file() and not (dest / FORMAT_FILE).exists() and dest.is_dir():
        shutil.copyfile(src / FORMAT_FILE, dest / FORMAT_FILE)


def _run_total(stages: Sequence[StageResult], key: str) -> float | None:
    """The sum of one clock figure (``stage_cpu_s`` or ``stage_wall_s``) over ``stages``; None if one lacks it."""
    spent = [r.metrics.get(key) for r in stages]
    if not spent or any(not isinstance(c, (int, float)) for c in spent):
        return None
    return round(sum(spent), 3)


def run_recipe(recipe: Recipe, corpus_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
               stages: list[str] | tuple[str, ...] | None = None, resume: bool = False,
               catalog_dir: str | os.PathLike[str] | None = None, recipe_text: str | None = None,
               progress: bool | BarFactory = False,
               on_stage: Callable[[StageResult, bool], None] | None = None) -> TrainManifest:
    """Run ``stages`` (default: the recipe's) of ``recipe`` over the corpus in ``corpus_dir`` into ``out_dir``.
    ``progress``: a bar per phase of each stage, drawn by ``bar(description, total)`` (``True``: rich bars on
    stderr); ``on_stage(result, skipped)`` is called as each stage finishes (or is found finished on ``resume``)."""
    from shoparena.corpus.export.manifest import read_manifest, training_hash
    from shoparena.train.harness import problems_of_rows

    t0 = time.perf_counter()
    bars = _bars(progress)
    try:
        chosen = check_stages(stages if stages is not None else recipe.stages)
    except ValueError as exc:
        raise ConfigError(str(exc), hint=f"the stages are {', '.join(STAGES)}") from None
    if not chosen:  # a run that trains nothing would still name a "final model"
        raise ConfigError("no stage to run", hint=f"name at least one of {', '.join(STAGES)}")
    for name in chosen:
        _stage_module(name)  # fail before any work when a stage's module is missing
    corpus = Path(corpus_dir)
    if not corpus.is_dir():
        raise NotFoundError(f"no corpus directory {corpus}", hint="build one with `shoparena corpus build`")
    corpus_manifest = read_manifest(corpus)
    needs_catalog = [s for s in chosen if s in ("rs", "teacher", "grpo")]
    if needs_catalog and catalog_dir is None:
        raise ConfigError(f"stages {', '.join(needs_catalog)} run the harness and need the catalog",
                          hint="pass --catalog DIR (the catalog the corpus was built from)")
    if needs_catalog:
        from shoparena.catalog import index_path

        index_path(catalog_dir)  # a catalog without its search index fails here, before any work
    # the train problems stages 2-3 sample: an unreadable one, or none at all, fails before any work
    problems = problems_of_rows(_rows(corpus, "grpo_train")) if {"rs", "teacher"} & set(chosen) else []
    if "teacher" in chosen and recipe.teacher.bank_problems > 0:
        from shoparena.train.teacher import find_banks

        find_banks(recipe.teacher, corpus)  # no reachable bank fails here, not after stages 1-2 have trained
    if {"rs", "teacher"} & set(chosen) and not problems:
        raise DataError("no train problems to sample (the corpus's grpo_train.jsonl holds none)",
                        hint="build the corpus with --banks DIR or --problems FILE: the store's records hold no "
                             "ground truth")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = recipe_text if recipe_text is not None else recipe.model_dump_json()
    model = _base_model(recipe, out)
    manifest = TrainManifest(
        recipe=recipe.name, recipe_sha256=hashlib.sha256(text.encode()).hexdigest(), recipe_text=text,
        corpus=str(corpus), corpus_manifest_sha256=corpus_manifest.get("manifest_hash"),
        corpus_training_sha256=training_hash(corpus_manifest), base=recipe.base,
        base_sha256=checkpoint_sha256(model), stages_requested=list(chosen),
        seeds={"recipe": recipe.seed, **{s: getattr(recipe, s).seed for s in chosen}},
        versions=_versions(),
    )
    _write_manifest(out, manifest)
    # the held-out loss the SFT-family stages log comes from the validation partition when the corpus has one
    # (carved from train's leak clusters, docs/corpus-design.md), so eval stays untouched until the final report
    sft_rows = _rows(corpus, "sft_train")
    eval_rows = _rows(corpus, "sft_validation") or _rows(corpus, "sft_eval")
    chain_intact = resume  # a stage is skipped only while every stage before it was too (same input)
    input_sha = manifest.base_sha256
    for name in chosen:
        sdir = out / name
        key = stage_key(name, getattr(recipe, name), input_sha, _corpus_key(name, recipe, corpus, catalog_dir, manifest))
        # a stage finished before keys held the training files' hash carries its corpus manifest hash instead
        legacy = stage_key(name, getattr(recipe, name), input_sha, manifest.corpus_manifest_sha256)
        done = (load_stage(sdir, key) or load_stage(sdir, legacy)) if chain_intact else None
        if done is None and chain_intact and weights_changed(sdir):
            manifest.redone.append(name)
        if done is not None:
            result = done
            manifest.skipped.append(name)
        else:
            mod = _stage_module(name)
            # an interrupted stage continues from its checkpoints only when they were made from the same config,
            # input and corpus; otherwise (and without --resume) they are removed and the stage starts afresh
            own = chain_intact and (stage_key_matches(sdir, key) or stage_key_matches(sdir, legacy))
            if not own and (sdir / "checkpoints").is_dir():
                import shutil

                shutil.rmtree(sdir / "checkpoints")
            mark_stage_key(sdir, key)
            chain_intact = False
            with StageClock(sdir, resume=own) as clock, StageProgress(name, bars) as bar:
                kw: dict[str, Any] = {"resume": own, "progress": bar if bars is not None else None}
                if name == "sft":
                    result = mod.train_sft(model, sft_rows, eval_rows, recipe.sft, sdir, **kw)
                elif name == "rs":
                    result = mod.train_rs(model, problems, sft_rows, eval_rows, recipe.rs, sdir,
                                          catalog_dir=catalog_dir, **kw)
                elif name == "teacher":
                    result = mod.train_teacher(model, problems, eval_rows, recipe.teacher, sdir,
                                               catalog_dir=catalog_dir, corpus_dir=corpus, **kw)
                elif name == "kto":
                    result = mod.train_kto(model, _rows(corpus, "kto_train"), recipe.kto, sdir, **kw)
                else:
                    result = mod.train_grpo(model, _rows(corpus, "grpo_train"), in_run(recipe.grpo, out), sdir,
                                            catalog_dir=catalog_dir, **kw)
        if done is None:
            _inherit_format(model, Path(result.model_dir))
            spent = clock.totals()  # the whole stage (sampling included), over every process that worked on it
            released = release_memory()  # the next stage starts from what this one freed, not on top of it
            # memory: this process's resident set when the stage began (what earlier stages left), the stage's peak,
            # and what stays resident once the stage's freed memory is handed back (None where not measurable)
            metrics = {**result.metrics, "stage_cpu_s": spent["cpu_s"], "stage_wall_s": spent["wall_s"],
                       "stage_processes": spent["processes"], "stage_rss_start_mib": spent["rss_start_mib"],
                       "stage_peak_rss_mib": spent["peak_rss_mib"],
                       "stage_rss_after_mib": released[1] if released is not None else None}
            result = write_stage(sdir, result.model_copy(update={"key_sha256": key, "metrics": metrics}))
        input_sha = result.checkpoint_sha256
        manifest.stages.append(result)
        manifest.checkpoints[name] = result.checkpoint_sha256
        model = Path(result.model_dir)
        manifest.final_model = str(model)
        manifest.wall_s = round(time.perf_counter() - t0, 3)
        manifest.cpu_s = _run_total(manifest.stages, "stage_cpu_s")
        manifest.stages_wall_s = _run_total(manifest.stages, "stage_wall_s")
        _write_manifest(out, manifest)
        if on_stage is not None:
            on_stage(result, done is not None)
    manifest.complete = True
    manifest.wall_s = round(time.perf_counter() - t0, 3)
    _write_manifest(out, manifest)
    return manifest


def _corpus_key(name: str, recipe: Recipe, corpus: Path, catalog_dir: str | os.PathLike[str] | None,
                manifest: TrainManifest) -> str | None:
    """What a stage's key holds of its data: the hash of the corpus's training files and split (so a corpus rebuilt
    from a store rerun with the same seed, whose training files are byte-identical, reuses the stage); for a stage
    that plays episodes (RS, teacher, GRPO), the catalog's content hash its search index records; for a teacher
    stage that draws fresh bank problems, the sealed hash of the bank it draws them from."""
    corpus_sha = manifest.corpus_training_sha256 or manifest.corpus_manifest_sha256
    if name not in ("rs", "teacher", "grpo"):
        return corpus_sha
    from shoparena.catalog import index_path
    from shoparena.seal import read_json

    parts = [str(corpus_sha)]
    if catalog_dir is not None:
        meta = read_json(index_path(catalog_dir) / "meta.json", what="the catalog's index metadata",
                         hint="rebuild the catalog with `shoparena catalog generate` or `catalog import`")
        parts.append(f"catalog:{meta.get('catalog_sha256') if isinstance(meta, dict) else None}")
    if name == "teacher" and recipe.teacher.bank_problems > 0:
        from shoparena.train.teacher import find_banks

        bank = read_json(find_banks(recipe.teacher, corpus) / "manifest.json", what="the bank manifest",
                         hint="build the bank with `shoparena arena banks build`")
        parts.append(f"bank:{bank.get('manifest_sha256') if isinstance(bank, dict) else None}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


RUN_DIR = "{out}"
"""Stands for the recipe run's output directory in a stage's path settings (``grpo.prompts_from:
"{out}/rs/samples"``: stage 2's sampling of stage 1 in the same run); the stage key keeps the placeholder, so the
same recipe keys the same wherever it runs."""


def in_run(config: GRPOConfig, out: Path) -> GRPOConfig:
    """Stage 5's settings with :data:`RUN_DIR` in ``prompts_from`` replaced by the run's output directory."""
    value = config.prompts_from
    if value is not None and RUN_DIR in value:
        return config.model_copy(update={"prompts_from": value.replace(RUN_DIR, str(out))})
    return config


def _bars(progress: bool | BarFactory) -> BarFactory | None:
    if callable(progress):
        return progress
    if not progress:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)

    @contextlib.contextmanager
    def bar(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True, disable=not console.is_terminal) as prog:
            task = prog.add_task(description, total=total)
            yield lambda n=1: prog.advance(task, n)

    return bar
