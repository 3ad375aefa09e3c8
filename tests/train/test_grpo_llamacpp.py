"""Stage 5 with ``sampler: llamacpp`` (shoparena/train/rollout_llamacpp.py): turns sampled from an exported copy of
the policy through llama.cpp's batched engine, each episode in its own thread. Greedy episodes match the
transformers path's on an F32 copy, seeded sampled rollouts repeat, the export follows the LoRA weights, and a short
TRL run trains through it. Needs ``llama-cpp-python`` (``make llamacpp``)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from shoparena.errors import ConfigError
from shoparena.train.grpo import SAMPLER_DIR, GRPOConfig, train_grpo
from shoparena.train.rollout import RolloutEnv, TokenEpisode, run_token_episodes
from shoparena.train.rollout_llamacpp import LlamaCppSampler, merged_state_dict, require_llamacpp, turn_seed

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

if TYPE_CHECKING:
    from tests.train.rl_fixtures import RLWorld

pytest_plugins = ("tests.train.rl_fixtures",)  # the shared corpus fixture

torch.set_num_threads(1)
EPISODE = {"max_completion_length": 1500, "turn_max_tokens": 96, "top_p": 1.0}


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny SmolLM2-shaped checkpoint, prepared as ``shoparena models prepare`` does (the Qwen3 tool template)."""
    from shoparena.llm.models import prepare_gguf, spec_with_path
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf

    gguf, _ = build_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", quant="F32", layers=2,
                                    vocab_size=1024, context=8192)
    prepared = tmp_path_factory.mktemp("prep") / "smol"
    prepare_gguf(spec_with_path("smollm2-135m", gguf), prepared)
    return prepared


@pytest.fixture(scope="module")
def overfit_llama(tiny_llama: Path, rl_world: RLWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny_llama`` briefly overfit on the first GRPO row's two target turns (the ``overfit_model`` recipe of
    tests/train/rl_fixtures.py: 2:1 search first): its greedy episode calls the teacher's first tool, gets the tool
    result appended, and goes on to recommend, so a turn continues a sequence that grew by real tool tokens."""
    import copy

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.train.rollout import render_prompt_ids
    from tests.train.rl_fixtures import target_turns

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    row = rl_world.rows("grpo_train")[0]
    tools = json.loads(row["tools"])
    prompt = render_prompt_ids(tok, row["prompt"], tools)
    samples = []
    for turn in (*target_turns(row), target_turns(row)[0]):
        ids = tok(tok.apply_chat_template([*row["prompt"], turn], tools=tools, tokenize=False),
                  add_special_tokens=False)["input_ids"]
        assert ids[:len(prompt)] == prompt
        end = ids.index(tok.eos_token_id, len(prompt)) + 1
        samples.append(torch.tensor([ids[:end]]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    prefix = samples[0][:, :len(prompt) - 1]
    target = samples[0][0, len(prompt):].tolist()
    for step in range(400):
        if step % 40 == 0 and step >= 120:  # until greedy decoding emits the first target turn
            model.eval()
            with torch.no_grad():
                out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=len(target), do_sample=False)
            if out[0, len(prompt):].tolist() == target:
                break
        model.train()
        opt.zero_grad()
        with torch.no_grad():
            cache = model(input_ids=prefix, use_cache=True).past_key_values
        for ids in samples:
            logits = model(input_ids=ids[:, len(prompt) - 1:-1], past_key_values=copy.deepcopy(cache)).logits[0]
            torch.nn.functional.cross_entropy(logits, ids[0, len(prompt):]).backward()
        opt.step()
    out = tmp_path_factory.mktemp("overfit-llama") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for name in ("prepare.json", "generation_config.json"):
        if (tiny_llama / name).is_file() and not (out / name).is_file():
            shutil.copy(tiny_llama / name, out / name)
    return out


@pytest.fixture(scope="module")
def sharp_llama(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny_llama`` with prompt-dependent greedy turns (tests/sharp.py): at the usual std 0.02 a prompt prints one
    token forever, and comparing episodes would prove nothing."""
    from tests.sharp import sharpened_copy

    return sharpened_copy(tiny_llama, tmp_path_factory.mktemp("sharp") / "sharp")


