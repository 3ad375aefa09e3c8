"""Stage 5's stop guard (shoparena/train/grpo.py, reward.py, rollout.py): an episode that ends without a
``recommend_product`` call loses ``stop_penalty``; a turn without a tool call scores 0 in the step match and, with
``callless_turns: skipped``, takes no teacher step, so it never raises an episode's reward; every rollout counts its
episodes without a recommend, callless turns and think-then-stop turns, whichever sampler plays it.

Episodes are played deterministically: a scripted sampler hands the player fixed token ids (the tiny Qwen3
tokenizer's encoding of the turns below) through the same per-episode turn loop the llama.cpp sampler uses, and a
greedy/seeded transformers rollout is replayed through it to show both paths score alike."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from shoparena.errors import ConfigError
from shoparena.train.grpo import (
    REWARD_FUNCS,
    ROLLOUT_METRICS,
    GRPOConfig,
    stop_penalty_reward,
    train_grpo,
    trl_config,
)
from shoparena.train.recipe import parse_recipe
from shoparena.train.reward import NEUTRAL, blended_reward, mean_step_match, penalised_reward, tool_match
from shoparena.train.rollout import RolloutEnv, TokenEpisode, run_token_episodes
from tests.train.rl_fixtures import mask_spans

if TYPE_CHECKING:
    from tests.train.rl_fixtures import RLWorld

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus / tiny-model fixtures

torch.set_num_threads(1)
FIND = {"name": "find_product", "arguments": {"q": "jeans"}}
VIEW = {"name": "view_product_information", "arguments": {"product_ids": "1,2"}}
REC = {"name": "recommend_product", "arguments": {"product_ids": "2"}}
TERM = {"name": "terminate", "arguments": {"status": "success"}}
TEACHER = [[FIND], [VIEW], [REC], [TERM]]


# -- the reward functions -------------------------------------------------------------------------------------------

def test_a_callless_turn_scores_zero_and_never_raises_the_match() -> None:
    for teacher_step in TEACHER:
        assert tool_match([], teacher_step) == 0.0
    # aligned by position, a think turn pushes the recommendation onto the teacher's: it raised the match
    thinking, direct = [[FIND], [], [REC]], [[FIND], [REC]]
    assert mean_step_match(thinking, TEACHER) == 0.5 > mean_step_match(direct, TEACHER) == 0.25
    assert mean_step_match(thinking, TEACHER, "skipped") == mean_step_match(direct, TEACHER, "skipped") == 0.25
    # against a teacher turn without a call, aligned gives it NEUTRAL; skipped gives it nothing
    assert mean_step_match([[FIND], []], [[FIND], []]) == (1 + NEUTRAL) / 2
    assert mean_step_match([[FIND], []], [[FIND], []], "skipped") == 0.5
    assert mean_step_match([[], []], TEACHER, "skipped") == 0.0
    # an unparseable turn (None) is an attempted call: it keeps its teacher step either way
    assert mean_step_match([None, [VIEW]], TEACHER, "skipped") == mean_step_match([None, [VIEW]], TEACHER) == 0.25
    with pytest.raises(ConfigError, match="callless='drop'"):
        mean_step_match([], TEACHER, "drop")  # type: ignore[arg-type]


def test_skipped_callless_turns_only_lower_the_match_and_leave_other_episodes_alone() -> None:
    rng = random.Random(7)
    pool: list[Any] = [[FIND], [VIEW], [REC], [TERM], [FIND, VIEW], None, [{"name": "find_product",
                                                                           "arguments": {"q": "shirt"}}]]
    for _ in range(300):
        teacher = [rng.choice([s for s in pool if s is not None] + [[]]) for _ in range(rng.randint(0, 5))]
        steps = [rng.choice(pool) for _ in range(rng.randint(0, 6))]
        # an episode without callless turns: the same float whichever rule
        assert mean_step_match(steps, teacher, "skipped") == mean_step_match(steps, teacher, "aligned")
        with_think = list(steps)
        for _ in range(rng.randint(1, 3)):
            with_think.insert(rng.randint(0, len(with_think)), [])
        assert mean_step_match(with_think, teacher, "skipped") <= mean_step_match(steps, teacher, "skipped")


def test_penalised_reward_takes_the_penalty_exactly_off_episodes_without_a_recommend() -> None:
    for reward in (0.0, 0.125, 0.3 + 0.6, 1.0):
        assert penalised_reward(reward, True, 0.5) == reward
        assert penalised_reward(reward, False, 0.5) == reward - 0.5
        for called in (True, False):
            assert penalised_reward(reward, called, 0.0) is reward  # no penalty: the blend itself
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="outside"):
            penalised_reward(0.5, False, bad)


def test_config_types_the_guard_and_trl_adds_the_penalty_with_weight_one(tmp_path: Path) -> None:
    cfg = GRPOConfig()
    assert (cfg.stop_penalty, cfg.callless_turns) == (0.5, "skipped")
    assert trl_config(cfg, tmp_path).reward_weights == [0.5, 0.5, 1.0] and len(REWARD_FUNCS) == 3
    assert parse_recipe("name: r\ngrpo:\n  stop_penalty: 0\n  callless_turns: aligned\n").grpo.stop_penalty == 0.0
    for bad, key in (("stop_penalty: 1.5", "stop_penalty"), ("stop_penalty: -0.1", "stop_penalty"),
                     ("stop_penalty: high", "stop_penalty"), ("stop_penalty: '0.5'", "stop_penalty"),
                     ("callless_turns: drop", "callless_turns"), ("stop_penalty_weight: 1", "stop_penalty_weight")):
        with pytest.raises(ConfigError, match=key) as info:
            parse_recipe(f"name: r\ngrpo:\n  {bad}\n")
        assert "grpo" in str(info.value)


def test_a_zero_penalty_column_leaves_trls_summed_rewards_bit_for_bit() -> None:
    """TRL sums the float32 reward columns times their weights (``nansum`` over the functions): the zero column of a
    0 penalty leaves every episode's reward, and so every advantage, as the two-column blend had it."""
    rng = random.Random(3)
    n = 64
    outcome = [float(rng.random() < 0.3) for _ in range(n)]
    match = [rng.random() for _ in range(n)]
    base = {"called_recommend": [rng.random() < 0.5 for _ in range(n)], "callless_turns": [0] * n,
            "think_then_stop_turns": [0] * n, "reward_before_penalty": [0.0] * n}
    column = stop_penalty_reward([None] * n, penalty=[0.0] * n, **base)
    assert column == [0.0] * n
    two = torch.tensor([outcome, match], dtype=torch.float32).T
    three = torch.tensor([outcome, match, column], dtype=torch.float32).T
    old = (two * torch.tensor([0.5, 0.5])).nansum(dim=1)
    new = (three * torch.tensor([0.5, 0.5, 1.0])).nansum(dim=1)
    assert torch.equal(old, new) and old.numpy().tobytes() == new.numpy().tobytes()
    logged: dict[str, float] = {}
    penalty = [0.0 if c else 0.5 for c in base["called_recommend"]]
    rewards = stop_penalty_reward([None] * n, penalty=penalty, log_metric=logged.__setitem__,
                                  **{**base, "callless_turns": [1] * n, "think_then_stop_turns": [2] * n,
                                     "reward_before_penalty": match})
    assert rewards == [-p for p in penalty]
    assert logged == {"rollout/episodes": n, "rollout/without_recommend": penalty.count(0.5),
                      "rollout/callless_turns": n, "rollout/think_then_stop_turns": 2 * n,
                      "rollout/reward_before_penalty": sum(match) / n,
                      "rollout/reward": sum(m - p for m, p in zip(match, penalty, strict=True)) / n}
    assert set(logged) == set(ROLLOUT_METRICS)


