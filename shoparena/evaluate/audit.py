"""Judge reliability (docs/judge-audit.md): stored trajectories judged again by a panel, agreement, and race-winner sensitivity.

:func:`audit_judges` draws a seeded sample of stored records (``SUCCESS`` envelopes with steps, the records a
validator judges, docs/arena.md §7.1): the ids of every ``SUCCESS`` record, sorted, shuffled by ``random.Random(seed)``,
taken in that order until ``sample`` records with steps are in. Each one goes to every judge of the panel (any spec
:func:`shoparena.validator.judge.get_judge` takes; default :data:`DEFAULT_PANEL`: the rubric and three offline LLM
judges, ``llm:policy:judge-strict|lenient|noisy``, which answer the real judge prompt through the real parser and
span check) on the stored steps and call log, with the query the record's first step carries. One judge object per
stored evaluation run, as a validator holds one per evaluation (an LLM judge's blacklist and circuit breaker do not
leak across runs). A failed verdict is counted, never scored.

The figures mirror ``evaluation.json``'s judge section (:mod:`shoparena.evaluate.judging`, whose helpers compute
them): per judge the verdicts, failures, gate pass rate (score ≥ ``gate``, the corpus filter's judge gate, 0.5), mean
score, the rule-success × judge-gate confusion and Cohen's κ against the rule, plus agreement with the verdict
stored in the record (same score, same gate decision, κ of the gate decisions); for the panel Fleiss' κ of the gate
decisions and of the five rubric scores and Cohen's κ of every pair, over the records every judge gave a usable
verdict.

**Race-winner sensitivity.** When the store's database also holds the arena's tables (``shoparena arena simulate``
writes both to ``subnet.db``), every completed race is replayed. A race item's score is the mean ``final_score`` of
its first ``required_successes`` included evaluation runs (ordered by completion, as the arena closed it); a run's
final score is ``success_rate × coeff(q)`` (folded with the run's richness weight, when not 0), q the mean judge
score over the run's judged records. For each judge, every judged record of every included run (all of them, not
just the sample: a run's q needs them all; verdicts of sampled records are reused) is judged again, q and the final
score recomputed with the stored rule ``success_rate`` unchanged, the item scores averaged, the racers ranked with
the arena's own :func:`shoparena.arena.races.rank`, and the winner compared with the stored winner. A run with a
failed verdict cannot be re-scored (a validator would retry it): that race is *undecided* for that judge, neither
changed nor kept. ``replayed_winner`` ranks the stored run scores the same way (a check of the method: it must be
the stored winner). A store without the arena's tables reports ``races: null`` with the reason.

Deterministic: the same store, panel, sample and seed give the same dict (no clock, sorted keys and ids).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from shoparena.errors import ConfigError
from shoparena.evaluate.judging import JudgeEntry, _num, judge_figures, panel_figures, parse_judges
from shoparena.evaluate.stats import cohen_kappa

__all__ = ["DEFAULT_PANEL", "FORMAT", "audit_judges"]

FORMAT = "shoparena-judge-audit/1"
DEFAULT_PANEL: tuple[str, ...] = ("rubric", "strict=llm:policy:judge-strict", "lenient=llm:policy:judge-lenient",
                                  "noisy=llm:policy:judge-noisy")
_ARENA_TABLES = ("races", "qualifiers", "work_items", "eval_runs")


def _query(record: Any) -> str:
    """The query the validator judged with: step 0's ``extra_info.query``, else the first user message."""
    steps = record.steps or []
    if steps and isinstance(steps[0], dict) and isinstance(steps[0].get("extra_info"), dict):
        q = steps[0]["extra_info"].get("query")
        if q:
            return str(q)
    return next((str(m.get("content") or "") for m in record.messages or []
                 if isinstance(m, dict) and m.get("role") == "user"), "")


def _check_entries(specs: Sequence[str]) -> list[JudgeEntry]:
    """Labels and specs, every model URI of an LLM judge resolved (an unknown policy is a ConfigError here)."""
    from shoparena.llm.check import check_models

    entries = parse_judges(specs)
    if not entries:
        raise ConfigError("an audit needs at least one judge", hint="pass --judge SPEC (e.g. rubric)")
    for e in entries:
        kind, _, rest = e.spec.partition(":")
        if kind == "llm":
            check_models([m.strip() for m in rest.split(",") if m.strip()])
    return entries


class _Panel:
    """Verdict rows per judge, one judge object per (judge, evaluation run), each record judged once per judge."""

    def __init__(self, entries: list[JudgeEntry], config: Any = None) -> None:
        self.entries = entries
        self.config = config
        self._judges: dict[tuple[str, str], Any] = {}
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._loop = asyncio.new_event_loop()

    def close(self) -> None:
        pending = asyncio.all_tasks(self._loop)  # an openai: judge's client closes when its task is cancelled
        for task in pending:
            task.cancel()
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def row(self, entry: JudgeEntry, record: Any) -> dict[str, Any]:
        key = (entry.label, record.record_id)
        if key not in self.rows:
            from shoparena.validator.judge import get_judge

            jkey = (entry.label, record.eval_run_id)
            if jkey not in self._judges:
                self._judges[jkey] = get_judge(entry.spec, self.config)
            v = self._loop.run_until_complete(self._judges[jkey].judge(_query(record), record.steps, record.call_log))
            self.rows[key] = {"problem_id": record.record_id, "sample": 0, "judged": True, "ok": v.ok,
                              "score": v.score, "gate": v.gate, "error": v.error, "trace_sha256": v.trace_sha256}
        return self.rows[key]


