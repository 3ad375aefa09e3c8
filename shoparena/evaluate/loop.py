"""``shoparena loop``: the trajectory primitive closing on itself, offline and without keys.

Simulated arena days → the corpus of their trajectories → the training recipe → a held-out evaluation of the
trained model beside its base (bootstrap intervals, paired comparison, the report) → the trained model served over
the OpenAI-compatible API on loopback (:func:`shoparena.llm.serve.create_app`, what ``shoparena serve`` runs) and
entered into the arena as a new miner — a ReAct agent file calling it through the validators' logging gateway — that
races the incumbents for more simulated days.

The second arena is a fresh simulation with the same seed and population plus the entrant, who joins on the day
after the first arena ended (``MinerProfile.join_day``); the first ``days`` replay the same miners and submissions.
``<out>/loop.json`` and ``<out>/loop.md`` put the entrant's race results next to its held-out ASR.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LoopConfig", "check_loop", "run_loop"]

ENTRANT = "distilled"


class LoopConfig(BaseModel):
    """Sizes of the loop's arena, training and evaluation (defaults: the demo's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out: str
    days: int = Field(1, ge=1)
    race_days: int = Field(1, ge=1)
    """Simulated days the entrant races after joining."""
    recipe: str = "tiny"
    seed: int = 0
    miners: int = Field(6, ge=1)
    validators: int = Field(3, ge=1)
    catalog_size: int = Field(1500, ge=200)
    problems: int = Field(120, ge=10)
    qualifying_problems: int = Field(8, ge=1)
    race_problems: int = Field(8, ge=1)
    sandbox: str = "bubblewrap"
    eval_per_bucket: int | None = Field(2, ge=1)
    """Held-out problems per bucket for the evaluation (None: the whole eval partition)."""
    eval_samples: int = Field(2, ge=1)
    temperature: float = Field(0.7, ge=0.0)
    timeout_s: float = Field(60.0, gt=0)
    serve: Literal["hf", "llamacpp"] = "hf"
    """How the trained checkpoint is served (evaluation and the entrant's miner)."""
    reuse: bool = False
    """Keep what an earlier run left in ``out`` (``arena/`` with its banks, ``corpus/`` with its manifest; training
    and evaluation always resume): ``make demo`` runs its arena, corpus and training steps into the loop's layout
    and then closes the loop over them."""


def _arena_config(cfg: LoopConfig, out: Path, days: int, entrants: list[Any]) -> Any:
    from shoparena.arena.simulate import SimulationConfig

    return SimulationConfig(miners=cfg.miners, validators=cfg.validators, days=days, seed=cfg.seed, out=str(out),
                            catalog_size=cfg.catalog_size, problems=cfg.problems,
                            qualifying_problems=cfg.qualifying_problems, race_problems=cfg.race_problems,
                            sandbox=cfg.sandbox, entrants=entrants)


def _entrant_results(result: Any) -> dict[str, Any]:
    """The entrant's leaderboard rows and races from a simulation result."""
    rows = [r for r in result.leaderboard if r.get("miner") == ENTRANT]
    ids = {r.get("agent_version_id") for r in rows}
    races = [{"race": race.get("race_number"), "status": race.get("status"),
              "winner_is_entrant": race.get("winner_agent_version_id") in ids,
              "winner_score": race.get("winner_score"), "qualifying_threshold": race.get("qualifying_threshold")}
             for race in result.races]
    subs = [s for s in result.submissions if s.get("miner") == ENTRANT]
    wins = [w for w in result.winners if w.get("winner") == ENTRANT]
    hotkey = next((m["hotkey"] for m in result.miners if m["name"] == ENTRANT), None)
    versions = [{k: v.get(k) for k in ("version_number", "state", "state_reason", "qualifying_score",
                                      "eliminated_in_race_number")}
                for v in result.versions if v.get("miner") == ENTRANT]
    return {"hotkey": hotkey, "submissions": subs, "versions": versions, "leaderboard": rows, "wins": len(wins), "races": races,
            "emission": result.emissions.get("by_participant", {}).get(ENTRANT, 0.0)}


def _store_total(url: str) -> int:
    from shoparena.store import open_store

    with open_store(url) as store:
        return int(store.stats().records)


def check_loop(cfg: LoopConfig) -> tuple[Any, str]:
    """What can be checked before any work (nothing written): the sandbox backend is known, the recipe loads and
    its base checkpoint exists. Returns the recipe and its text; raises the :class:`ShopArenaError` otherwise."""
    from shoparena.train.recipe import check_base, load_recipe
    from shoparena.validator.sandbox import SANDBOXES

    SANDBOXES.get(cfg.sandbox)
    recipe, text = load_recipe(cfg.recipe)
    check_base(recipe)
    return recipe, text