# -- scripted episodes through the player ---------------------------------------------------------------------------

class Scripted:
    """A :class:`~shoparena.train.rollout.TurnSampler` that answers episode ``e``'s turn ``t`` with ``turns[e][t]``
    (cut at the turn's budget, as every sampler cuts); it also records the budgets it was given."""

    def __init__(self, turns: list[list[list[int]]]) -> None:
        self.turns = turns
        self.started = 0

    def start(self, model: Any, episodes: int, context: int) -> None:
        assert episodes == len(self.turns)
        self.started += 1

    def sample(self, context: list[int], max_new: int, eos_ids: list[int], *, episode: int, turn: int,
               temperature: float, top_p: float) -> list[int]:
        return list(self.turns[episode][turn][:max_new])

    def stop(self) -> None:
        pass


def _call(name: str, arguments: Any) -> str:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def _scripts(tok: Any, row: dict[str, Any]) -> dict[str, list[list[int]]]:
    """The scripted episodes of ``row`` (its teacher: find, view, recommend, terminate), as sampled token ids."""
    eos = tok.eos_token_id
    gt = ",".join(row["gt_ids"])

    def turn(text: str, end: bool = True) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"]) + ([eos] if end else [])

    find = turn("<think>\nsearch\n</think>\n\n" + _call("find_product", row["reference_steps"][0][0]["arguments"]))
    recommend = turn("<think>\npick\n</think>\n\n" + _call("recommend_product", {"product_ids": gt}))
    think_stop = turn(f"<think>\nRecommending {gt}: it matches the fit and the price.\n</think>\n\n")
    musing = turn("<think>\nhmm\n</think>\n\nThe prices vary a lot.")
    return {
        "thinks_until_out_of_turns": [think_stop] * 4,
        "find_think_recommend": [find, think_stop, recommend],
        "find_recommend": [find, recommend],
        "find_muse_recommend": [find, musing, recommend],
        "terminates": [turn(_call("terminate", {"status": "success"}))],
        "empty_turn": [[eos]],
        "unparseable": [turn('<tool_call>\n{"name": "recommend_product", "arguments": \n</tool_call>')],
        "cut_by_tokens": [turn("The prices vary a lot. " * 60, end=False)],
    }


