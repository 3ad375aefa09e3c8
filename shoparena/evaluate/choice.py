"""Retrieval against choice: where an evaluated model's failures sit, from its stored run alone.

For each scored episode of a run (``scores.jsonl``) and the gateway's log of its searches (``calls.jsonl``):

- ``recommended``: the episode recommended at least one product;
- ``retrieved``: a ground-truth product (a ``product_id`` of the problem's reward items) was among the ids the
  episode's own searches returned (``find_product`` results and ``view_product_information`` answers);
- ``chosen``: a ground-truth product is among the recommended ids;
- ``passed_over``: retrieved, something recommended, and no ground-truth product among it.

``retrieved`` without ``chosen`` says the search found the answer and the model picked another; neither says the
search never reached it. A pure function of the stored run (nothing is re-run, τ²-bench style); numbers are
episode counts and their shares of the run's scored episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shoparena.errors import DataError
from shoparena.tasks.types import Problem
from shoparena.validator.run import read_run_file

__all__ = ["COUNTS", "choice_summary", "episode_choice", "searched_ids"]

COUNTS = ("recommended", "retrieved", "chosen", "passed_over")


def _objects(rows: list[Any], path: Path) -> list[dict[str, Any]]:
    if not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: a line is not a JSON object")
    return rows


def searched_ids(calls: Sequence[Any]) -> dict[tuple[Any, Any], set[str]]:
    """``(problem_id, sample)`` → the product ids that episode's searches returned, from call-log records."""
    seen: dict[tuple[Any, Any], set[str]] = {}
    for c in calls:
        if not isinstance(c, dict):
            continue
        ids = c.get("result_product_ids")
        if c.get("kind") != "search" or not isinstance(ids, list):
            continue
        seen.setdefault((c.get("problem_id"), c.get("sample")), set()).update(str(x) for x in ids)
    return seen


def episode_choice(truth: set[str], searched: set[str], recommended: Sequence[Any]) -> dict[str, bool]:
    """One episode's flags (:data:`COUNTS`) from the problem's ground-truth ids, the ids its searches returned and
    the ids it recommended."""
    rec = {str(x) for x in recommended}
    found, chosen = bool(truth & searched), bool(truth & rec)
    return {"recommended": bool(rec), "retrieved": found, "chosen": chosen,
            "passed_over": found and bool(rec) and not chosen}


def choice_summary(scores: Sequence[Any], calls_file: str | Path, problems: Sequence[Problem]
                   ) -> dict[str, Any] | None:
    """Counts (:data:`COUNTS`) and their rates over a run's score rows (``scores.jsonl``, as the caller read them)
    on ``problems``, with the searches of its call log ``calls_file``; ``None`` when the run has no call log
    (nothing to say about retrieval)."""
    calls_file = Path(calls_file)
    if not calls_file.is_file():
        return None
    gt = {p.problem_id: {item.product_id for item in p.reward} for p in problems}
    seen = searched_ids(_objects(read_run_file(calls_file), calls_file))
    counts = dict.fromkeys(COUNTS, 0)
    episodes = 0
    for s in _objects(list(scores), calls_file.with_name("scores.jsonl")):
        pid, sample = s.get("problem_id"), s.get("sample")
        if pid not in gt:
            continue
        rec = s.get("recommended_ids") or []
        if not isinstance(rec, list):
            raise DataError(f"{calls_file.with_name('scores.jsonl')}: recommended_ids of {pid} is not a list")
        episodes += 1
        for k, v in episode_choice(gt[pid], seen.get((pid, sample), set()), rec).items():
            counts[k] += v
    return {"episodes": episodes, **counts,
            "rates": {k: round(v / episodes, 4) if episodes else None for k, v in counts.items()}}