def _load(model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
    return model, tok


def _play(model: Any, tok: Any, env: RolloutEnv, rows: list[dict[str, Any]], temperature: float,
          sampler: Any = None) -> list[TokenEpisode]:
    torch.manual_seed(0)
    return run_token_episodes(model, tok, env, rows, temperature=temperature, sampler=sampler, **EPISODE)


def _key(ep: TokenEpisode) -> tuple[Any, ...]:
    return (ep.prompt_ids, ep.completion_ids, ep.env_mask, ep.steps, ep.observations, ep.outcome, ep.tool_match,
            ep.reward, ep.stop, ep.recommended)


def _sampled(model_dir: Path, work: Path, rows: list[dict[str, Any]], env: RolloutEnv, temperature: float, *,
             dtype: str = "F32", step: int = 0, seed: int = 0, model: Any = None,
             mode: str = "batched") -> list[TokenEpisode]:
    policy, tok = _load(model_dir)
    sampler = LlamaCppSampler(model_dir, work, dtype=dtype, seed=seed, threads=1, mode=mode)
    sampler.step = step
    try:
        return _play(model if model is not None else policy, tok, env, rows, temperature, sampler)
    finally:
        sampler.close()


def test_greedy_episodes_match_the_transformers_path(sharp_llama: Path, overfit_llama: Path, rl_world: RLWorld,
                                                    tmp_path: Path) -> None:
    """An F32 copy plays the transformers path's greedy episodes token for token: three rows of the sharp model
    (different turns from each row), and the overfit model's episode whose second turn continues after ~1,000 tool
    result tokens, played twice at once (one prompt prefix shared, each episode continuing its own sequence)."""
    rows = rl_world.rows("grpo_train")[:4]
    env = RolloutEnv(rows, rl_world.catalog, max_turns=3)
    model, tok = _load(sharp_llama)
    want = _play(model, tok, env, rows, 0.0)
    got = _sampled(sharp_llama, tmp_path / "sharp", rows, env, 0.0)
    assert len({tuple(e.completion_ids[:8]) for e in want}) == len(rows)  # the comparison means something
    # llama.cpp keeps its KV cache in F16 even for F32 weights (and sums in other orders), so its logits differ
    # from torch's by ~1e-3: greedy picks the same token except where the top two tie that closely. An episode is
    # the same, or the same up to a near-tie in a sampled span where llama.cpp took the runner-up.
    same = 0
    for g, w in zip(got, want, strict=True):
        if _key(g) == _key(w):
            same += 1
            continue
        at = next(i for i, (x, y) in enumerate(zip(g.completion_ids, w.completion_ids, strict=False)) if x != y)
        assert g.env_mask[:at + 1] == w.env_mask[:at + 1] and w.env_mask[at] == 1
        with torch.no_grad():
            logits = model(torch.tensor([w.prompt_ids + w.completion_ids[:at]])).logits[0, -1]
        top = torch.topk(logits, 2)
        assert g.completion_ids[at] == int(top.indices[1])  # llama.cpp took the runner-up ...
        assert float(top.values[0] - top.values[1]) < 0.01 * float(top.values[0].abs())  # ... of a near-tie
    assert same >= 1  # the sharp model's turns hold near-ties (top two within 0.2%): some rows meet one
    assert not (tmp_path / "sharp").exists()  # close() removes the exported GGUF

    model, tok = _load(overfit_llama)
    want = _play(model, tok, env, rows[:1] * 2, 0.0)
    got = _sampled(overfit_llama, tmp_path / "overfit", rows[:1] * 2, env, 0.0)
    assert want[0].steps[0] and want[0].steps[0][0]["name"] == "find_product"
    assert want[0].env_mask.count(0) > 500 and len(want[0].steps) >= 2  # a turn after a real tool result
    assert [_key(e) for e in got] == [_key(e) for e in want]


def test_seeded_sampled_rollouts_repeat(overfit_llama: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    """At temperature 1 the draws are seeded from (seed, step, episode, turn): the same step plays the same K
    episodes again, the K episodes differ from each other, and another step draws others."""
    rows = rl_world.rows("grpo_train")[:1] * 4
    env = RolloutEnv(rows, rl_world.catalog, max_turns=3)
    a = _sampled(overfit_llama, tmp_path / "a", rows, env, 1.0, dtype="F16", seed=5, step=2)
    b = _sampled(overfit_llama, tmp_path / "b", rows, env, 1.0, dtype="F16", seed=5, step=2)
    assert [_key(e) for e in a] == [_key(e) for e in b]
    assert len({tuple(e.completion_ids) for e in a}) > 1
    c = _sampled(overfit_llama, tmp_path / "c", rows, env, 1.0, dtype="F16", seed=5, step=3)
    assert [e.completion_ids for e in c] != [e.completion_ids for e in a]
    assert turn_seed(5, 2, 0, 0) != turn_seed(5, 2, 1, 0) != turn_seed(5, 3, 1, 0)
    assert turn_seed(5, 2, 0, 1) == turn_seed(5, 2, 0, 1) < 2 ** 32


def test_slots_mode_plays_each_episode_as_it_would_alone(overfit_llama: Path, rl_world: RLWorld, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``mode="slots"``: every episode decodes in an engine of its own, so an episode's text depends on its seed
    alone: episodes 0 and 1 of a rollout of four are those of a rollout of two, token for token, and a second
    rollout of four repeats the first (in one batched engine, what shares a batch can move a near-tie draw)."""
    from shoparena.llm import llamacpp_batch

    made: list[int] = []

    class Counted(llamacpp_batch.BatchEngine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(int(kwargs["n_seq"]))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(llamacpp_batch, "BatchEngine", Counted)
    row = rl_world.rows("grpo_train")[0]
    env = RolloutEnv([row], rl_world.catalog, max_turns=3)
    four = _sampled(overfit_llama, tmp_path / "four", [row] * 4, env, 1.0, dtype="F16", seed=5, mode="slots")
    two = _sampled(overfit_llama, tmp_path / "two", [row] * 2, env, 1.0, dtype="F16", seed=5, mode="slots")
    again = _sampled(overfit_llama, tmp_path / "again", [row] * 4, env, 1.0, dtype="F16", seed=5, mode="slots")
    assert made == [1] * 10  # an engine of one sequence per episode: 4 + 2 + 4
    assert len({tuple(e.completion_ids) for e in four}) > 1  # four different draws, not one repeated
    assert [_key(e) for e in four[:2]] == [_key(e) for e in two]
    assert [_key(e) for e in again] == [_key(e) for e in four]
    with pytest.raises(ConfigError, match="sampler mode"):
        LlamaCppSampler(overfit_llama, tmp_path / "x", mode="lockstep")
    with pytest.raises(ValueError):
        GRPOConfig(sampler_mode="lockstep")  # type: ignore[arg-type]
    assert GRPOConfig().sampler_mode == "batched"


def test_export_is_the_merged_policy_and_leaves_the_model_alone(tiny_llama: Path, tmp_path: Path) -> None:
    """The export is W + ΔW of the current adapter: a fresh adapter (B = 0) exports the base's bytes, a changed one
    exports what ``merge_and_unload`` would give, and the training model's own weights are untouched."""
    import copy

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    sampler = LlamaCppSampler(tiny_llama, tmp_path / "work", dtype="F32")
    plain = _sha(sampler.export(base))
    peft = get_peft_model(copy.deepcopy(base), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                         init_lora_weights=True))
    assert _sha(sampler.export(peft)) == plain == sampler.policy_sha256  # B = 0: nothing merged yet
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    before = {k: v.clone() for k, v in peft.state_dict().items()}
    merged = merged_state_dict(peft)
    assert _sha(sampler.export(peft)) != plain
    assert all(torch.equal(v, peft.state_dict()[k]) for k, v in before.items())  # nothing merged in place
    reference = copy.deepcopy(peft).merge_and_unload().state_dict()
    assert merged.keys() == reference.keys()
    for key, value in reference.items():
        torch.testing.assert_close(merged[key], value, rtol=0, atol=1e-6)
    assert not torch.equal(merged["model.layers.0.self_attn.q_proj.weight"],
                           base.state_dict()["model.layers.0.self_attn.q_proj.weight"])
    sampler.close()
    assert not (tmp_path / "work").exists()


def test_train_grpo_through_llamacpp(overfit_llama: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    """Two Dr. GRPO steps with ``sampler: llamacpp``: finite losses, a merged checkpoint and stage.json, each step's
    rollout sampled from that step's export (the second export differs: the first step moved the adapter), the
    per-step GGUF gone when the stage ends."""
    rows = rl_world.rows("grpo_train")[:1]
    cfg = GRPOConfig(num_generations=4, batch_size=1, grad_accum=4, max_steps=2, max_turns=2, save_steps=1,
                     learning_rate=1e-2, sampler="llamacpp", sampler_dtype="F32", sampler_threads=1, seed=3,
                     temperature=1.0, **EPISODE)
    res = train_grpo(overfit_llama, rows, cfg, tmp_path / "out", catalog_dir=rl_world.catalog)
    m = res.metrics
    assert res.steps == 2 and m["loss_finite"] and m["episodes"] == 8
    stage = json.loads((tmp_path / "out" / "stage.json").read_text())
    assert stage["checkpoint_sha256"] == res.checkpoint_sha256
    assert (tmp_path / "out" / "model" / "model.safetensors").is_file()
    sampled = m["sampler"]
    assert sampled["kind"] == "llamacpp" and sampled["rollouts"] == 2 and sampled["generated_tokens"] > 0
    first, second = sampled["policy_sha256"]
    assert first != second  # the step between them changed the adapter, and the export shows it
    assert not (tmp_path / "out" / SAMPLER_DIR).exists()


def test_llamacpp_sampler_refuses_what_it_cannot_export(tiny_model: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    """A non-llama checkpoint is a config error before the stage writes anything; an unknown sampler or dtype is
    refused by the config."""
    with pytest.raises(ConfigError, match="llama GGUF"):
        require_llamacpp(tiny_model)
    cfg = GRPOConfig(num_generations=2, batch_size=2, max_steps=1, sampler="llamacpp")
    with pytest.raises(ConfigError, match="llama GGUF"):
        train_grpo(tiny_model, rl_world.rows("grpo_train"), cfg, tmp_path / "out", catalog_dir=rl_world.catalog)
    assert not (tmp_path / "out").exists()
    for bad in ({"sampler": "vllm"}, {"sampler_dtype": "Q4_0"}, {"sampler_threads": 0}):
        with pytest.raises(ValueError):
            GRPOConfig(**bad)
    assert GRPOConfig().sampler == "hf" and GRPOConfig().sampler_dtype == "F16"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_kto_emission_probe_through_llamacpp(overfit_llama: Path, rl_world: RLWorld, tmp_path: Path) -> None:
    """KTO's emission probe sampled through the same helper: the overfit model recommends at its first turn in about
    a third of its draws at T 0.7, the probe counts them (a rate strictly between 0 and 1), and a second measurement
    of the same model draws the same turns (each probe keeps its seed)."""
    from shoparena.train.kto import EmissionProbe

    model, tok = _load(overfit_llama)
    row = rl_world.rows("grpo_train")[0]
    probes = [{"prompt": row["prompt"], "tools": row["tools"]}] * 12
    sampler = LlamaCppSampler(overfit_llama, tmp_path / "probe", dtype="F16", seed=7, threads=1)
    probe = EmissionProbe(tok, probes, max_new_tokens=96, temperature=0.7, top_p=0.95, seed=7, sampler=sampler)
    try:
        first = probe(model)
        assert 0 < first < 1
        assert probe(model) == first
        assert sampler.exports == 2 and sampler.stats[-1]["generated_tokens"] > 12
    finally:
        sampler.close()
    assert not (tmp_path / "probe").exists()