def run_loop(cfg: LoopConfig, *, progress: Callable[[str], None] | None = None,
             bars: Callable[[str, int | None], contextlib.AbstractContextManager[Callable[[int], None]]] | None = None,
             ) -> dict[str, Any]:
    """Run the whole loop into ``cfg.out``; returns the ``loop.json`` body. ``progress`` gets one line per step;
    ``bars(description, total)`` (a context manager yielding ``advance(n)``) draws the training phases and the
    evaluation's episodes."""
    from shoparena._http import BackgroundServer
    from shoparena.arena.population import MinerProfile
    from shoparena.arena.simulate import simulate
    from shoparena.corpus import build_corpus
    from shoparena.evaluate.core import EvalConfig, ModelEntry, evaluate_models, per_bucket, split_problems
    from shoparena.evaluate.report import write_report
    from shoparena.llm.serve import create_app
    from shoparena.llm.types import get_backend
    from shoparena.train.recipe import run_recipe

    say = progress or (lambda _m: None)
    recipe, text = check_loop(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        timings[name] = round(time.perf_counter() - since, 1)
        return time.perf_counter()

    # 1. the arena's first days
    arena = out / "arena"
    store_url = f"sqlite:///{(arena / 'subnet.db').resolve()}"
    if cfg.reuse and (arena / "banks").is_dir() and (arena / "subnet.db").is_file():
        say(f"1/6 arena: reusing {arena}")
        first_trajectories, first_winners = _store_total(store_url), []
    else:
        say(f"1/6 arena: {cfg.miners} miners, {cfg.validators} validators, {cfg.days} day(s)")
        first = simulate(_arena_config(cfg, arena, cfg.days, []))
        first_trajectories, first_winners = first.trajectories.get("total"), first.winners
    t = lap("arena", t0)
    # 2. the corpus of their trajectories
    if cfg.reuse and (out / "corpus" / "manifest.json").is_file():
        say(f"2/6 corpus: reusing {out / 'corpus'}")
        funnel = json.loads((out / "corpus" / "manifest.json").read_text(encoding="utf-8")).get("counts", [])
    else:
        say("2/6 corpus of the firehose")
        report = build_corpus(out / "corpus", store=store_url, catalog=arena / "catalog", banks=arena / "banks")
        funnel = list(report.stages)
    t = lap("corpus", t)
    # 3. training
    say(f"3/6 train {recipe.name}: {' → '.join(recipe.stages)}")
    with contextlib.redirect_stdout(sys.stderr):  # trainers print their log dicts
        manifest = run_recipe(recipe, out / "corpus", out / "train", catalog_dir=arena / "catalog", recipe_text=text,
                              resume=True, progress=bars or False)
    t = lap("train", t)
    trained = Path(manifest.final_model or "")
    base = Path(manifest.base) if recipe.base != "tiny" else out / "train" / "base"
    # 4. held-out evaluation: the trained model beside its base
    problems = split_problems(f"{out / 'corpus'}:eval")
    if cfg.eval_per_bucket is not None:
        problems = per_bucket(problems, cfg.eval_per_bucket, cfg.seed)
    def uri(path: Path) -> str:
        return f"{cfg.serve}:{path.resolve()}"

    econfig = EvalConfig(models=[ModelEntry(label="base", uri=uri(base)), ModelEntry(label=ENTRANT, uri=uri(trained))],
                         agent="react", n_samples=cfg.eval_samples, temperature=cfg.temperature, seed=cfg.seed,
                         timeout_s=cfg.timeout_s, problem_set=f"{out / 'corpus'}:eval", n_resamples=2000)
    say(f"4/6 evaluate base vs {ENTRANT} on {len(problems)} held-out problems × {cfg.eval_samples}")
    with (bars or _no_bar)("evaluate", len(problems) * cfg.eval_samples * len(econfig.models)) as advance:
        evaluation = evaluate_models(arena / "catalog", problems, econfig, out / "eval", resume=True,
                                     advance=advance)
    write_report(out / "eval", train_manifest=out / "train")
    t = lap("evaluate", t)
    # 5. serve the trained model, 6. enter it into the arena and race
    backend = get_backend(uri(trained))
    with BackgroundServer(create_app(backend, model_name=ENTRANT)) as server:
        served = f"openai:{server.url}/v1/{ENTRANT}"
        say(f"5/6 serving the trained model at {served}")
        entrant = MinerProfile(name=ENTRANT, strategy="react", model=served, join_day=cfg.days)
        say(f"6/6 arena again: {ENTRANT} joins on day {cfg.days} and races for {cfg.race_days} day(s)")
        second = simulate(_arena_config(cfg, out / "arena-loop", cfg.days + cfg.race_days, [entrant]))
    lap("race", t)
    held = evaluation["models"][ENTRANT]
    body = {
        "format": "shoparena-loop/1", "config": cfg.model_dump(mode="json"),
        "arena": {"days": cfg.days, "trajectories": first_trajectories, "winners": first_winners},
        "corpus": {"manifest": str(out / "corpus" / "manifest.json"),
                   "funnel": [{"stage": s["stage"], "seen": s["seen"], "kept": s["kept"]} for s in funnel]},
        "train": {"recipe": recipe.name, "final_model": str(trained),
                  "stages": [{"stage": s.stage, "steps": s.steps, "seconds": s.seconds,
                              "checkpoint_sha256": s.checkpoint_sha256} for s in manifest.stages]},
        "evaluation": {"dir": str(out / "eval"), "problems": evaluation["problems"]["n"],
                       "samples": cfg.eval_samples,
                       "models": {k: {"asr": m["asr"], "ci": m["ci"]["asr"]} for k, m in evaluation["models"].items()},
                       "comparisons": evaluation["comparisons"]},
        "entrant": {"name": ENTRANT, "model": "the trained checkpoint served over the OpenAI API on loopback",
                    "held_out_asr": held["asr"], "held_out_ci": held["ci"]["asr"], **_entrant_results(second)},
        "race": {"days": cfg.days + cfg.race_days, "winners": second.winners,
                 "leaderboard": [{k: r.get(k) for k in ("rank", "miner", "version_number", "state", "qualifying_score",
                                                         "last_race_number", "last_race_score", "races_won",
                                                         "is_top_agent")}
                                 for r in second.leaderboard]},
        "timings_s": timings, "wall_s": round(time.perf_counter() - t0, 1),
    }
    from shoparena._io import atomic_write

    with atomic_write(out / "loop.json", "w") as fh:
        fh.write(json.dumps(body, indent=2, ensure_ascii=False, default=str) + "\n")
    with atomic_write(out / "loop.md", "w") as fh:
        fh.write(render_loop(body))
    return body


@contextlib.contextmanager
def _no_bar(_description: str, _total: int | None) -> Iterator[Callable[[int], None]]:
    yield lambda _n=1: None


def render_loop(body: dict[str, Any]) -> str:
    """``loop.md``: the entrant's held-out ASR next to its race results."""
    e = body["entrant"]
    lines = [f"# shoparena loop ({body['train']['recipe']})", "",
             f"- arena: {body['arena']['days']} day(s), {body['arena']['trajectories']} trajectories",
             "- corpus: " + ", ".join(f"{s['stage']} {s['kept']}/{s['seen']}" for s in body["corpus"]["funnel"]),
             "- train: " + " → ".join(f"{s['stage']} ({s['steps']} steps)" for s in body["train"]["stages"]),
             "", "| model | held-out ASR | 95 % CI |", "|---|---:|---|"]
    for label, m in body["evaluation"]["models"].items():
        lines.append(f"| {label} | {m['asr']:.3f} | [{m['ci'][0]:.2f}, {m['ci'][1]:.2f}] |")
    lines += ["", f"## {e['name']} in the arena (joined on day {body['config']['days']})", "",
              "| rank | miner | version | state | qualifying | last race score | races won |",
              "|---:|---|---:|---|---:|---:|---:|"]
    for r in body["race"]["leaderboard"]:
        q, rs = r.get("qualifying_score"), r.get("last_race_score")
        name = f"**{r.get('miner')}**" if r.get("miner") == e["name"] else r.get("miner")
        lines.append(f"| {r.get('rank')} | {name} | {r.get('version_number')} | {r.get('state')} | "
                     f"{'–' if q is None else f'{q:.3f}'} | {'–' if rs is None else f'{rs:.3f}'} | "
                     f"{r.get('races_won')} |")
    subs = ", ".join(f"day {s['day']}: {s['status']}" for s in e["submissions"]) or "none"
    for v in e.get("versions", []):
        line = f"{e['name']} v{v['version_number']}: {v['state']}"
        if v.get("qualifying_score") is not None:
            line += f", qualifying score {v['qualifying_score']:.3f}"
        if v.get("state_reason"):
            line += f" ({v['state_reason']})"
        lines += ["", line]
    lines += ["", f"{e['name']}: submissions {subs}; race wins {e['wins']}; emission {e['emission']}; "
              f"held-out ASR {e['held_out_asr']:.3f} [{e['held_out_ci'][0]:.2f}, {e['held_out_ci'][1]:.2f}].", ""]
    return "\n".join(lines)
