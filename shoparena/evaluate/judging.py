"""Judge statistics of an evaluation: stored runs judged after the fact, and how far the judges agree.

:func:`judge_run` gives every episode of a finished model run (``models/<label>/``) to one judge (any spec
:func:`shoparena.validator.judge.get_judge` takes: ``rubric``, ``llm:<model-uri>[,…]``) exactly as the evaluation
core would have: only ``SUCCESS`` envelopes with steps are judged, on the stored steps and the episode's gateway
call log. Verdicts go to ``models/<label>/judges/<judge>.jsonl`` (one line per episode, in ``runs.jsonl`` order)
with ``<judge>.json`` beside it naming the spec, the judge's prompt version and the hash of the rollouts judged,
so a resumed evaluation judges again only what changed. A judge infrastructure failure is a verdict with
``ok: false``: it is counted, never a score.

:func:`judge_summary` turns those files into the figures of ``evaluation.json`` (pure: nothing is re-judged):
per judge, the gate pass rate (score ≥ the corpus filter's judge gate, 0.5 by default), the mean score, the
rule-success × judge-gate confusion matrix and Cohen's κ between the rule outcome and the gate; for a panel of two
or more judges, Fleiss' κ of the gate decisions (and of the five rubric scores) and Cohen's κ of every pair, over
the episodes every judge gave a usable verdict.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from shoparena.errors import ConfigError, DataError
from shoparena.evaluate.stats import cohen_kappa, confusion, fleiss_kappa
from shoparena.tasks.types import Problem
from shoparena.validator.run import read_run_file

__all__ = [
    "JudgeEntry", "judge_figures", "judge_run", "judge_summary", "panel_figures", "parse_judges",
]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class JudgeEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    spec: str


def _slug(spec: str) -> str:
    kind, _, rest = spec.partition(":")
    tail = rest.partition("?")[0].rstrip("/").rsplit("/", 1)[-1] if rest else ""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{kind}-{tail}" if tail else kind).strip("-")[:64]
    return slug or "judge"


def parse_judges(specs: Sequence[str]) -> list[JudgeEntry]:
    """``LABEL=SPEC`` or a bare ``SPEC`` per item (an LLM spec may itself hold commas, so items are not split);
    every spec is resolved once here, so a bad one fails before any model runs. Labels are unique."""
    from shoparena.validator.judge import get_judge

    out: list[JudgeEntry] = []
    for item in (s.strip() for s in specs):
        if not item:
            continue
        label, sep, spec = item.partition("=")
        if not sep or ":" in label:
            label, spec = _slug(item), item
        if not _LABEL.match(label) or label == "panel":
            raise ConfigError(f"bad judge label {label!r}",
                              hint="labels: letters, digits, . _ -, at most 64; not 'panel'")
        get_judge(spec)  # raises ConfigError for an unknown kind or a malformed spec
        out.append(JudgeEntry(label=label, spec=spec.strip()))
    labels = [j.label for j in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"judge label {dupes[0]!r} is used twice", hint="name judges LABEL=SPEC")
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def judge_run(run_dir: str | Path, problems: Sequence[Problem], entry: JudgeEntry, *, resume: bool = True,
              progress: Callable[[int], None] | None = None) -> Path:
    """Judge every episode of the finished run in ``run_dir`` (module docstring); returns the verdicts file.
    With ``resume``, verdicts already made by the same spec and prompt on the same rollouts are kept."""
    from shoparena._io import atomic_write
    from shoparena.validator.judge import get_judge

    run_dir = Path(run_dir)
    judge = get_judge(entry.spec)
    rollouts_file = run_dir / "rollouts.jsonl"
    runs, rollouts = read_run_file(run_dir / "runs.jsonl"), read_run_file(rollouts_file)
    if len(runs) != len(rollouts):
        raise DataError(f"{run_dir}: runs.jsonl has {len(runs)} lines, rollouts.jsonl {len(rollouts)}")
    meta = {"spec": entry.spec, "judge": judge.name, "prompt_version": judge.prompt_version,
            "rollouts_sha256": _sha(rollouts_file), "episodes": len(runs)}
    out_dir = run_dir / "judges"
    verdicts_file, meta_file = out_dir / f"{entry.label}.jsonl", out_dir / f"{entry.label}.json"
    if resume and verdicts_file.is_file():
        try:
            if json.loads(meta_file.read_text(encoding="utf-8")) == meta:
                return verdicts_file
        except (OSError, ValueError):
            pass
    calls: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for c in read_run_file(run_dir / "calls.jsonl"):
        if isinstance(c, dict):
            key = (str(c.get("problem_id")), c.get("sample"))
            calls.setdefault(key, []).append({k: v for k, v in c.items() if k != "sample"})  # run_agents added it
    query = {p.problem_id: p.query for p in problems}
    lines: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        for run, steps in zip(runs, rollouts, strict=True):
            pid, sample = str(run.get("problem_id")), run.get("sample")
            row: dict[str, Any] = {"problem_id": pid, "sample": sample, "judged": False}
            if run.get("status") == "SUCCESS" and run.get("steps") and isinstance(steps, list) and pid in query:
                v = loop.run_until_complete(judge.judge(query[pid], steps, calls.get((pid, sample), [])))
                row.update(judged=True, ok=v.ok, score=v.score, gate=v.gate, error=v.error,
                           trace_sha256=v.trace_sha256)
            lines.append(json.dumps(row, ensure_ascii=False))
            if progress is not None:
                progress(1)
    finally:
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        loop.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(verdicts_file, "w") as fh:
        fh.write("".join(line + "\n" for line in lines))
    with atomic_write(meta_file, "w") as fh:
        fh.write(json.dumps(meta, indent=2) + "\n")
    return verdicts_file


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)


def judge_figures(verdicts: list[dict[str, Any]], success: Mapping[tuple[str, Any], bool], gate: float
                  ) -> dict[str, Any]:
    """One judge's figures over verdict rows (``problem_id``, ``sample``, ``judged``, ``ok``, ``score``) against
    the rule outcome ``success[(problem_id, sample)]``."""
    usable = [v for v in verdicts if v.get("judged") and v.get("ok") and isinstance(v.get("score"), int | float)]
    rule = [success.get((v["problem_id"], v["sample"]), False) for v in usable]
    passed = [float(v["score"]) >= gate for v in usable]
    conf = confusion(rule, passed)
    return {
        "episodes": len(verdicts), "judged": sum(1 for v in verdicts if v.get("judged")),
        "failed": sum(1 for v in verdicts if v.get("judged") and not v.get("ok")), "usable": len(usable),
        "pass_rate": _num(sum(passed) / len(passed)) if passed else None,
        "mean_score": _num(sum(float(v["score"]) for v in usable) / len(usable)) if usable else None,
        "confusion": {**{k: v for k, v in conf.to_dict().items() if k != "agreement"},
                      "agreement": _num(conf.agreement)},
        "kappa_vs_rule": _num(cohen_kappa(rule, passed)) if usable else None,
    }


def panel_figures(tables: Mapping[str, list[dict[str, Any]]], gate: float) -> dict[str, Any] | None:
    """Agreement of two or more judges over the episodes every one of them scored (None for fewer than two)."""
    if len(tables) < 2:
        return None
    usable = {label: {(v["problem_id"], v["sample"]): float(v["score"]) for v in rows
                      if v.get("judged") and v.get("ok") and isinstance(v.get("score"), int | float)}
              for label, rows in tables.items()}
    labels = list(usable)
    common = sorted(set.intersection(*(set(u) for u in usable.values())), key=lambda k: (k[0], k[1] or 0))
    out: dict[str, Any] = {"judges": labels, "items": len(common), "fleiss_kappa": None,
                           "fleiss_kappa_score": None, "cohen_kappa": {}}
    if not common:
        return out
    out["fleiss_kappa"] = _num(fleiss_kappa([[usable[j][k] >= gate for j in labels] for k in common]))
    out["fleiss_kappa_score"] = _num(fleiss_kappa([[usable[j][k] for j in labels] for k in common]))
    for a, b in combinations(labels, 2):
        out["cohen_kappa"][f"{a}|{b}"] = _num(cohen_kappa([usable[a][k] >= gate for k in common],
                                                          [usable[b][k] >= gate for k in common]))
    return out


def judge_summary(run_dirs: Mapping[str, Path], judges: Sequence[JudgeEntry], gate: float
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per model ``{judge: figures, "panel": …}`` and the same pooled over every model (module docstring)."""
    per_model: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[dict[str, Any]]] = {j.label: [] for j in judges}
    pooled_success: dict[tuple[str, Any], bool] = {}
    for label, run_dir in run_dirs.items():
        success = {(r.get("problem_id"), r.get("sample")): bool(r.get("success"))
                   for r in read_run_file(run_dir / "runs.jsonl")}
        tables: dict[str, list[dict[str, Any]]] = {}
        for j in judges:
            rows = read_run_file(run_dir / "judges" / f"{j.label}.jsonl")
            if len(rows) != len(success):
                raise DataError(f"{run_dir}/judges/{j.label}.jsonl: {len(rows)} verdicts for {len(success)} "
                                "episodes (stale: run the evaluation again with --resume)")
            tables[j.label] = rows
            # pooled keys carry the model label: the same (problem, sample) of two models are two trajectories
            pooled[j.label].extend({**v, "problem_id": f"{label}/{v.get('problem_id')}"} for v in rows)
        pooled_success.update({(f"{label}/{k[0]}", k[1]): s for k, s in success.items()})
        figures: dict[str, Any] = {j: judge_figures(rows, success, gate) for j, rows in tables.items()}
        panel = panel_figures(tables, gate)
        if panel is not None:
            figures["panel"] = panel
        per_model[label] = figures
    overall: dict[str, Any] = {"gate": gate, "specs": {j.label: j.spec for j in judges},
                               "by_judge": {j: judge_figures(rows, pooled_success, gate) for j, rows in pooled.items()}}
    panel = panel_figures(pooled, gate)
    if panel is not None:
        overall["panel"] = panel
    return per_model, overall
