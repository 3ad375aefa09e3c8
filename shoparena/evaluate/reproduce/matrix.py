"""The reproduction matrix: per profile, how the table is made and the figures it is expected to show.

Kept the way Pyserini keeps its reproduction matrices: one versioned file in the package
(``shoparena/evaluate/reproduce/table1.yaml``) names, per profile, the pipeline's settings (arena, corpus, base
model, recipe, evaluation protocol), the command that reproduces it, and its conditions — a model (by role: ``base``,
``stage1``, ``chain``, ``expert``, or a stage name) on a partition (``eval`` / ``never_touch``), a figure (``asr``,
``pass@4``, ``by_bucket.product``, …), the expected value and the interval a reproduction must land in.
:func:`check_results` compares a finished run's ``results.json`` with it (``docs/reproduce.md``).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shoparena.errors import ConfigError, DataError

__all__ = [
    "MATRIX_FORMAT", "ROLES", "ArenaSettings", "Condition", "CorpusSettings", "Deviation", "EvalSettings", "Matrix",
    "Profile", "check_results", "figure_value", "get_profile", "load_matrix",
]

MATRIX_FORMAT = "shoparena-reproduce-matrix/1"
ROLES: tuple[str, ...] = ("base", "stage1", "chain", "expert")
"""The models every profile evaluates: the untrained base, the recipe's first stage, its last (the chain's output)
and the teacher (``policy:expert``). ``--all-stages`` adds every other stage under its own name."""
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ArenaSettings(BaseModel):
    """The simulated subnet that makes the corpus (:class:`shoparena.arena.simulate.SimulationConfig`'s sizes)."""

    model_config = _FROZEN

    miners: int = Field(12, ge=1)
    validators: int = Field(3, ge=1)
    days: int = Field(2, ge=1)
    catalog_size: int = Field(3000, ge=200)
    problems: int = Field(450, ge=10)
    qualifying_problems: int = Field(50, ge=1)
    race_problems: int = Field(50, ge=1)
    sandbox: str = "bubblewrap"


class CorpusSettings(BaseModel):
    """The corpus build's choices that differ between profiles (everything else: ``shoparena corpus build``'s
    defaults)."""

    model_config = _FROZEN

    require_success: bool = False


class EvalSettings(BaseModel):
    """The evaluation protocol: a seeded per-bucket subset of each held-out partition, samples, temperature,
    the per-episode limit, and how trained checkpoints are served."""

    model_config = _FROZEN

    per_bucket: int | None = Field(8, ge=1)
    """Problems per bucket drawn from each partition (seeded by ``--seed``; None: the whole partition)."""
    samples: int = Field(4, ge=1)
    temperature: float = Field(0.7, ge=0.0)
    timeout_s: float = Field(60.0, gt=0)
    serve: Literal["hf", "llamacpp"] = "llamacpp"
    query: str = ""
    """Appended to every served checkpoint's URI (``?dtype=Q8_0&slots=2&threads=1`` for llama.cpp)."""
    concurrency: int | None = Field(None, ge=1)
    n_resamples: int = Field(10000, ge=100)
    partitions: tuple[Literal["eval", "never_touch"], ...] = ("eval", "never_touch")


class Condition(BaseModel):
    """One expected figure: ``model`` on ``partition``, its ``figure``, the ``expected`` value and the
    ``interval`` (inclusive) a reproduction must land in."""

    model_config = _FROZEN

    model: str
    partition: Literal["eval", "never_touch"]
    figure: str = "asr"
    expected: float
    interval: tuple[float, float]
    note: str = ""

    @model_validator(mode="after")
    def _inside(self) -> Condition:
        lo, hi = self.interval
        if not lo <= self.expected <= hi:
            raise ValueError(f"expected {self.expected} lies outside its interval [{lo}, {hi}]")
        return self

    @property
    def name(self) -> str:
        return f"{self.model} × {self.partition}: {self.figure}"


class Profile(BaseModel):
    """One way to make the table: its pipeline settings, expected time and expected figures."""

    model_config = _FROZEN

    description: str
    recipe: str
    """A built-in training recipe (``shoparena train --help`` lists them)."""
    base: str = "tiny"
    """``tiny`` (the from-scratch tiny Qwen3, built from the recipe's seed) or a model of ``shoparena models
    list`` that ``shoparena models prepare`` de-quantises (``smollm2-135m``)."""
    device: Literal["cpu", "cuda"] = "cpu"
    expected_minutes: float = Field(gt=0)
    """Wall time the whole profile took where it was measured (printed before a run starts)."""
    command: str
    arena: ArenaSettings = Field(default_factory=ArenaSettings)
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    evaluation: EvalSettings = Field(default_factory=EvalSettings)
    source: str = ""
    """Where the expected figures come from (a run of this profile, or the published table they reproduce)."""
    conditions: list[Condition] = Field(default_factory=list)

    def settings(self) -> dict[str, Any]:
        """What decides the run's artefacts (a resumed run must match them): not the expectations."""
        return self.model_dump(mode="json", include={"recipe", "base", "device", "arena", "corpus", "evaluation"})


class Matrix(BaseModel):
    model_config = _FROZEN

    format: Literal["shoparena-reproduce-matrix/1"]
    table: str
    version: int = Field(ge=1)
    """Bumped whenever a profile's settings or expected figures change."""
    profiles: dict[str, Profile]


def load_matrix(path: str | os.PathLike[str] | None = None, *, table: str = "table1") -> Matrix:
    """The matrix shipped in the package (``<table>.yaml`` beside this module) or the one at ``path``; a file
    that is not a valid matrix is a :class:`DataError` naming the first bad field."""
    import yaml

    if path is None:
        text = resources.files("shoparena.evaluate.reproduce").joinpath(f"{table}.yaml").read_text(encoding="utf-8")
        where = f"{table}.yaml"
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    try:
        data = yaml.safe_load(text)
        return Matrix.model_validate(data)
    except yaml.YAMLError as exc:
        raise DataError(f"reproduction matrix {where}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"reproduction matrix {where}: {loc}: {first['msg']}") from None


def get_profile(matrix: Matrix, name: str) -> Profile:
    if name not in matrix.profiles:
        raise ConfigError(f"no profile {name!r} in the {matrix.table} matrix",
                          hint=f"profiles: {', '.join(matrix.profiles)}")
    return matrix.profiles[name]


class Deviation(BaseModel):
    """One condition's outcome: the measured figure (None: missing from the results) and whether it is inside."""

    model_config = _FROZEN

    condition: Condition
    measured: float | None
    inside: bool
    reason: str = ""


def figure_value(results: dict[str, Any], model: str, partition: str, figure: str) -> float | None:
    """A figure of ``results.json``: ``model`` is a role (``stage1``, ``chain``, …) or a model label; ``figure`` is
    ``asr``, ``pass@k``, ``gt_rate`` or ``by_bucket.<bucket>``. None when the run has no such figure."""
    label = (results.get("roles") or {}).get(model, model)
    try:
        entry = results["partitions"][partition]["models"][label]
    except (KeyError, TypeError):
        return None
    head, _, tail = figure.partition(".")
    if head == "by_bucket" and tail:
        value = ((entry.get("by_bucket") or {}).get(tail) or {}).get("asr")
    elif head.startswith(("pass@", "pass^")):
        value = (entry.get(head[:5] + "k") or {}).get(head[5:])  # pass@4 → entry["pass@k"]["4"]
    else:
        value = entry.get(head)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_results(results: dict[str, Any], profile: Profile, *, tolerance: float = 1e-9) -> list[Deviation]:
    """Every condition of ``profile`` against ``results`` (a ``results.json`` body), in the matrix's order. A
    figure is inside when ``lo - tolerance <= measured <= hi + tolerance`` (the tolerance absorbs the rounding of
    the stored figures); a figure the run does not have is reported as missing."""
    out: list[Deviation] = []
    for c in profile.conditions:
        value = figure_value(results, c.model, c.partition, c.figure)
        if value is None:
            out.append(Deviation(condition=c, measured=None, inside=False, reason="missing from the results"))
            continue
        lo, hi = c.interval
        inside = lo - tolerance <= value <= hi + tolerance
        out.append(Deviation(condition=c, measured=value, inside=inside,
                             reason="" if inside else f"{value:.3f} outside [{lo:.3f}, {hi:.3f}]"))
    return out