EXPECTED = {  # stop, called recommend, callless turns, think-then-stop turns
    "thinks_until_out_of_turns": ("max_turns", False, 4, 4),
    "find_think_recommend": ("recommend_product", True, 1, 1),
    "find_recommend": ("recommend_product", True, 0, 0),
    "find_muse_recommend": ("recommend_product", True, 1, 0),
    "terminates": ("terminate", False, 0, 0),
    "empty_turn": ("empty_output", False, 1, 0),
    "unparseable": ("empty_output", False, 0, 0),
    "cut_by_tokens": ("length", False, 1, 0),
}
SETTINGS = {"max_completion_length": 4000, "turn_max_tokens": 120, "temperature": 1.0, "top_p": 1.0}


def _play(tok: Any, env: RolloutEnv, row: dict[str, Any], **guard: Any) -> dict[str, TokenEpisode]:
    scripts = _scripts(tok, row)
    sampler = Scripted(list(scripts.values()))
    episodes = run_token_episodes(None, tok, env, [row] * len(scripts), sampler=sampler, **SETTINGS, **guard)
    assert sampler.started == 1
    return dict(zip(scripts, episodes, strict=True))


@pytest.fixture(scope="module")
def scripted(tiny_model: Path, rl_world: RLWorld) -> tuple[Any, RolloutEnv, dict[str, Any]]:
    from transformers import AutoTokenizer

    rows = rl_world.rows("grpo_train")
    row = rows[0]
    assert [[c["name"] for c in s] for s in row["reference_steps"]] == [
        ["find_product"], ["view_product_information"], ["recommend_product"], ["terminate"]]
    return AutoTokenizer.from_pretrained(tiny_model), RolloutEnv(rows, rl_world.catalog, max_turns=4), row


