"""Stage 5, Dr. GRPO with a multi-turn rollout_func (docs/training.md §3, §4.4): the config pins the Dr. GRPO settings
(bug #12), episodes run token in / token out over the real environment with tool-result tokens masked, rewards
vary across the K rollouts of a prompt, and a short TRL run gives finite losses and a merged checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from shoparena.errors import DataError, NotFoundError
from shoparena.train.grpo import GRPOConfig, headroom_problems, train_grpo, trl_config
from shoparena.train.reward import blended_reward, mean_step_match
from shoparena.train.rollout import RolloutEnv, run_token_episode, run_token_episodes, tool_suffix_ids
from tests.train.rl_fixtures import mask_spans

if TYPE_CHECKING:
    from tests.train.rl_fixtures import RLWorld

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus / tiny-model fixtures

torch.set_num_threads(1)
EPISODE = {"max_completion_length": 1536, "turn_max_tokens": 64, "temperature": 1.0, "top_p": 1.0}


def test_config_is_dr_grpo(tmp_path: Path) -> None:
    cfg = GRPOConfig()
    args = trl_config(cfg, tmp_path)
    assert (args.loss_type, args.scale_rewards, args.beta, args.learning_rate) == ("dr_grpo", "none", 0.2, 5e-7)
    assert args.disable_dropout is True and args.num_generations == cfg.num_generations
    assert (args.temperature, args.top_p, args.max_completion_length) == (1.0, 1.0, cfg.max_completion_length)
    assert args.reward_weights == [0.5, 0.5, 1.0] and cfg.w == 0.5 and cfg.max_turns <= 25
    assert args.use_cpu is not torch.cuda.is_available() and args.bf16 is torch.cuda.is_available()
    assert args.output_dir == str(tmp_path / "checkpoints")
    for bad in ({"loss_type": "dapo"}, {"scale_rewards": "group"}, {"disable_dropout": False}, {"max_turns": 30},
                {"num_generations": 4, "batch_size": 6}, {"num_generations": 4, "batch_size": 1, "grad_accum": 2}):
        with pytest.raises(ValueError):
            GRPOConfig(**bad)
    with pytest.raises(ValueError, match="distinct registered tool names"):
        GRPOConfig(tools=("find_product", "find_product"))
    # micro-batches of one episode, K of them accumulated: still one generation batch of K a step
    micro = trl_config(GRPOConfig(num_generations=4, batch_size=1, grad_accum=4), tmp_path)
    assert (micro.per_device_train_batch_size, micro.gradient_accumulation_steps) == (1, 4)
    assert (micro.generation_batch_size, micro.steps_per_generation) == (4, 4)


def _episodes(model_dir: Path, world: RLWorld, n: int, seed: int = 0,
              temperature: float = 1.0) -> tuple[list, RolloutEnv, dict, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = world.rows("grpo_train")
    env = RolloutEnv(rows, world.catalog, max_turns=4)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(seed)
    settings = {**EPISODE, "temperature": temperature}
    return run_token_episodes(model, tok, env, [rows[0]] * n, **settings), env, rows[0], tok


def test_env_mask_masks_exactly_the_tool_results(overfit_model: Path, rl_world: RLWorld) -> None:
    greedy, _, _, tok = _episodes(overfit_model, rl_world, 1, temperature=0.0)
    sampled, *_ = _episodes(overfit_model, rl_world, 4)
    episodes = greedy + sampled
    with_tools = [e for e in episodes if any(e.observations)]
    assert any(greedy[0].observations), "the greedy episode did not reach a tool result"
    for ep in episodes:
        assert len(ep.env_mask) == len(ep.completion_ids)
        spans = mask_spans(ep.completion_ids, ep.env_mask)
        model_spans = [ids for bit, ids in spans if bit == 1]
        tool_spans = [ids for bit, ids in spans if bit == 0]
        assert len(model_spans) == len(ep.steps)  # one sampled span per assistant turn
        assert len(tool_spans) in (len(model_spans), len(model_spans) - 1)
        for ids in model_spans[:len(tool_spans)]:  # every turn that got a tool result ended its turn itself
            assert ids[-1] == tok.eos_token_id
        for ids, obs in zip(tool_spans, ep.observations, strict=True):
            text = tok.decode(ids)
            if not obs:  # a turn without calls gets no observation: only the next assistant header
                assert text == "\n<|im_start|>assistant\n"
                continue
            assert text.startswith("\n<|im_start|>user\n<tool_response>\n") and text.endswith(
                "</tool_response><|im_end|>\n<|im_start|>assistant\n")
        for ids in model_spans:
            assert "<tool_response>" not in tok.decode(ids)
    # each tool span is exactly the template's rendering of the environment's observation of that turn
    for ep in with_tools:
        tool_spans = [ids for bit, ids in mask_spans(ep.completion_ids, ep.env_mask) if bit == 0]
        assert tool_spans == [tool_suffix_ids(tok, obs) for obs in ep.observations]
        first = next(obs for obs in ep.observations if obs)[0]
        assert first["role"] == "tool" and isinstance(json.loads(first["content"]), (list, dict, str))


def test_episodes_see_the_served_rendering_system_turn_and_compacted_results(overfit_model: Path,
                                                                             rl_world: RLWorld) -> None:
    """A checkpoint trained under the harness's system turn and a compaction is rolled out as it is served: the
    prompt carries the system turn, every tool span renders the compacted observation; the environment keeps the
    whole results (the same greedy calls reach the same recommendation and reward)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.env.prompts import NATIVE
    from shoparena.llm.compact import CompactConfig
    from shoparena.train.format import with_system
    from shoparena.train.rollout import render_prompt_ids

    rows = rl_world.rows("grpo_train")
    tok = AutoTokenizer.from_pretrained(overfit_model)
    model = AutoModelForCausalLM.from_pretrained(overfit_model).eval()
    compact = CompactConfig(max_items=1, max_chars=120)
    greedy = {**EPISODE, "temperature": 0.0}
    served = RolloutEnv(rows, rl_world.catalog, max_turns=4, compact=compact)
    ep = run_token_episode(model, tok, served, rows[0], **greedy)
    observed = [m for obs in ep.observations for m in obs]
    assert observed and all(len(m["content"]) <= 120 for m in observed)
    tool_spans = [ids for bit, ids in mask_spans(ep.completion_ids, ep.env_mask) if bit == 0]
    assert tool_spans == [tool_suffix_ids(tok, obs) for obs in ep.observations]
    plain = run_token_episode(model, tok, RolloutEnv(rows, rl_world.catalog, max_turns=4), rows[0], **greedy)
    assert max(len(m["content"]) for obs in plain.observations for m in obs) > 120  # whole results by default
    assert NATIVE not in tok.decode(plain.prompt_ids)
    harness = RolloutEnv(rows, rl_world.catalog, max_turns=1, system="harness", compact=compact)
    first = run_token_episode(model, tok, harness, rows[0], **greedy)
    assert first.prompt_ids == render_prompt_ids(tok, with_system(rows[0]["prompt"], "harness"), rows[0]["tools"])
    assert NATIVE in tok.decode(first.prompt_ids)


