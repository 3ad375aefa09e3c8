"""Stage 5: Dr. GRPO through TRL's ``GRPOTrainer`` with a multi-turn ``rollout_func`` (``docs/training.md`` §3, §4.4).

Each optimiser step takes ``batch_size × grad_accum / num_generations`` GRPO rows (one generation batch a step); TRL
hands :func:`make_rollout_func`'s function the prompts already repeated K times, and it plays one token-in/token-out
episode per entry over the real environment (:mod:`shoparena.train.rollout`) with the trainer's own model in
``eval()`` mode (train mode restored after). It returns ``prompt_ids``, ``completion_ids``, ``logprobs=None``,
``env_mask`` (tool-result tokens 0, out of the loss) and per-episode ``outcome`` / ``tool_match`` / ``penalty``,
which three reward functions pass through (:data:`REWARD_FUNCS`); TRL combines them with
``reward_weights = [1 − w, w, 1]``, i.e. the reward ``(1 − w)·outcome + w·tool_match − penalty``.

The stop guard (``stop_penalty``, ``callless_turns``): ``penalty`` is ``stop_penalty`` (0.5 in the recipe) for an
episode that ends without a ``recommend_product`` call — it stopped on an empty turn, ran out of turns or tokens, or
called ``terminate`` without recommending — and 0 otherwise, so the reward stays a pure function of the episode
(:func:`~shoparena.train.reward.penalised_reward`). A turn without a tool call (a think or text turn, the
"think-then-stop" shape: a decision stated in the reasoning and never made) scores 0 in the step match and, with
``callless_turns: skipped``, takes no teacher step, so it never raises an episode's reward
(:func:`~shoparena.train.reward.mean_step_match`). ``stop_penalty: 0`` with ``callless_turns: aligned`` gives the
blend alone, float for float. Every rollout logs, with the step's TRL metrics (the stage log, ``log_history``,
``stage.json``'s ``rollout_steps``): its episodes, those without a recommend, callless turns, think-then-stop turns
(callless turns that state a recommendation decision) and the mean reward before and after the penalty
(:data:`ROLLOUT_METRICS`), whichever sampler played them.

Dr. GRPO is ``loss_type="dr_grpo"`` + ``scale_rewards="none"`` (no group-std scaling), with the recipe's β 0.2,
learning rate 5e-7 and ``disable_dropout=True``; :func:`trl_config` builds the TRL config (on
:func:`shoparena.train.trainer.trainer_args`, what every stage's TRL config starts from) and is what the config test
pins (docs/training.md §7 bug #12). LoRA (r 16, all linear layers by default) with the adapter-disabled model as the
reference; the adapter is merged into ``out_dir/model``; checkpoints under ``out_dir/checkpoints`` for ``resume``.
``sampler: llamacpp`` samples the turns from an exported copy of the current policy (LoRA merged, F16 by default)
through llama.cpp's batched engine, each episode in its own thread (:mod:`shoparena.train.rollout_llamacpp`), as TRL
does with vLLM; the loss's log-probs are still the training model's. Episodes see what the served checkpoint sees:
its compaction of tool results, and (``system="harness"``) the harness's system turn; ``tools`` keeps one tool
profile of the rows.

``prompts_from`` points stage 5 at the model's pass@k headroom (the paper's stage 5 "converts pass@k headroom into
process improvement", docs/training.md §3): a harness run of the input model over the train problems (stage 2's
``rs/samples``, or ``shoparena run --out``) keeps only the problems it solved at least once and in at most
``max_success_rate`` of its samples — a group of K episodes on a problem the model never solves carries no outcome
signal, and one it always solves carries none either (:func:`headroom_problems`).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.train.reward import Callless
from shoparena.train.trainer import StageProgress
from shoparena.train.types import LearningRate, LoraConfig, StageConfig, StageResult, ToolProfile

__all__ = ["REWARD_FUNCS", "ROLLOUT_METRICS", "SAMPLER_DIR", "GRPOConfig", "Headroom", "headroom_problems",
           "make_rollout_func", "outcome_reward", "stop_penalty_reward", "tool_match_reward", "train_grpo",
           "trl_config"]

SAMPLER_DIR = "sampler"
"""Under the stage's out dir: the llama.cpp sampler's per-step GGUF of the policy (removed when the stage ends)."""


class GRPOConfig(StageConfig):
    """Stage 5's settings; the defaults are the recipe's (``docs/training.md`` §3 row 5, variant v19)."""

    learning_rate: LearningRate = 5e-7
    loss_type: Literal["dr_grpo"] = "dr_grpo"
    scale_rewards: Literal["none"] = "none"
    beta: float = Field(0.2, ge=0)
    disable_dropout: Literal[True] = True
    num_generations: int = Field(8, ge=2)
    """K rollouts per prompt."""
    batch_size: int = Field(8, ge=1)
    """Completions per forward pass on one device. One optimiser step trains ``batch_size × grad_accum``
    completions, played as one generation batch: a multiple of ``num_generations`` (a CPU recipe takes micro-batches
    of 1 with ``grad_accum`` K, so the loss never holds more than one episode's logits)."""
    max_turns: int = Field(25, ge=1, le=25)
    """Assistant turns per episode (the paper's ≤ 25 steps)."""
    max_completion_length: int = Field(2048, ge=8)
    """Whole-episode token budget (sampled + tool-result tokens) and the Dr. GRPO loss normaliser."""
    turn_max_tokens: int = Field(512, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    w: float = Field(0.5, ge=0, le=1)
    """Weight of the mean step tool-match in the reward."""
    stop_penalty: float = Field(0.5, ge=0, le=1)
    """Taken off the reward of an episode that ends without a ``recommend_product`` call (it stopped on an empty
    turn, ran out of turns or tokens, or terminated without recommending); 0 turns the penalty off. Such an episode
    has outcome 0, so at w 0.5 its blend is at most 0.5 and a penalty of 0.5 puts it at or below every episode that
    recommends."""
    callless_turns: Callless = "skipped"
    """How the step match treats a turn without a tool call: ``skipped`` — it scores 0 and takes no teacher step
    (it still counts as a turn), so it can never raise the match; ``aligned`` — compared by position like any turn,
    which lets it score ``NEUTRAL`` against a teacher turn without a call and shift later calls onto the teacher's
    (:mod:`shoparena.train.reward`)."""
    lora: LoraConfig | None = Field(default_factory=lambda: LoraConfig(r=16, alpha=32, dropout=0.0))
    system: Literal["row", "harness"] = "row"
    """``harness``: episodes are prompted behind the harness's native system turn, as ``react`` episodes are (SFT's
    ``system``); tool results are always shown compacted as the input checkpoint was trained and is served."""
    tools: ToolProfile = None
    """Only rows that offer exactly these tools (SFT's ``tools``)."""
    prompts_from: str | None = None
    """A harness run directory (its ``runs.jsonl``) of the input model on the train problems: only the problems it
    solved at least once and in at most ``max_success_rate`` of its samples become prompts (module docstring). In a
    recipe, ``{out}`` stands for the run's output directory: ``{out}/rs/samples`` is stage 2's sampling in the run."""
    max_success_rate: float = Field(1.0, gt=0, le=1)
    sampler: Literal["hf", "llamacpp"] = "hf"
    """Who samples the episodes' turns: ``hf`` — the training model through transformers ``generate`` (lockstep
    batches); ``llamacpp`` — an exported copy of the current policy through llama.cpp's batched engine, each episode
    in its own thread (:mod:`shoparena.train.rollout_llamacpp`: several times faster on a CPU; llama checkpoints;
    log-probs still come from the training model)."""
    sampler_dtype: Literal["F32", "F16", "Q8_0"] = "F16"
    """The exported copy's weight type (``llamacpp``): F16 is close to the policy, F32 exact and slower."""
    sampler_threads: int | None = Field(None, ge=1)
    """llama.cpp decode threads (``llamacpp``); default: torch's thread count."""
    sampler_mode: Literal["batched", "slots"] = "batched"
    """How the episodes share llama.cpp (``llamacpp``): ``batched`` — one engine batching every episode's turns
    (faster; the text can change with what else is in the batch, so two runs of one seed may train other weights);
    ``slots`` — an engine per episode, one thread each unless ``sampler_threads`` says otherwise, so a run repeats
    its rollouts and its checkpoint byte for byte (:mod:`shoparena.train.rollout_llamacpp`)."""
    # ``max_length`` (from StageConfig) is not used by this stage: an episode's budget is max_completion_length.

    @model_validator(mode="after")
    def _groups(self) -> GRPOConfig:
        per_step = self.batch_size * self.grad_accum
        if per_step % self.num_generations:
            raise ValueError(f"batch_size × grad_accum = {per_step} is not a multiple of num_generations "
                             f"{self.num_generations} (each prompt's K rollouts share one step)")
        return self


@dataclass(frozen=True)
class Headroom:
    """What :func:`headroom_problems` read from a harness run."""

    problems: tuple[str, ...]
    """The kept problem ids, sorted."""
    samples: dict[str, int]
    solved: dict[str, int]
    sha256: str
    """Of the ``runs.jsonl`` read."""


def headroom_problems(run_dir: str | Path, max_success_rate: float = 1.0) -> Headroom:
    """The problems a harness run solved at least once and in at most ``max_success_rate`` of its samples, read from
    ``run_dir/runs.jsonl`` (one ``{"problem_id": str, "success": bool, ...}`` per sample). A missing file is a
    :class:`NotFoundError`; a line that is not such an object, a :class:`DataError` naming its line."""
    path = Path(run_dir) / "runs.jsonl"
    if not path.is_file():
        raise NotFoundError(f"grpo.prompts_from: no harness run at {run_dir} (runs.jsonl missing)",
                            hint="point it at stage 2's rs/samples or a `shoparena run --out` directory")
    from shoparena.validator.run import run_records

    data = path.read_bytes()
    samples: Counter[str] = Counter()
    solved: Counter[str] = Counter()
    for rec in run_records(data, path):
        samples[rec["problem_id"]] += 1
        solved[rec["problem_id"]] += rec["success"]
    keep = sorted(p for p, k in samples.items() if solved[p] and solved[p] / k <= max_success_rate)
    return Headroom(problems=tuple(keep), samples=dict(samples), solved=dict(solved),
                    sha256=hashlib.sha256(data).hexdigest())


def _in_headroom(rows: list[dict[str, Any]], config: GRPOConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if config.prompts_from is None:
        return rows, {}
    room = headroom_problems(config.prompts_from, config.max_success_rate)
    keep = set(room.problems)
    kept = [r for r in rows if r.get("problem_id") in keep]
    if not kept:
        raise DataError(f"grpo.prompts_from {config.prompts_from}: none of its {len(keep)} problems with headroom "
                        f"(solved at least once, in at most {config.max_success_rate:.0%} of their samples) is "
                        f"among the {len(rows)} GRPO rows", hint="sample the corpus's train problems with the input model")
    return kept, {"prompts_from": config.prompts_from, "prompts_from_sha256": room.sha256,
                  "headroom_problems": len(keep), "rows_outside_headroom": len(rows) - len(kept)}


def trl_config(config: GRPOConfig, out_dir: Path) -> Any:
    """The TRL ``GRPOConfig`` of a stage config (Dr. GRPO settings, CPU/GPU precision, checkpoints)."""
    from trl import GRPOConfig as TRLGRPOConfig

    from shoparena.train.trainer import trainer_args

    return TRLGRPOConfig(
        **trainer_args(config, Path(out_dir)), loss_type=config.loss_type, scale_rewards=config.scale_rewards,
        beta=config.beta, disable_dropout=config.disable_dropout, num_generations=config.num_generations,
        max_completion_length=config.max_completion_length, temperature=config.temperature, top_p=config.top_p,
        reward_weights=[1.0 - config.w, config.w, 1.0], max_tool_calling_iterations=config.max_turns,
        shuffle_dataset=True, log_completions=False,
    )


def outcome_reward(completions: Sequence[Any], outcome: Sequence[float], **_: Any) -> list[float]:
    """Strict rule success of each episode's final recommendation (from the rollout)."""
    return [float(x) for x in outcome]


def tool_match_reward(completions: Sequence[Any], tool_match: Sequence[float], **_: Any) -> list[float]:
    """Each episode's mean per-step teacher tool-match (from the rollout)."""
    return [float(x) for x in tool_match]


ROLLOUT_METRICS = ("rollout/episodes", "rollout/without_recommend", "rollout/callless_turns",
                   "rollout/think_then_stop_turns", "rollout/reward_before_penalty", "rollout/reward")
"""What every rollout logs with its step's metrics (module docstring): counts over the rollout's episodes, and the
mean reward before and after the stop penalty."""


def stop_penalty_reward(completions: Sequence[Any], penalty: Sequence[float], called_recommend: Sequence[bool],
                        callless_turns: Sequence[int], think_then_stop_turns: Sequence[int],
                        reward_before_penalty: Sequence[float], log_metric: Callable[[str, float], None] | None = None,
                        **_: Any) -> list[float]:
    """Minus each episode's stop penalty (weight 1; from the rollout), and the rollout's :data:`ROLLOUT_METRICS`
    through TRL's ``log_metric`` (one rollout a step: the step's values)."""
    rewards = [0.0 - float(p) for p in penalty]
    if log_metric is not None and rewards:
        n = len(rewards)
        for name, value in zip(ROLLOUT_METRICS, (
                n, sum(not c for c in called_recommend), sum(callless_turns), sum(think_then_stop_turns),
                sum(reward_before_penalty) / n,
                sum(b + r for b, r in zip(reward_before_penalty, rewards, strict=True)) / n), strict=True):
            log_metric(name, float(value))
    return rewards


REWARD_FUNCS = (outcome_reward, tool_match_reward, stop_penalty_reward)
"""The stage's reward functions, in the order of :func:`trl_config`'s ``reward_weights``."""


def make_rollout_func(env: Any, tokenizer: Any, config: GRPOConfig, log: list[dict[str, Any]] | None = None, *,
                      sampler: Any = None) -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's ``rollout_func(prompts, trainer)`` over :class:`~shoparena.train.rollout.RolloutEnv` ``env``;
    per-episode summaries are appended to ``log`` when given. ``sampler``: a
    :class:`~shoparena.train.rollout.TurnSampler` (``config.sampler: llamacpp``), told the trainer's global step
    before each rollout (its draws' seeds); None samples with the training model."""
    from shoparena.train.rollout import run_token_episodes

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.model
        was_training = model.training
        model.eval()
        if sampler is not None:
            sampler.step = int(trainer.state.global_step)
        try:
            episodes = run_token_episodes(model, tokenizer, env, [env.row(p) for p in prompts],
                                          max_completion_length=config.max_completion_length,
                                          turn_max_tokens=config.turn_max_tokens, temperature=config.temperature,
                                          top_p=config.top_p, w=config.w, sampler=sampler,
                                          stop_penalty=config.stop_penalty, callless=config.callless_turns)
        finally:
            if was_training:
                model.train()
        if log is not None:
            log.extend({"step": int(trainer.state.global_step), "turns": len(e.steps), "stop": e.stop,
                        "outcome": e.outcome, "tool_match": e.tool_match, "reward": e.reward,
                        "reward_before_penalty": e.reward_before_penalty, "penalty": e.penalty,
                        "called_recommend": e.called_recommend, "callless_turns": e.callless_turns,
                        "think_then_stop_turns": e.think_then_stop_turns,
                        "completion_tokens": len(e.completion_ids), "model_tokens": sum(e.env_mask)}
                       for e in episodes)
        return {"prompt_ids": [e.prompt_ids for e in episodes], "completion_ids": [e.completion_ids for e in episodes],
                "logprobs": None, "env_mask": [e.env_mask for e in episodes],
                "outcome": [e.outcome for e in episodes], "tool_match": [e.tool_match for e in episodes],
                "penalty": [e.penalty for e in episodes], "called_recommend": [e.called_recommend for e in episodes],
                "callless_turns": [e.callless_turns for e in episodes],
                "think_then_stop_turns": [e.think_then_stop_turns for e in episodes],
                "reward_before_penalty": [e.reward_before_penalty for e in episodes]}

    return rollout


def train_grpo(model_dir: Path, grpo_rows: Iterable[dict[str, Any]], config: GRPOConfig, out_dir: Path, *,
               catalog_dir: Path, resume: bool = False, callbacks: Sequence[Any] = (),
               progress: StageProgress | None = None) -> StageResult:
    """Run stage 5 (module docstring) over the corpus's ``grpo.jsonl`` rows and the catalog they were built on;
    return its :class:`StageResult` (also ``out_dir/stage.json``). ``callbacks`` are extra ``TrainerCallback`` s;
    ``progress`` a bar over the optimiser steps."""
    from shoparena.train.checkpoint import (
        import_torch_stack,
        last_checkpoint,
        load_model,
        loss_metrics,
        peft_config,
        save_stage,
    )
    from shoparena.train.rollout import RolloutEnv
    from shoparena.train.trainer import quiet, quiet_datasets, trainer_callbacks

    import_torch_stack()
    quiet_datasets()
    from datasets import Dataset
    from trl import GRPOTrainer

    started = time.perf_counter()
    if config.sampler == "llamacpp":
        from shoparena.train.rollout_llamacpp import require_llamacpp

        require_llamacpp(model_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not Path(catalog_dir).is_dir():
        raise ConfigError(f"no catalog at {catalog_dir}", hint="pass the catalog the corpus was built on")
    from shoparena.llm.compact import read_compact
    from shoparena.train.sft import require_profile

    rows, off_profile = require_profile(list(grpo_rows), config.tools, "GRPO")
    rows, headroom = _in_headroom(rows, config)
    env = RolloutEnv(rows, Path(catalog_dir), max_turns=config.max_turns, system=config.system,
                     compact=read_compact(Path(model_dir)))
    sampler = None
    if config.sampler == "llamacpp":
        from shoparena.train.rollout_llamacpp import LlamaCppSampler

        sampler = LlamaCppSampler(model_dir, out_dir / SAMPLER_DIR, dtype=config.sampler_dtype, seed=config.seed,
                                  threads=config.sampler_threads, mode=config.sampler_mode)
    try:
        model, tokenizer = load_model(model_dir, config)
        episodes: list[dict[str, Any]] = []
        dataset = Dataset.from_list([{"prompt": row["prompt"]} for row in env.rows.values()])
        trainer = GRPOTrainer(model=model, reward_funcs=list(REWARD_FUNCS),
                              args=trl_config(config, out_dir), train_dataset=dataset, processing_class=tokenizer,
                              peft_config=peft_config(config),
                              rollout_func=make_rollout_func(env, tokenizer, config, episodes, sampler=sampler),
                              callbacks=trainer_callbacks("grpo", progress, callbacks))
        quiet(trainer)
        resumed = last_checkpoint(out_dir, before=config.max_steps) if resume else None
        trainer.train(resume_from_checkpoint=resumed)
    finally:
        if sampler is not None:
            sampler.close()
    log = trainer.state.log_history
    metrics: dict[str, Any] = {"prompts": len(env.rows), "duplicate_prompts_dropped": env.duplicates,
                               "off_profile": off_profile, **headroom,
                               **loss_metrics(log), **loss_metrics(log, "reward"), **loss_metrics(log, "reward_std"),
                               **loss_metrics(log, "frac_reward_zero_std")}
    if episodes:
        n = len(episodes)
        metrics.update({"episodes": n, "outcome_mean": sum(e["outcome"] for e in episodes) / n,
                        "tool_match_mean": sum(e["tool_match"] for e in episodes) / n,
                        "turns_mean": sum(e["turns"] for e in episodes) / n,
                        "stops": {s: sum(e["stop"] == s for e in episodes) for s in sorted({e["stop"] for e in episodes})},
                        "episodes_without_recommend": sum(not e["called_recommend"] for e in episodes),
                        "callless_turns": sum(e["callless_turns"] for e in episodes),
                        "think_then_stop_turns": sum(e["think_then_stop_turns"] for e in episodes),
                        "reward_before_penalty_mean": sum(e["reward_before_penalty"] for e in episodes) / n,
                        "reward_mean": sum(e["reward"] for e in episodes) / n})
    metrics["rollout_steps"] = _rollout_steps(log)
    if sampler is not None:
        metrics["sampler"] = _sampler_metrics(config, sampler.stats)
    tokens = sum(e["model_tokens"] for e in episodes)
    return save_stage("grpo", trainer, tokenizer, out_dir, metrics=metrics, started=started, tokens=tokens,
                      resumed_from=resumed)


def _rollout_steps(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each logged step's :data:`ROLLOUT_METRICS` (``{"step", "episodes", …}``; averaged over the steps of a log
    entry when ``logging_steps`` > 1), from the trainer's log, so a resumed run keeps the steps before the resume."""
    return [{"step": int(e["step"]), **{k.removeprefix("rollout/"): e[k] for k in ROLLOUT_METRICS if k in e}}
            for e in log_history if any(k in e for k in ROLLOUT_METRICS)]


def _sampler_metrics(config: GRPOConfig, stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The llama.cpp sampler's totals over the run's rollouts (export and sampling seconds, tokens) and the hash of
    each rollout's exported policy (a step that changed the adapter changes it)."""
    total = {k: sum(s.get(k, 0) for s in stats) for k in ("export_s", "sample_s", "generated_tokens",
                                                            "prompt_tokens", "prompt_tokens_evaluated")}
    sample_s = total["sample_s"]
    return {"kind": config.sampler, "dtype": config.sampler_dtype, "rollouts": len(stats),
            "policy_sha256": [s.get("policy_sha256") for s in stats],
            **{k: round(v, 3) if isinstance(v, float) else v for k, v in total.items()},
            "generated_tokens_per_s": round(total["generated_tokens"] / sample_s, 1) if sample_s else None}