def test_the_penalty_applies_exactly_to_episodes_without_a_recommend(scripted: tuple[Any, RolloutEnv, dict]) -> None:
    tok, env, row = scripted
    played = _play(tok, env, row, stop_penalty=0.5, callless="skipped")
    for name, ep in played.items():
        _, called, callless, _ = EXPECTED[name]
        assert (ep.stop, ep.called_recommend, ep.callless_turns, ep.think_then_stop_turns) == EXPECTED[name], name
        assert sum(step == [] for step in ep.steps) == callless
        assert ep.penalty == (0.0 if called else 0.5)
        assert ep.reward == (ep.reward_before_penalty if called else ep.reward_before_penalty - 0.5)
        assert ep.reward_before_penalty == blended_reward(ep.outcome, ep.tool_match)
        assert ep.tool_match == mean_step_match(ep.steps, row["reference_steps"], "skipped")
    # a think-then-stop turn no longer moves the recommendation onto the teacher's
    assert played["find_think_recommend"].tool_match == played["find_recommend"].tool_match == 0.25
    assert played["find_muse_recommend"].reward == played["find_recommend"].reward
    assert played["find_recommend"].outcome == 1.0 and played["find_recommend"].reward == 0.625
    # an episode that only thinks gets nothing from its turns and loses the penalty
    assert played["thinks_until_out_of_turns"].tool_match == 0.0
    assert played["thinks_until_out_of_turns"].reward == -0.5
    assert min(e.reward for e in played.values() if not e.called_recommend) < min(
        e.reward for e in played.values() if e.called_recommend)
    # the think turns did not end the episode: each got only the next assistant header and the model went on
    thinking = played["thinks_until_out_of_turns"]
    assert len(thinking.steps) == 4 and thinking.observations == [[], [], [], []]


def test_no_penalty_and_aligned_turns_give_the_blend_float_for_float(scripted: tuple[Any, RolloutEnv, dict]) -> None:
    tok, env, row = scripted
    plain = _play(tok, env, row)  # run_token_episodes' defaults: the blend alone
    aligned = _play(tok, env, row, stop_penalty=0.0, callless="aligned")
    skipped = _play(tok, env, row, stop_penalty=0.0, callless="skipped")
    guarded = _play(tok, env, row, stop_penalty=0.5, callless="skipped")
    for name, ep in aligned.items():
        old = blended_reward(ep.outcome, mean_step_match(ep.steps, row["reference_steps"]))
        assert ep.reward == ep.reward_before_penalty == old and ep.penalty == 0.0
        assert plain[name].reward == old and plain[name].tool_match == ep.tool_match
        assert skipped[name].reward == skipped[name].reward_before_penalty == guarded[name].reward_before_penalty
        if not ep.callless_turns:  # the callless rule changes only episodes that have callless turns
            assert skipped[name].reward == old
    assert aligned["find_think_recommend"].tool_match == 0.5 > skipped["find_think_recommend"].tool_match
    for bad in ({"stop_penalty": 2.0}, {"callless": "drop"}):
        with pytest.raises(ConfigError):
            _play(tok, env, row, **bad)