def test_rewards_vary_across_k_rollouts(overfit_model: Path, rl_world: RLWorld) -> None:
    episodes, _, row, _ = _episodes(overfit_model, rl_world, 8)
    rewards = [e.reward for e in episodes]
    assert len(set(rewards)) > 1, rewards
    for e in episodes:
        assert e.outcome in (0.0, 1.0)
        assert e.tool_match == pytest.approx(mean_step_match(e.steps, row["reference_steps"]))
        assert e.reward == pytest.approx(blended_reward(e.outcome, e.tool_match))
    # a recommendation of exactly the GT product is a strict success, anything else is not
    for e in episodes:
        assert e.outcome == float(e.recommended == ",".join(row["gt_ids"]))


def test_same_seed_same_episodes_and_batch_matches_single(overfit_model: Path, rl_world: RLWorld) -> None:
    from transformers import AutoModelForCausalLM

    a, *_ = _episodes(overfit_model, rl_world, 3, seed=3)
    b, *_ = _episodes(overfit_model, rl_world, 3, seed=3)
    assert [e.completion_ids for e in a] == [e.completion_ids for e in b]
    # greedy: the lockstep batch plays the same episode as one played alone
    batch, env, row, tok = _episodes(overfit_model, rl_world, 2, temperature=0.0)
    model = AutoModelForCausalLM.from_pretrained(overfit_model).eval()
    alone = run_token_episode(model, tok, env, row,
                              **{**EPISODE, "temperature": 0.0})
    assert batch[0].completion_ids == batch[1].completion_ids == alone.completion_ids


