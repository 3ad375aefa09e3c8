"""Session fixtures of the KTO / GRPO stage tests: a small real corpus (the seeded world of
:mod:`shoparena.corpus.testing` through ``build_corpus``), the tiny Qwen3 and a briefly overfit copy of it
(docs/training.md §6 overfit fixture, shortened: plain torch, CE on two target turns after the first GRPO row's prompt,
2:1 — greedy decoding emits the teacher's first call, sampling at temperature 1 that call, a recommendation of
the GT product or a garbled mix of the two; the prompt's keys and values are computed without gradient each step, which keeps a step at ~0.1 s).
Imported by the test modules that use them (kept out of ``conftest.py``)."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@dataclass(frozen=True)
class RLWorld:
    catalog: Path
    corpus: Path
    provenance: dict[str, dict[str, Any]]

    def rows(self, name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.corpus / f"{name}.jsonl").read_text().splitlines() if line]


@pytest.fixture(scope="session")
def rl_world(tmp_path_factory: pytest.TempPathFactory) -> RLWorld:
    from shoparena.corpus import build_corpus
    from shoparena.corpus.testing import seed_world

    root = tmp_path_factory.mktemp("rl_world")
    world = seed_world(root, n_problems=6)
    build_corpus(root / "corpus", store=world.store_url, catalog=world.catalog, problems=world.problems_file)
    prov = {}
    for line in (root / "corpus" / "provenance.jsonl").read_text().splitlines():
        rec = json.loads(line)
        prov[rec["traj_id"]] = rec
    return RLWorld(catalog=world.catalog, corpus=root / "corpus", provenance=prov)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from shoparena.llm.tiny import build_tiny_qwen3

    torch.set_num_threads(1)
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def target_turns(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The two assistant turns the overfit model learns for a GRPO row's prompt."""
    first = row["reference_steps"][0][0]
    return [
        {"role": "assistant", "content": "", "reasoning_content": "search",
         "tool_calls": [{"type": "function", "function": {"name": first["name"], "arguments": first["arguments"]}}]},
        {"role": "assistant", "content": "", "reasoning_content": "pick",
         "tool_calls": [{"type": "function", "function": {
             "name": "recommend_product", "arguments": json.dumps({"product_ids": ",".join(row["gt_ids"])})}}]},
    ]


@pytest.fixture(scope="session")
def overfit_model(tiny_model: Path, rl_world: RLWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.train.rollout import render_prompt_ids

    tok = AutoTokenizer.from_pretrained(tiny_model)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    samples = []
    for row in rl_world.rows("grpo_train")[:1]:
        tools = json.loads(row["tools"])
        prompt = render_prompt_ids(tok, row["prompt"], tools)
        for turn in (*target_turns(row), target_turns(row)[0]):  # 2:1, so greedy decoding searches first
            text = tok.apply_chat_template([*row["prompt"], turn], tools=tools, tokenize=False)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            assert ids[:len(prompt)] == prompt
            end = ids.index(tok.eos_token_id, len(prompt)) + 1
            samples.append((torch.tensor([ids[:end]]), len(prompt)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    prefix = samples[0][0][:, :samples[0][1] - 1]  # the one prompt all targets share
    for _ in range(120):
        opt.zero_grad()
        with torch.no_grad():
            cache = model(input_ids=prefix, use_cache=True).past_key_values
        for ids, start in samples:
            logits = model(input_ids=ids[:, start - 1:-1], past_key_values=copy.deepcopy(cache)).logits[0]
            torch.nn.functional.cross_entropy(logits, ids[0, start:]).backward()
        opt.step()
    out = tmp_path_factory.mktemp("overfit") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def mask_spans(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """A rollout's token ids cut into runs of equal mask bit: ``(1, sampled turn)`` / ``(0, tool results)``."""
    spans: list[tuple[int, list[int]]] = []
    for tok, bit in zip(ids, mask, strict=True):
        if spans and spans[-1][0] == bit:
            spans[-1][1].append(tok)
        else:
            spans.append((bit, [tok]))
    return spans
