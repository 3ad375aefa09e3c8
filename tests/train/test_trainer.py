"""The one place that decides how every stage's TRL trainer runs (shoparena.train.trainer): precision and gradient
checkpointing per stage and device, and the arguments every TRL config gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoparena.train.grpo import GRPOConfig, trl_config
from shoparena.train.kto import KTOConfig
from shoparena.train.rs import RSConfig
from shoparena.train.sft import SFTConfig
from shoparena.train.trainer import precision, trainer_args


@pytest.mark.parametrize(("config", "cpu", "gpu"), [
    (SFTConfig(), (False, False), (False, False)),  # SFT: fp32 unless the recipe asks (as before)
    (SFTConfig(bf16=True, gradient_checkpointing=True), (True, True), (True, True)),  # CPU: bf16 autocast
    (RSConfig(bf16=True), (True, False), (True, False)),
    (KTOConfig(), (False, False), (True, True)),  # KTO / GRPO: bf16 + checkpointing on a GPU by themselves
    (GRPOConfig(), (False, False), (True, True)),
    (KTOConfig(bf16=False, gradient_checkpointing=False), (False, False), (False, False)),
    (KTOConfig(bf16=True), (True, False), (True, True)),  # opt-in autocast on the CPU, as SFT's
])
def test_precision_is_one_decision_for_every_stage(config: object, cpu: tuple[bool, bool],
                                                   gpu: tuple[bool, bool]) -> None:
    assert precision(config, cuda=False) == cpu and precision(config, cuda=True) == gpu


def test_every_trl_config_starts_from_the_same_arguments(tmp_path: Path) -> None:
    import torch

    cfg = GRPOConfig(seed=7, save_steps=3, logging_steps=2, warmup_ratio=0.1, lr_scheduler="cosine")
    args = trainer_args(cfg, tmp_path)
    gpu = torch.cuda.is_available()
    assert (args["seed"], args["data_seed"], args["save_steps"], args["logging_steps"]) == (7, 7, 3, 2)
    assert (args["report_to"], args["disable_tqdm"], args["save_strategy"]) == ("none", True, "steps")
    assert (args["use_cpu"], args["bf16"], args["gradient_checkpointing"]) == (not gpu, gpu, gpu)
    assert args["output_dir"] == str(tmp_path / "checkpoints")
    assert trainer_args(SFTConfig(learning_rate=1e-3), tmp_path, learning_rate=3e-4)["learning_rate"] == 3e-4
    trl_args = trl_config(cfg, tmp_path)  # GRPO's TRL config is built on them
    assert (trl_args.seed, trl_args.data_seed, trl_args.disable_tqdm, trl_args.report_to) == (7, 7, True, [])
    assert (trl_args.lr_scheduler_type, trl_args.save_steps) == ("cosine", 3)