def test_train_grpo_steps_and_resume(overfit_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    from transformers import TrainerCallback

    class Kill(TrainerCallback):  # stands in for a kill right after the step-1 checkpoint
        def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            control.should_training_stop = True
            return control

    rows = rl_world.rows("grpo_train")[:1]
    # room for one find_product observation (~1,060 tiny-tokenizer tokens) and one more turn
    # micro-batches of one episode with K accumulated (the CPU recipe's memory bound): 4 episodes a step
    cfg = GRPOConfig(num_generations=4, batch_size=1, grad_accum=4, max_steps=2, max_turns=2, save_steps=1,
                     **{**EPISODE, "max_completion_length": 1200})
    full = train_grpo(overfit_model, rows, cfg, tmp_path / "full", catalog_dir=rl_world.catalog)
    m = full.metrics
    assert full.steps == 2 and m["loss_finite"] and m["episodes"] == 8
    assert m["frac_reward_zero_std_first"] < 1 or m["frac_reward_zero_std_last"] < 1  # reward variance in a group
    assert full.tokens_trained > 0
    assert (tmp_path / "full" / "model" / "model.safetensors").is_file()
    assert not (tmp_path / "full" / "model" / "adapter_config.json").exists()  # merged
    assert json.loads((tmp_path / "full" / "stage.json").read_text())["checkpoint_sha256"] == full.checkpoint_sha256
    assert full.checkpoint_sha256 != _sha(overfit_model)

    part = train_grpo(overfit_model, rows, cfg, tmp_path / "part", catalog_dir=rl_world.catalog, callbacks=[Kill()])
    assert part.steps == 1
    resumed = train_grpo(overfit_model, rows, cfg, tmp_path / "part", catalog_dir=rl_world.catalog, resume=True)
    assert resumed.resumed_from is not None and resumed.resumed_from.endswith("checkpoint-1")
    assert resumed.steps == 2
    assert resumed.checkpoint_sha256 == full.checkpoint_sha256


def _run_dir(root: Path, outcomes: dict[str, list[bool]]) -> Path:
    """A harness run directory's ``runs.jsonl`` (the records ``run_agents`` writes, one per sample)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"problem_id": pid, "sample": i, "status": "SUCCESS", "error": None, "seconds": 1.0,
                         "steps": 3, "calls": 4, "success": ok})
             for pid, oks in outcomes.items() for i, ok in enumerate(oks)]
    (root / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_headroom_keeps_problems_solved_sometimes(tmp_path: Path) -> None:
    """docs/training.md §3 (stage 5 converts pass@k headroom): solved at least once, and at most max_success_rate."""
    run = _run_dir(tmp_path / "run", {"once": [True], "never": [False, False], "half": [False, True],
                                      "always": [True, True]})
    room = headroom_problems(run)
    assert room.problems == ("always", "half", "once")
    assert room.samples == {"once": 1, "never": 2, "half": 2, "always": 2} and room.solved["half"] == 1
    assert headroom_problems(run, max_success_rate=0.75).problems == ("half",)
    _run_dir(tmp_path / "run", {"once": [True], "never": [False, True]})
    assert headroom_problems(run).sha256 != room.sha256  # the record says which run it read
    with pytest.raises(NotFoundError, match=r"runs\.jsonl missing"):
        headroom_problems(tmp_path / "nowhere")
    for bad in ('{"problem_id": "x", "sample": 0, "success": "yes"}', "[1, 2]", "not json",
                '{"sample": 0, "success": true}', '{"problem_id": "x", "success": true}'):
        (run / "runs.jsonl").write_text('{"problem_id": "a", "sample": 0, "success": true}\n\n' + bad + "\n")
        with pytest.raises(DataError, match=r"line 3 is not (JSON|a run record)"):
            headroom_problems(run)
    with pytest.raises(ValueError):
        GRPOConfig(max_success_rate=0)


def test_train_grpo_prompts_only_from_the_headroom(overfit_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    rows = rl_world.rows("grpo_train")
    ids = [r["problem_id"] for r in rows]
    assert len(set(ids)) == len(ids) > 1
    run = _run_dir(tmp_path / "run", {ids[0]: [False, True], ids[1]: [False, False], "eval:not-a-train-row": [True]})
    cfg = GRPOConfig(num_generations=2, batch_size=2, max_steps=1, max_turns=1, save_steps=1, prompts_from=str(run),
                     **{**EPISODE, "max_completion_length": 1200})
    res = train_grpo(overfit_model, rows, cfg, tmp_path / "out", catalog_dir=rl_world.catalog)
    m = res.metrics
    assert m["prompts"] == 1 and m["headroom_problems"] == 2 and m["rows_outside_headroom"] == len(rows) - 1
    assert m["episodes"] == 2 and m["prompts_from_sha256"] == headroom_problems(run).sha256
    _run_dir(run, {ids[1]: [False], "eval:not-a-train-row": [True]})  # no train problem with headroom: no run
    with pytest.raises(DataError, match="none of its 1 problems with headroom"):
        train_grpo(overfit_model, rows, cfg, tmp_path / "none", catalog_dir=rl_world.catalog)
    assert not (tmp_path / "none" / "checkpoints").exists()


def _sha(path: Path) -> str:
    from shoparena.train.checkpoint import checkpoint_sha256

    return checkpoint_sha256(path)

