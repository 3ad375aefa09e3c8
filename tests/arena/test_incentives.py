"""The agentic-richness incentive in the arena (paper §9, ``docs/incentives.md``): the validator's folded score and
pipeline version, the arena's refusal of runs scored under another weight, teams that respond to the score, and a
simulation where weight 0 is today's subnet exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shoparena.agents import agent_path
from shoparena.arena.population import RESPONSES, MinerProfile, agent_source, default_population, respond
from shoparena.arena.simulate import SimulationConfig, simulate
from shoparena.arena.state.types import CompleteRequest, Invalid, ScoreComponents
from shoparena.catalog.directory import index_path
from shoparena.catalog.index import SearchIndex
from shoparena.scoring.richness import fold, richness_of_record
from shoparena.store import open_store
from shoparena.validator.core import AgentSpec, ValidatorConfig, evaluate, pipeline_version
from shoparena.validator.judge import get_judge
from shoparena.validator.judge.types import coefficient
from tests.arena_service import GOOD, config, make_arena
from tests.worlds import small_world

# A team that writes its own code (its own style and helpers): when it redesigns onto oro7 its file is not a copy of
# another team's released oro7 agent, which the gate would refuse as ``copied_agent``.
PIPE = MinerProfile(name="team-p", strategy="pipeline", model="policy:careful", responds_at=0.1, style="tags",
                    extras=5)


# -- teams ------------------------------------------------------------------------------------------------------
def test_a_responsive_pipeline_team_redesigns_when_richness_pays() -> None:
    moved = respond(PIPE, 1, weight=0.5, richness=0.0)  # withholds 0.5 of its score > 0.1
    assert moved is not None and (moved.redesign_day, moved.redesign_strategy) == (1, "oro7")
    assert moved.version(0) == ("pipeline", "policy:careful") and moved.version(1) == ("oro7", "policy:careful")
    assert 'PROFILE = "oro7"' in agent_source(moved, 1) and "_pipeline" not in agent_source(moved, 1)
    assert respond(moved, 2, weight=0.5, richness=0.9) is None  # one redesign per team


@pytest.mark.parametrize(("profile", "weight", "richness"), [
    (PIPE, 0.0, 0.0),  # weight 0 withholds nothing
    (PIPE, 0.1, 0.0),  # withholds exactly its threshold: not more
    (PIPE, 0.5, None),  # saw no trajectory of its own
    (PIPE.model_copy(update={"responds_at": None}), 1.0, 0.0),  # a team that stays whatever the score
    (PIPE.model_copy(update={"strategy": "oro7"}), 1.0, 0.0),  # already the richest design
    (PIPE.model_copy(update={"strategy": "keyword"}), 1.0, 0.0),  # an LLM-free script has no richer design
    (PIPE.model_copy(update={"strategy": "react"}), 0.5, 0.85),  # withholds 0.075 ≤ 0.1
])
def test_teams_that_keep_their_design(profile: MinerProfile, weight: float, richness: float | None) -> None:
    assert respond(profile, 1, weight=weight, richness=richness) is None


def test_react_moves_to_oro7_and_keeps_its_improvement() -> None:
    team = MinerProfile(name="t", strategy="react", model="policy:novice", improve_day=1,
                        improved_model="policy:careful", responds_at=0.05)
    moved = respond(team, 1, weight=0.5, richness=0.8)  # withholds 0.1 > 0.05
    assert moved is not None and moved.version(1) == ("oro7", "policy:careful")


def test_default_population_mixes_responders_and_stayers() -> None:
    pop = default_population(12, seed=0)
    eligible = [p for p in pop if p.strategy in ("pipeline", "react")]
    assert all(p.responds_at is None for p in pop if p not in eligible)
    assert {p.responds_at for p in eligible} <= set(RESPONSES)
    stay = sum(p.responds_at is None for p in eligible)
    assert 0 < stay < len(eligible)  # some stay, some respond
    assert default_population(12, seed=0) == pop  # seeded


# -- the validator: folded score and pipeline version -----------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    catalog, problems, _ = small_world(tmp_path_factory.mktemp("inc"), size=500, catalog_seed=21, n=4,
                                       problem_seed=4)
    return catalog, problems


def test_weight_zero_keeps_todays_pipeline_version(world: tuple[Path, list[Any]]) -> None:
    catalog, _ = world
    index = SearchIndex.open(index_path(catalog))
    judge = get_judge("rubric")
    today = pipeline_version(index, ValidatorConfig(), judge)
    assert today.scorer == "shoparena-rule/1"
    assert pipeline_version(index, ValidatorConfig(richness_weight=0.0), judge) == today
    paid = pipeline_version(index, ValidatorConfig(richness_weight=0.5), judge)
    assert paid.scorer == "shoparena-rule/1+richness=0.5" and paid.key() != today.key()


@pytest.mark.parametrize("agent", ["react", "pipeline"])
def test_validator_folds_richness_into_the_final_score(world: tuple[Path, list[Any]], tmp_path: Path,
                                                       agent: str) -> None:
    catalog, problems = world
    spec = AgentSpec(path=str(agent_path(agent)), agent_id=agent)
    base = ValidatorConfig(sandbox="process", allow_non_hermetic=True, model="policy:careful", workers=1)
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        today = evaluate(spec, problems, catalog, store, base)
        paid = evaluate(spec, problems, catalog, store, base.model_copy(update={"richness_weight": 0.5}))
        records = [r for r in store.query(eval_run_id=paid.eval_run_id)]
    assert today.richness_weight == 0.0 and paid.richness_weight == 0.5 and paid.eval_run_id != today.eval_run_id
    assert {r.pipeline.scorer for r in records} == {"shoparena-rule/1+richness=0.5"}
    # the same trajectories (seeded), scored twice: weight 0 is ORO's final, weight 0.5 folds R̄ of the successes
    assert paid.success_rate == today.success_rate and paid.reasoning_quality == today.reasoning_quality
    assert today.final_score == round(today.success_rate * coefficient(today.reasoning_quality), 4)
    successful = [richness_of_record(r).score for r in sorted(records, key=lambda r: r.problem_id) if r.success]
    assert successful, "the fixture needs at least one successful trajectory"
    assert paid.richness == round(sum(successful) / len(successful), 4)
    assert paid.final_score == fold(paid.success_rate, paid.reasoning_coefficient, successful, 0.5)
    assert {line.problem_id: line.richness for line in paid.problems} == {
        r.problem_id: richness_of_record(r).score for r in records}
    if agent == "pipeline":  # Python issued every search: the richness term withholds half its score
        assert paid.richness == 0.0 and paid.final_score == round(today.final_score * 0.5, 4)
    else:
        assert 0.4 < paid.richness <= 1.0 and today.final_score * 0.5 < paid.final_score <= today.final_score


# -- the arena refuses runs scored under another weight --------------------------------------------------------
def test_arena_refuses_a_run_scored_with_another_weight() -> None:
    arena = make_arena("sqlite://", cfg=config(richness_weight=0.25))
    arena.tick()
    assert arena.submit("hk-0", "agent", GOOD).agent_version_id
    work = arena.claim_work("val-a")
    assert work is not None

    def req(weight: float | None) -> CompleteRequest:
        return CompleteRequest(terminal_status="SUCCESS", validator_score=0.5, score_components=ScoreComponents(
            total_problems=5, success_rate=0.5, richness=0.8, richness_weight=weight))

    with pytest.raises(Invalid, match=r"richness weight 0; this arena scores with 0\.25"):
        arena.complete(work.eval_run_id, "val-a", req(None))  # a validator that predates the option
    with pytest.raises(Invalid, match=r"richness weight 0\.5"):
        arena.complete(work.eval_run_id, "val-a", req(0.5))
    assert arena.complete(work.eval_run_id, "val-a", req(0.25)).status == "SUCCESS"
    arena.close()


# -- the simulation ---------------------------------------------------------------------------------------------
def _sim(tmp: Path, **kw: Any) -> Any:
    base: dict[str, Any] = {"miners": 2, "validators": 2, "days": 1, "seed": 3, "catalog_size": 800,
                            "problems": 90, "qualifying_problems": 3, "race_problems": 3, "sandbox": "process",
                            "out": str(tmp)}
    return simulate(SimulationConfig(**{**base, **kw}))


def _comparable(result: Any) -> dict[str, Any]:
    """Everything but wall-clock times and the working directory."""
    body = result.model_dump(mode="json", exclude={"wall_s", "store", "config"})
    for day in body["days"]:
        day.pop("wall_s")
    return body


def test_weight_zero_is_the_simulation_without_the_option(tmp_path: Path) -> None:
    plain = _sim(tmp_path / "a")
    zero = _sim(tmp_path / "b", richness_weight=0.0)
    assert _comparable(plain) == _comparable(zero)
    day = plain.days[0]
    assert day.trajectories > 0 and day.design_changes == 0
    assert day.axis_a_share == round(day.by_axis.get("A", 0) / day.trajectories, 4)
    with open_store(plain.store) as store:
        assert {r.pipeline.scorer for r in store.query()} == {"shoparena-rule/1"}


def test_a_paying_arena_moves_a_responsive_team(tmp_path: Path) -> None:
    result = _sim(tmp_path, days=2, richness_weight=0.5, entrants=[PIPE])
    assert [d.design_changes for d in result.days] == [0, 1]
    assert any("team-p redesigns: pipeline -> oro7 (richness 0.000)" in e for e in result.events)
    subs = [s for s in result.submissions if s["miner"] == "team-p"]
    assert [(s["day"], s["strategy"], s["status"]) for s in subs] == [(0, "pipeline", "ACCEPTED"),
                                                                      (1, "oro7", "ACCEPTED")]
    team = next(m for m in result.miners if m["name"] == "team-p")
    assert (team["redesigns_on_day"], team["redesign_strategy"]) == (1, "oro7")
    with open_store(result.store) as store:
        assert {r.pipeline.scorer for r in store.query()} == {"shoparena-rule/1+richness=0.5"}
        axes = [{r.axis for r in store.query(eval_run_id=tuple(d.eval_runs)) if r.miner_hotkey == team["hotkey"]}
                for d in result.days]
    assert axes[0] == {"B"} and "B" not in axes[1]  # Python searched on day 0; the model searches on day 1
    assert all(0.0 <= d.axis_a_share <= 1.0 for d in result.days)
    assert all(d.top_agent_asr is None or 0.0 <= d.top_agent_asr <= 1.0 for d in result.days)