def test_both_samplers_count_and_score_alike(overfit_model: Path, rl_world: RLWorld) -> None:
    """The transformers lockstep path's episodes (greedy and seeded sampling), replayed token for token through the
    per-episode turn loop that the llama.cpp sampler drives, are the same episodes with the same counts and rewards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = rl_world.rows("grpo_train")
    env = RolloutEnv(rows, rl_world.catalog, max_turns=3)
    tok = AutoTokenizer.from_pretrained(overfit_model)
    model = AutoModelForCausalLM.from_pretrained(overfit_model).eval()
    guard = {"stop_penalty": 0.5, "callless": "skipped"}
    settings = {"max_completion_length": 1536, "turn_max_tokens": 64, "top_p": 1.0}
    torch.manual_seed(5)
    hf = run_token_episodes(model, tok, env, [rows[0]] * 5, temperature=1.0, **settings, **guard)
    hf += run_token_episodes(model, tok, env, [rows[0]], temperature=0.0, **settings, **guard)
    turns = [[ids for bit, ids in mask_spans(e.completion_ids, e.env_mask) if bit == 1] for e in hf]
    replayed = run_token_episodes(model, tok, env, [rows[0]] * len(hf), temperature=1.0, sampler=Scripted(turns),
                                  **settings, **guard)
    fields = ("prompt_ids", "completion_ids", "env_mask", "steps", "outcome", "tool_match", "reward", "stop",
              "recommended", "reward_before_penalty", "penalty", "called_recommend", "callless_turns",
              "think_then_stop_turns")
    for a, b in zip(hf, replayed, strict=True):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
        assert a.penalty == (0.0 if a.called_recommend else 0.5)
        assert a.callless_turns == sum(step == [] for step in a.steps) >= a.think_then_stop_turns


def test_llamacpp_episodes_are_guarded_like_any_other(rl_world: RLWorld, tmp_path: Path) -> None:
    """Episodes sampled by the real llama.cpp sampler (a tiny llama checkpoint, seeded draws) carry the guard's
    counts and penalty, and replaying their turns gives the same episodes: the sampler changes who draws the tokens,
    not how an episode is scored."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.llm.models import prepare_gguf, spec_with_path
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf
    from shoparena.train.rollout_llamacpp import LlamaCppSampler

    gguf, _ = build_tiny_llama_gguf(tmp_path / "tiny.gguf", quant="F32", layers=2, vocab_size=1024, context=8192)
    model_dir = tmp_path / "smol"
    prepare_gguf(spec_with_path("smollm2-135m", gguf), model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
    rows = rl_world.rows("grpo_train")
    env = RolloutEnv(rows, rl_world.catalog, max_turns=2)
    guard = {"stop_penalty": 0.5, "callless": "skipped"}
    settings = {"max_completion_length": 600, "turn_max_tokens": 48, "temperature": 1.0, "top_p": 1.0}
    sampler = LlamaCppSampler(model_dir, tmp_path / "work", dtype="F32", seed=1, threads=1)
    try:
        played = run_token_episodes(model, tok, env, rows[:2] * 2, sampler=sampler, **settings, **guard)
    finally:
        sampler.close()
    assert sampler.stats and sampler.stats[0]["generated_tokens"] > 0
    for ep in played:
        assert ep.penalty == (0.0 if ep.called_recommend else 0.5)
        assert ep.reward == ep.reward_before_penalty - ep.penalty
        assert ep.callless_turns == sum(step == [] for step in ep.steps) >= ep.think_then_stop_turns
    assert sum(ep.penalty for ep in played) > 0  # noise never recommends: the penalty is exercised
    turns = [[ids for bit, ids in mask_spans(e.completion_ids, e.env_mask) if bit == 1] for e in played]
    replayed = run_token_episodes(model, tok, env, rows[:2] * 2, sampler=Scripted(turns), **settings, **guard)
    fields = ("completion_ids", "steps", "stop", "reward", "reward_before_penalty", "penalty", "called_recommend",
              "callless_turns", "think_then_stop_turns")
    assert [[getattr(e, f) for f in fields] for e in replayed] == [[getattr(e, f) for f in fields] for e in played]



# -- the stage records the guard per step ---------------------------------------------------------------------------

def test_train_grpo_records_the_guard_per_step(overfit_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    rows = rl_world.rows("grpo_train")[:1]
    cfg = GRPOConfig(num_generations=2, batch_size=2, max_steps=2, max_turns=1, save_steps=2,
                     max_completion_length=1200, turn_max_tokens=64, temperature=1.0, top_p=1.0)
    res = train_grpo(overfit_model, rows, cfg, tmp_path / "out", catalog_dir=rl_world.catalog)
    m = res.metrics
    stage = json.loads((tmp_path / "out" / "stage.json").read_text())
    assert stage["metrics"]["rollout_steps"] == m["rollout_steps"]
    steps = m["rollout_steps"]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["episodes"] == 2 for s in steps)
    assert sum(s["without_recommend"] for s in steps) == m["episodes_without_recommend"]
    assert sum(s["callless_turns"] for s in steps) == m["callless_turns"]
    assert sum(s["think_then_stop_turns"] for s in steps) == m["think_then_stop_turns"]
    assert m["episodes"] == 4
    assert m["reward_mean"] == pytest.approx(m["reward_before_penalty_mean"] - 0.5 * m["episodes_without_recommend"] / 4)
    for s in steps:
        assert s["reward"] == pytest.approx(s["reward_before_penalty"] - 0.5 * s["without_recommend"] / 2, abs=1e-6)
    # the trainer's own reward (the weighted sum of its three columns) is the penalised one, step by step
    log = json.loads((tmp_path / "out" / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    trl_steps = [e for e in log["log_history"] if "reward" in e]
    assert len(trl_steps) == 2
    for entry, s in zip(trl_steps, steps, strict=True):
        assert entry["reward"] == pytest.approx(s["reward"], abs=1e-6)
        assert entry["rewards/stop_penalty_reward/mean"] == pytest.approx(-0.5 * s["without_recommend"] / 2)
