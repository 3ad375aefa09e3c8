"""Stage 1 on the tiny Qwen3: finite, falling loss; same seed → same checkpoint bytes; a run killed after a
checkpoint and resumed ends exactly where an uninterrupted run ends; the LR sweep keeps the lowest eval loss."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import DataError
from shoparena.llm.compact import CompactConfig
from shoparena.train.checkpoint import checkpoint_sha256, load_stage
from shoparena.train.format import tool_names
from shoparena.train.sft import SFTConfig, in_profile, train_sft
from shoparena.train.types import LoraConfig
from tests.train.conftest import TrainWorld

COMPACT = CompactConfig(max_items=2, max_chars=300)


def _config(**kw: Any) -> SFTConfig:
    base = {"max_steps": 4, "batch_size": 2, "max_length": 1536, "truncation": "keep_start", "compact": COMPACT,
            "save_steps": 2, "learning_rate": 2e-3, "lora": LoraConfig(r=4, alpha=8)}
    return SFTConfig(**{**base, **kw})


def test_sft_loss_falls_and_the_checkpoint_is_plain(train_world: TrainWorld, tiny_model: Path, tmp_path: Path
                                                     ) -> None:
    rows = train_world.sft_rows[:2]  # a fixed tiny set, seen again and again
    res = train_sft(tiny_model, rows, [], _config(max_steps=8, lora=None, learning_rate=1e-2), tmp_path / "s")
    losses = res.metrics["losses"]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.5, losses
    model_dir = tmp_path / "s" / "model"
    assert res.model_dir == model_dir and (model_dir / "model.safetensors").is_file()
    assert not list(model_dir.glob("adapter_*"))  # merged: a plain checkpoint, loadable by hf:
    assert json.loads((model_dir / "shoparena_format.json").read_text())["compact"]["max_items"] == 2
    assert res.tokens_trained > 0 and res.steps == 8 and res.checkpoint_sha256 == checkpoint_sha256(model_dir)
    log = [json.loads(line) for line in (tmp_path / "s" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 9)) and log[-1]["tokens_per_s"] > 0
    assert load_stage(tmp_path / "s") == res


def test_bf16_on_the_cpu_is_autocast_over_fp32_weights(train_world: TrainWorld, tiny_model: Path, tmp_path: Path
                                                       ) -> None:
    """``bf16: true`` on a CPU: bf16 autocast (the step changes), fp32 weights and checkpoint, same seed same bytes."""
    from safetensors import safe_open

    rows = train_world.sft_rows[:2]
    cfg = _config(max_steps=6, lora=None, learning_rate=1e-2)
    fp32 = train_sft(tiny_model, rows, [], cfg, tmp_path / "fp32")
    runs = [train_sft(tiny_model, rows, [], cfg.model_copy(update={"bf16": True}), tmp_path / d) for d in "ab"]
    losses = runs[0].metrics["losses"]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0] - 0.5, losses
    assert losses != fp32.metrics["losses"]  # autocast really ran: bf16 products round differently
    assert runs[0].checkpoint_sha256 == runs[1].checkpoint_sha256 != fp32.checkpoint_sha256
    with safe_open(str(runs[0].model_dir / "model.safetensors"), "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float32"}


class _Kill:
    """A trainer callback that interrupts the run after optimiser step ``at`` (its checkpoint already saved)."""

    def __init__(self, at: int) -> None:
        from transformers import TrainerCallback

        class Cb(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if state.global_step == at + 1:
                    raise KeyboardInterrupt

        self.callback = Cb()


def _tokens(run: Path) -> list[float]:
    log = [json.loads(line) for line in (run / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r["num_tokens"] for r in {r["step"]: r for r in log}.values()]


def test_same_seed_same_bytes_and_resume_after_kill(train_world: TrainWorld, tiny_model: Path, tmp_path: Path
                                                    ) -> None:
    rows, evals = train_world.sft_rows, train_world.eval_rows[:2]
    cfg = _config()
    a = train_sft(tiny_model, rows, evals, cfg, tmp_path / "a")
    b = train_sft(tiny_model, rows, evals, cfg, tmp_path / "b")
    assert a.checkpoint_sha256 == b.checkpoint_sha256 and a.metrics["losses"] == b.metrics["losses"]
    other = train_sft(tiny_model, rows, evals, cfg.model_copy(update={"seed": 1}), tmp_path / "o")
    assert other.checkpoint_sha256 != a.checkpoint_sha256

    with pytest.raises(KeyboardInterrupt):  # killed during step 3, after checkpoint-2 was written
        train_sft(tiny_model, rows, evals, cfg, tmp_path / "k", callbacks=[_Kill(2).callback])
    assert (tmp_path / "k" / "checkpoints" / "checkpoint-2").is_dir()
    assert not (tmp_path / "k" / "stage.json").exists()
    resumed = train_sft(tiny_model, rows, evals, cfg, tmp_path / "k", resume=True)
    assert resumed.resumed_from and resumed.resumed_from.endswith("checkpoint-2")
    assert resumed.checkpoint_sha256 == a.checkpoint_sha256
    assert resumed.metrics["losses"] == a.metrics["losses"] and resumed.metrics["eval_loss"] == a.metrics["eval_loss"]
    # the token counts stay cumulative across the resume (TRL restarts its own at zero in every process)
    assert _tokens(tmp_path / "k") == _tokens(tmp_path / "a") and _tokens(tmp_path / "a")[-1] > 0
    assert resumed.metrics["train_tokens_seen"] == a.metrics["train_tokens_seen"]
    # the mean training loss covers every step, as the uninterrupted run's (the trainer's own figure of a resumed
    # process adds only the steps since its checkpoint), and the compute time adds the killed process's
    assert resumed.metrics["train_loss"] == pytest.approx(a.metrics["train_loss"], rel=1e-6)
    killed = max(r["cpu_s"] for r in map(json.loads, (tmp_path / "k" / "log.jsonl").read_text().splitlines())
                 if r["step"] <= 2)  # the killed process logged steps 1 and 2
    assert resumed.metrics["train_cpu_s"] == pytest.approx(killed + resumed.metrics["train_cpu_s_process"], abs=1e-3)
    assert resumed.metrics["train_wall_s"] > resumed.seconds and a.metrics["train_cpu_s_process"] == a.metrics[
        "train_cpu_s"]
    again = train_sft(tiny_model, rows, evals, cfg, tmp_path / "k", resume=True)  # finished: returned as is
    assert again == resumed


def test_lr_sweep_keeps_the_lowest_eval_loss(train_world: TrainWorld, tiny_model: Path, tmp_path: Path) -> None:
    cfg = _config(max_steps=2, lr_sweep=(1e-5, 5e-3))
    res = train_sft(tiny_model, train_world.sft_rows, train_world.eval_rows[:2], cfg, tmp_path / "s")
    sweep = res.metrics["sweep"]
    assert [r["lr"] for r in sweep] == [1e-5, 5e-3]
    best = min(sweep, key=lambda r: r["eval_loss"])
    assert res.metrics["lr"] == best["lr"] and res.metrics["eval_loss"] == best["eval_loss"]
    chosen = tmp_path / "s" / "sweep" / f"lr-{best['lr']:g}" / "model"
    assert res.checkpoint_sha256 == checkpoint_sha256(chosen)


def _row(*names: str) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]
    return {"messages": [], "tools": json.dumps(tools)}


def test_in_profile_keeps_exactly_the_rows_offering_the_evaluations_tools() -> None:
    four = ("find_product", "view_product_information", "recommend_product", "terminate")
    rows = [_row(*four), _row(*reversed(four)), _row(*four, "calculate_voucher"), _row(*four[:3]),
            {"messages": [], "tools": "not json"}, {"messages": [], "tools": None}]
    kept, off = in_profile(rows, four)
    assert kept == rows[:2] and off == 4  # order-free match; a superset, a subset, bad JSON and no tools are out
    assert in_profile(rows, None) == (rows, 0)
    assert tool_names(rows[2]["tools"]) == tuple(sorted((*four, "calculate_voucher")))
    with pytest.raises(DataError):
        tool_names(json.dumps([{"type": "function", "function": {}}]))


def test_sft_trains_only_the_profiles_rows(train_world: TrainWorld, tiny_model: Path, tmp_path: Path) -> None:
    rows = train_world.sft_rows
    profiles = sorted({tool_names(r["tools"]) for r in rows})
    want = profiles[0]
    n_in = sum(1 for r in rows if tool_names(r["tools"]) == want)
    res = train_sft(tiny_model, rows, rows, _config(max_steps=1, tools=want, max_eval_rows=None), tmp_path / "s")
    counts = res.metrics["train_counts"]
    assert counts["rows"] == n_in and counts["off_profile"] == len(rows) - n_in
    assert res.metrics["eval_counts"]["rows"] == n_in
    with pytest.raises(DataError, match="no trainable SFT rows"):
        train_sft(tiny_model, rows, [], _config(max_steps=1, tools=("web_search",)), tmp_path / "none")


@pytest.mark.parametrize(("tools", "match"), [
    (["find_product", "find_prodcut"], "unknown: find_prodcut"),
    ([], "distinct registered tool names"),
    (["terminate", "terminate"], "distinct registered tool names"),
])
def test_a_bad_tool_profile_is_refused_in_the_config(tools: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SFTConfig(tools=tools)


@pytest.mark.parametrize("bad", [0.0, -1e-4, math.nan, math.inf])
def test_a_bad_learning_rate_in_a_sweep_is_refused_as_the_single_one_is(bad: float) -> None:
    """Each swept learning rate obeys ``learning_rate``'s own bound (finite, > 0): a YAML recipe's sweep is input."""
    with pytest.raises(ValueError, match="lr_sweep"):
        SFTConfig(lr_sweep=(1e-4, bad))
    with pytest.raises(ValueError, match="learning_rate"):
        SFTConfig(learning_rate=bad)
    assert SFTConfig(lr_sweep=(1e-4, 3e-4)).lr_sweep == (1e-4, 3e-4)


@pytest.mark.parametrize("bad", [0.0, -1e-4, math.nan, math.inf])
def test_the_stages_that_set_their_own_default_learning_rate_keep_its_bound(bad: float) -> None:
    """KTO and GRPO override ``learning_rate``'s default; the bound (finite, > 0) comes with the shared type."""
    from shoparena.train.grpo import GRPOConfig
    from shoparena.train.kto import KTOConfig

    for config in (KTOConfig, GRPOConfig):
        with pytest.raises(ValueError, match="learning_rate"):
            config(learning_rate=bad)
    assert (KTOConfig().learning_rate, GRPOConfig().learning_rate) == (5e-6, 5e-7)  # docs/training.md §3