def _draw(store: Any, sample: int, seed: int) -> tuple[list[Any], dict[str, int]]:
    ids = sorted(r.record_id for r in store.rows(status="SUCCESS"))
    random.Random(seed).shuffle(ids)
    picked, examined = [], 0
    for rid in ids:
        if len(picked) >= sample:
            break
        examined += 1
        rec = store.get(rid)
        if rec is not None and rec.steps:
            picked.append(rec)
    picked.sort(key=lambda r: r.record_id)
    return picked, {"eligible": len(ids), "examined": examined, "without_steps": examined - len(picked),
                    "judged": len(picked)}


def _stored_agreement(rows: list[dict[str, Any]], stored: dict[str, dict[str, Any]], gate: float) -> dict[str, Any]:
    pairs = [(float(stored[r["problem_id"]]["score"]), float(r["score"])) for r in rows
             if r["ok"] and isinstance(r["score"], int | float) and r["problem_id"] in stored]
    if not pairs:
        return {"items": 0, "same_score": None, "same_gate": None, "kappa_gate": None}
    a, b = [s >= gate for s, _ in pairs], [t >= gate for _, t in pairs]
    return {"items": len(pairs), "same_score": _num(sum(abs(s - t) < 1e-9 for s, t in pairs) / len(pairs)),
            "same_gate": _num(sum(x == y for x, y in zip(a, b, strict=True)) / len(pairs)),
            "kappa_gate": _num(cohen_kappa(a, b))}


def audit_judges(store_url: str, judges: Sequence[str] | None = None, sample: int = 50, seed: int = 0, *,
                 gate: float = 0.5, races: bool = True, timeout_s: float | None = None) -> dict[str, Any]:
    """The audit of ``judges`` (``LABEL=SPEC`` or bare specs) on the store at ``store_url`` (module docstring).

    ``timeout_s`` bounds one LLM judge verdict (its model calls, retries and backoffs together; None: the judge's
    default policy); an ``openai:`` judge model that does not answer is refused before any record is read."""
    import math

    from shoparena.store import open_store
    from shoparena.validator.judge.llm import LLMJudgeConfig

    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ConfigError(f"bad sample size {sample!r}", hint="--sample takes a whole number ≥ 1")
    if not 0.0 < gate <= 1.0:
        raise ConfigError(f"bad judge gate {gate!r}", hint="a rubric score in (0, 1], e.g. 0.5")
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"bad judge timeout {timeout_s!r}", hint="--timeout takes seconds > 0, e.g. 120")
    entries = _check_entries(list(judges) if judges else list(DEFAULT_PANEL))
    config = None if timeout_s is None else LLMJudgeConfig(
        timeout_s=min(LLMJudgeConfig().timeout_s, timeout_s), deadline_s=timeout_s,
        connect_timeout_s=min(LLMJudgeConfig().connect_timeout_s, timeout_s))
    panel = _Panel(entries, config)
    try:
        with open_store(store_url, readonly=True) as store:
            records, drawn = _draw(store, sample, seed)
            tables = {e.label: [panel.row(e, r) for r in records] for e in entries}
            success = {(r.record_id, 0): bool(r.success) for r in records}
            stored = {r.record_id: r.judge for r in records
                      if isinstance(r.judge, dict) and r.judge.get("ok") and isinstance(r.judge.get("score"),
                                                                                        int | float)}
            by_judge = {}
            for e in entries:
                figures = judge_figures(tables[e.label], success, gate)
                del figures["episodes"]
                figures["stored_verdict"] = _stored_agreement(tables[e.label], stored, gate)
                by_judge[e.label] = figures
            reproduced = sum(1 for r, row in zip(records, tables[entries[0].label], strict=True)
                             if r.record_id in stored and row["trace_sha256"] == stored[r.record_id].get("trace_sha256"))
            out: dict[str, Any] = {
                "format": FORMAT, "store": store.url, "seed": seed, "gate": gate,
                "judges": {e.label: e.spec for e in entries},
                "sample": {**drawn, "requested": sample, "rule_success": sum(success.values()),
                           "stored_verdicts": len(stored), "trace_reproduced": reproduced,
                           "record_ids": [r.record_id for r in records]},
                "by_judge": by_judge, "panel": panel_figures(tables, gate),
            }
            out.update(_races(store_url, store, entries, panel) if races else
                       {"races": None, "races_reason": "not requested"})
    finally:
        panel.close()
    return out


