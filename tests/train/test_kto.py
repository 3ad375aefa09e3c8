"""Stage 4, KTO (docs/training.md §3, §4.3) on the tiny Qwen3 and a real corpus export: the labels, the class weights,
the emission-rate early stop (forced rates through the injectable rate function, the real sampler once), finite
losses, the merged checkpoint and resume after an interruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from shoparena.errors import DataError
from shoparena.train.kto import (
    ATTENTION_TARGETS,
    EmissionProbe,
    KTOConfig,
    balanced_subsample,
    class_weights,
    emission_stop,
    fit_kto_turns,
    fitting_rows,
    kto_rows,
    probe_prompts,
    train_kto,
)

if TYPE_CHECKING:
    from tests.train.rl_fixtures import RLWorld

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus / tiny-model fixtures

torch.set_num_threads(1)
FAST = {"max_steps": 4, "batch_size": 2, "max_length": 2048, "save_steps": 2, "probe_every": 2}


def test_recipe_defaults() -> None:
    cfg = KTOConfig()
    assert (cfg.beta, cfg.learning_rate, cfg.epochs, cfg.max_length, cfg.probe_threshold) == (0.02, 5e-6, 1.0,
                                                                                               14336, 0.9)
    assert cfg.lora is not None and cfg.lora.r == 16 and tuple(cfg.lora.target_modules) == ATTENTION_TARGETS
    with pytest.raises(ValueError):
        KTOConfig(batch_size=1)  # the KL estimate needs a neighbour in the batch
    with pytest.raises(ValueError, match="unknown: nope"):
        KTOConfig(tools=("find_product", "nope"))  # SFT's tool-profile check (types.ToolProfile)


def test_labels_follow_the_trajectory_outcome(rl_world: RLWorld) -> None:
    raw = rl_world.rows("kto_train")
    rows = kto_rows(raw)
    assert [r["label"] for r in rows] == [r["label"] for r in raw]
    for r in raw:
        prov = rl_world.provenance[r["traj_id"]]
        # desirable = a turn of a strictly successful agentic trace, undesirable = a turn of a failed one
        assert r["label"] is (prov["success"] is True and prov["axis"] == "A"), r["id"]
        assert len(r["completion"]) == 1 and r["completion"][0]["role"] == "assistant"
    balance = class_weights(rows)
    assert balance["desirable"] == sum(r["label"] for r in raw) > 0
    assert balance["undesirable"] == len(raw) - balance["desirable"] > 0
    # the minority class is up-weighted so λ_D·n_D = λ_U·n_U
    assert balance["desirable"] * balance["desirable_weight"] == pytest.approx(
        balance["undesirable"] * balance["undesirable_weight"])


def test_prompts_are_rendered_as_the_model_is_served(rl_world: RLWorld) -> None:
    """``system: harness`` puts the harness's native system turn in front; the input checkpoint's compaction
    shortens the tool results of the prompt as its backend does; the completion is untouched."""
    from shoparena.env.prompts import NATIVE
    from shoparena.llm.compact import CompactConfig, compact_messages

    raw = [r for r in rl_world.rows("kto_train") if any(m["role"] == "tool" for m in r["prompt"])]
    assert raw
    compact = CompactConfig(max_items=1, max_chars=120)
    rows = kto_rows(raw, system="harness", compact=compact)
    for r, given in zip(rows, raw, strict=True):
        assert r["prompt"][0] == {"role": "system", "content": NATIVE}
        assert r["prompt"][1:] == compact_messages(given["prompt"], compact)
        assert r["completion"] == given["completion"]
        assert all(len(m["content"]) <= 120 for m in r["prompt"] if m["role"] == "tool")
    assert [r["prompt"] for r in kto_rows(raw)] == [r["prompt"] for r in raw]  # the defaults change nothing


def test_bad_rows_are_one_clear_error(rl_world: RLWorld) -> None:
    row = rl_world.rows("kto_train")[0]
    with pytest.raises(DataError, match="label"):
        kto_rows([{**row, "label": "yes"}])
    with pytest.raises(DataError, match="judged assistant turn"):
        kto_rows([{**row, "completion": row["prompt"]}])
    with pytest.raises(DataError, match="both labels"):
        class_weights([r for r in kto_rows(rl_world.rows("kto_train")) if r["label"]])


def test_balanced_subsample_is_seeded_half_and_half_in_order() -> None:
    rows = [{"id": i, "label": i % 5 == 0} for i in range(40)]  # 8 desirable, 32 undesirable
    a = balanced_subsample(rows, 10, seed=3)
    assert a == balanced_subsample(rows, 10, seed=3) and a != balanced_subsample(rows, 10, seed=4)
    assert sum(r["label"] for r in a) == 5 and len(a) == 10
    assert [r["id"] for r in a] == sorted(r["id"] for r in a)  # original order kept
    short = balanced_subsample(rows, 20, seed=0)  # the minority runs out: the rest from the majority
    assert sum(r["label"] for r in short) == 8 and len(short) == 20
    assert balanced_subsample(rows, 40, seed=0) == rows


def test_fitting_rows_keeps_a_row_only_when_its_judged_turn_fits_whole(rl_world: RLWorld,
                                                                        tiny_tokenizer: Any) -> None:
    """TRL cuts a too-long sequence from the right: a row counts only if prompt + the whole judged turn fit."""
    tok = tiny_tokenizer
    row = kto_rows(rl_world.rows("kto_train"))[0]
    tools = json.loads(row["tools"])
    whole = len(tok(tok.apply_chat_template([*row["prompt"], *row["completion"]], tools=tools, tokenize=False),
                    add_special_tokens=False)["input_ids"])
    prompt = len(tok(tok.apply_chat_template(row["prompt"], tools=tools, tokenize=False, add_generation_prompt=True),
                     add_special_tokens=False)["input_ids"])
    assert prompt < whole
    assert fitting_rows([row], tok, whole) == [row]
    assert fitting_rows([row], tok, whole - 1) == []  # the prompt alone would fit: not enough
    assert fitting_rows([row], tok, prompt + 1) == []


def test_turn_budget_fits_prompt_and_judged_turns_and_drops_what_cannot_fit(rl_world: RLWorld,
                                                                            tiny_tokenizer: Any) -> None:
    from shoparena.train.format import ELISION, FormatConfig, _runs, render_sample

    tok = tiny_tokenizer
    raw = [r for r in rl_world.rows("kto_train")
           if len(r["completion"][0].get("reasoning_content") or "") > 200]
    assert raw
    lengths = [b - a for r in raw
               for a, b in _runs(render_sample(tok, [*r["prompt"], *r["completion"]], r["tools"]).assistant_masks)]
    budget = sorted(lengths)[len(lengths) // 2]
    fitted, counts = fit_kto_turns(raw, tok, budget)
    assert counts["turns_shortened"] >= 1 and fitted
    # a row is kept or counted out (a fit that does not converge is "unrenderable", as in SFT's encode_rows)
    assert len(fitted) + counts["dropped_turn_too_long"] + counts["dropped_unrenderable"] == len(raw)
    for row in fitted:
        given = next(r for r in raw if r["id"] == row["id"])
        assert len(row["prompt"]) == len(given["prompt"]) and len(row["completion"]) == 1
        sample = render_sample(tok, [*row["prompt"], *row["completion"]], row["tools"])
        assert [b - a for a, b in _runs(sample.assistant_masks)][-1] <= budget  # the judged turn fits
        if row["completion"] != given["completion"]:
            assert ELISION in row["completion"][0]["reasoning_content"]
            assert row["completion"][0]["tool_calls"] == given["completion"][0].get("tool_calls")
    # a budget no tool call fits in: every row is left out, counted
    none, counts = fit_kto_turns(raw, tok, 16)
    assert none == [] and counts["dropped_turn_too_long"] + counts["dropped_unrenderable"] == len(raw)
    assert counts["dropped_turn_too_long"] >= 1
    assert FormatConfig(turn_tokens=budget).turn_tokens == budget


def test_the_probe_set_comes_from_every_fitting_row_not_the_subsample(tiny_model: Path, tiny_tokenizer: Any,
                                                                         rl_world: RLWorld, tmp_path: Path) -> None:
    raw = rl_world.rows("kto_train")
    long = 16384  # the tiny tokenizer's recommend prompts carry whole trajectories
    expected = probe_prompts(fitting_rows(kto_rows(raw), tiny_tokenizer, long), 50)
    cfg = KTOConfig(**{**FAST, "max_steps": 1, "max_length": long}, max_rows=2, probe_size=50)
    result = train_kto(tiny_model, raw, cfg, tmp_path / "k", rate_fn=lambda m: 1.0)
    assert result.metrics["rows"] == 2 and result.metrics["subsampled_from"] > 2
    assert result.metrics["probe_prompts"] == len(expected) > 2  # more recommend prompts than 2 rows could hold


def test_a_tool_profile_no_row_offers_is_one_clear_error(tiny_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no KTO row offers exactly the tools"):
        train_kto(tiny_model, rl_world.rows("kto_train"), KTOConfig(**FAST, tools=("terminate",)), tmp_path / "k",
                  rate_fn=lambda m: 1.0)


def test_probe_set_is_the_recommend_points(rl_world: RLWorld) -> None:
    rows = kto_rows(rl_world.rows("kto_train"))
    probes = probe_prompts(rows, 4)
    assert 0 < len(probes) <= 4
    recommend_prompts = {json.dumps(r["prompt"]) for r in rows
                         if any(c["function"]["name"] == "recommend_product"
                                for c in r["completion"][0].get("tool_calls") or [])}
    assert all(json.dumps(p["prompt"]) in recommend_prompts for p in probes)


@pytest.mark.parametrize(("rate", "fires"), [(0.5, True), (0.95, False)])
def test_early_stop_fires_only_below_threshold(tiny_model: Path, rate: float, fires: bool) -> None:
    from transformers import AutoModelForCausalLM, TrainerControl, TrainerState

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.train()
    seen: list[bool] = []

    def rate_fn(m: torch.nn.Module) -> float:
        seen.append(m.training or torch.is_grad_enabled())
        return rate

    cb = emission_stop(rate_fn, every=2, threshold=0.9)
    begin = cb.on_step_begin(None, TrainerState(global_step=0), TrainerControl(), model=model)
    assert not begin.should_training_stop  # the input's own rate is a baseline, never a stop
    for step in (1, 2):
        cb.on_step_begin(None, TrainerState(global_step=step - 1), TrainerControl(), model=model)
        control = cb.on_step_end(None, TrainerState(global_step=step), TrainerControl(), model=model)
    assert seen == [False, False]  # the baseline and step 2, in eval mode without gradients
    assert model.training  # train mode restored
    assert control.should_training_stop is fires
    assert cb.history == [(0, rate), (2, rate)] and cb.stopped_at == (2 if fires else None)
    resumed = emission_stop(rate_fn, every=2, threshold=0.9)  # a resumed run starts past step 0: no baseline
    resumed.on_step_begin(None, TrainerState(global_step=2), TrainerControl(), model=model)
    assert resumed.history == [] and len(seen) == 2


def test_real_sampler_counts_recommend_calls(tiny_model: Path, overfit_model: Path, rl_world: RLWorld) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    probes = [{"prompt": r["prompt"], "tools": r["tools"]} for r in rl_world.rows("grpo_train")[:1]] * 6
    rates = []
    for path in (tiny_model, overfit_model):
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        probe = EmissionProbe(AutoTokenizer.from_pretrained(path), probes, max_new_tokens=64, temperature=1.0)
        rates.append(probe(model))
        with pytest.raises(AssertionError, match="train mode"):
            probe(model.train())
    # noise never recommends; the overfit model recommends on some samples and searches on others
    assert rates[0] == 0.0
    assert 0.0 < rates[1] < 1.0


def test_the_probe_samples_its_prompts_in_batches(overfit_model: Path, rl_world: RLWorld) -> None:
    """One left-padded generate per ``batch`` prompts (one per prompt took minutes on the GPU run; the default is one
    at a time on a CPU), and the recommend calls of a batched sample are counted as one at a time counts them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    probes = [{"prompt": r["prompt"], "tools": r["tools"]} for r in rl_world.rows("grpo_train")[:1]] * 6
    model = AutoModelForCausalLM.from_pretrained(overfit_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(overfit_model)
    generate, widths = model.generate, []

    def counted(**kw: Any) -> Any:
        widths.append(int(kw["input_ids"].shape[0]))
        return generate(**kw)

    model.generate = counted
    rates = {}
    for batch in (None, 1, 4, 6):
        widths.clear()
        rates[batch] = EmissionProbe(tokenizer, probes, max_new_tokens=64, temperature=1.0, batch=batch)(model)
        assert widths == {None: [1] * 6, 1: [1] * 6, 4: [4, 2], 6: [6]}[batch]  # None on a CPU: one at a time
    assert all(0.0 < r < 1.0 for r in rates.values()), rates  # some samples recommend, some search
    with pytest.raises(ValueError, match="batch"):
        EmissionProbe(tokenizer, probes, batch=0)


def test_train_kto_finite_loss_merged_model_and_resume(tiny_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    rows = rl_world.rows("kto_train")
    full = train_kto(tiny_model, rows, KTOConfig(**FAST), tmp_path / "full", rate_fn=lambda m: 1.0)
    assert full.steps == 4
    m = full.metrics
    assert m["loss_finite"] and m["emission_rate"] == [[0, 1.0], [2, 1.0], [4, 1.0]] and m["early_stopped_at"] is None
    assert m["rows"] + m["dropped_too_long"] == len(rows) and m["desirable"] and m["undesirable"]
    assert full.tokens_trained > 0
    stage = json.loads((tmp_path / "full" / "stage.json").read_text())
    assert stage["checkpoint_sha256"] == full.checkpoint_sha256
    merged = tmp_path / "full" / "model"
    assert not (merged / "adapter_config.json").exists() and (merged / "model.safetensors").is_file()
    assert full.checkpoint_sha256 != _sha(tiny_model)

    # interrupted after the step-2 checkpoint (the early stop stands in for a kill), then resumed
    part = train_kto(tiny_model, rows, KTOConfig(**FAST), tmp_path / "part", rate_fn=lambda m: 0.0)
    assert part.steps == 2 and part.metrics["early_stopped_at"] == 2
    assert part.metrics["emission_rate"] == [[0, 0.0], [2, 0.0]]  # the input's own rate is recorded, never a stop
    assert 0 < part.tokens_trained < full.tokens_trained  # only the rows the steps reached are counted
    resumed = train_kto(tiny_model, rows, KTOConfig(**FAST), tmp_path / "part", resume=True, rate_fn=lambda m: 1.0)
    assert resumed.resumed_from is not None and resumed.resumed_from.endswith("checkpoint-2")
    assert resumed.steps == 4 and resumed.metrics["emission_rate"] == [[4, 1.0]]  # no step-0 probe on resume
    assert resumed.checkpoint_sha256 == full.checkpoint_sha256
    # TRL's count restarts in a resumed process: the two processes' counts add up to the uninterrupted run's
    assert part.tokens_trained + resumed.tokens_trained == full.tokens_trained


def _sha(path: Path) -> str:
    from shoparena.train.checkpoint import checkpoint_sha256

    return checkpoint_sha256(path)