# -- race-winner sensitivity -----------------------------------------------------------------------------------------
def _races(store_url: str, store: Any, entries: list[JudgeEntry], panel: _Panel) -> dict[str, Any]:
    from sqlalchemy import inspect

    from shoparena.db.engine import make_engine

    engine = make_engine(store_url, readonly=True)
    try:
        missing = [t for t in _ARENA_TABLES if t not in set(inspect(engine).get_table_names())]
        if missing:
            return {"races": None, "races_reason": f"the store's database has no arena tables ({', '.join(missing)})"}
        with engine.connect() as conn:
            races = [_race(conn, store, race, entries, panel) for race in _completed(conn)]
    finally:
        engine.dispose()
    summary = {}
    for e in entries:
        decided = [x for x in (r["by_judge"][e.label] for r in races) if not x["undecided"]]
        changed = sum(1 for x in decided if x["changed"])
        summary[e.label] = {"races": len(races), "decided": len(decided), "undecided": len(races) - len(decided),
                            "winner_changed": changed,
                            "change_rate": _num(changed / len(decided)) if decided else None}
    return {"races": races, "races_reason": None if races else "no completed race", "race_summary": summary}


def _completed(conn: Any) -> list[Any]:
    from sqlalchemy import select

    from shoparena.arena.state.schema import races

    return list(conn.execute(select(races.c.race_id, races.c.race_number, races.c.winner_agent_version_id,
                                    races.c.winner_score).where(races.c.status == "RACE_COMPLETE")
                             .order_by(races.c.race_number)).all())


def _included_runs(conn: Any, race_id: str) -> dict[str, list[Any] | None]:
    """Per racing version: the included runs its race item's score was the mean of (None: the item did not finish)."""
    from sqlalchemy import and_, select

    from shoparena.arena.state.schema import eval_runs, work_items

    w, e = work_items.c, eval_runs.c
    out: dict[str, list[Any] | None] = {}
    for item in conn.execute(select(w.work_item_id, w.agent_version_id, w.status, w.required_successes)
                             .where(w.race_id == race_id, w.kind == "RACE").order_by(w.agent_version_id)).all():
        if item.status != "DONE":
            out[item.agent_version_id] = None
            continue
        runs = conn.execute(select(e.validator_run_id, e.success_rate, e.final_score, e.score_components)
                            .where(and_(e.work_item_id == item.work_item_id, e.is_included.is_(True)))
                            .order_by(e.completed_at, e.eval_run_id)).all()
        out[item.agent_version_id] = list(runs[: item.required_successes])
    return out


def _rescored(store: Any, run: Any, entry: JudgeEntry, panel: _Panel) -> float | None:
    """The run's final score under ``entry``'s verdicts; None when a verdict failed or nothing was judged."""
    from shoparena.scoring.richness import fold, richness_of_record
    from shoparena.validator.judge import coefficient

    records = sorted(store.query(eval_run_id=run.validator_run_id), key=lambda r: r.record_id)
    scores: list[float] = []
    for r in records:
        if r.status == "SUCCESS" and r.steps:
            row = panel.row(entry, r)
            if not row["ok"]:
                return None
            scores.append(float(row["score"]))
    if not scores or run.success_rate is None:
        return None
    weight = float((run.score_components or {}).get("richness_weight") or 0.0)
    rich = [richness_of_record(r).score for r in records if r.success] if weight else []
    return fold(float(run.success_rate), coefficient(sum(scores) / len(scores)), rich, weight)


def _winner(results: dict[str, float | None]) -> str | None:
    from shoparena.arena.races import rank

    ranking = rank(results)
    return ranking[0][0] if ranking and ranking[0][1] is not None else None


def _mean(xs: list[float | None]) -> float | None:
    return None if not xs or any(x is None for x in xs) else round(sum(xs) / len(xs), 6)  # type: ignore[arg-type]


def _race(conn: Any, store: Any, race: Any, entries: list[JudgeEntry], panel: _Panel) -> dict[str, Any]:
    runs = _included_runs(conn, race.race_id)
    stored = {v: (_mean([r.final_score for r in rs]) if rs else None) for v, rs in runs.items()}
    out: dict[str, Any] = {"race_id": race.race_id, "race_number": race.race_number,
                           "stored_winner": race.winner_agent_version_id, "replayed_winner": _winner(stored),
                           "racers": sorted(runs), "stored_scores": stored, "by_judge": {}}
    for e in entries:
        scores: dict[str, float | None] = {}
        undecided = False
        for version, rs in runs.items():
            if rs is None:
                scores[version] = None
                continue
            finals = [_rescored(store, r, e, panel) for r in rs]
            undecided = undecided or any(f is None for f in finals)
            scores[version] = _mean(finals)
        winner = None if undecided else _winner(scores)
        out["by_judge"][e.label] = {"scores": scores, "winner": winner, "undecided": undecided,
                                    "changed": (not undecided) and winner != race.winner_agent_version_id}
    return out
