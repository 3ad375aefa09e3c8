"""Stages 2–3 through the real harness: rejection sampling keeps exactly the successful (problem, sample)s and
mixes them 50/50 with stage-1 rows; the teacher's voucher rows are up-sampled by the configured factor."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from shoparena.llm.compact import CompactConfig
from shoparena.train.harness import upsample
from shoparena.train.rs import RSConfig, mix_rows, train_rs
from shoparena.train.teacher import TeacherConfig, train_teacher
from shoparena.train.types import LoraConfig
from tests.train.conftest import TrainWorld

TRAIN = {"max_steps": 1, "batch_size": 2, "max_length": 1536, "truncation": "keep_start",
         "compact": CompactConfig(max_items=2, max_chars=300), "lora": LoraConfig(r=4, alpha=8), "concurrency": 2}


def test_rs_keeps_only_the_successes(train_world: TrainWorld, tiny_model: Path, tmp_path: Path) -> None:
    # the tiny model never succeeds, so the sampler is a model URI that succeeds on some samples only
    cfg = RSConfig(sampler="policy:careful", k=2, temperature=0.7, max_problems=8, **TRAIN)
    res = train_rs(tiny_model, train_world.problems, train_world.sft_rows, [], cfg, tmp_path / "rs",
                   catalog_dir=train_world.catalog)
    runs = [json.loads(line) for line in (tmp_path / "rs" / "samples" / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 16 and {r["sample"] for r in runs} == {0, 1}
    successes = [[r["problem_id"], r["sample"]] for r in runs if r["success"]]
    assert 0 < len(successes) < len(runs)  # mixed, so the filter has something to reject
    assert res.metrics["kept_pairs"] == successes
    assert res.metrics["samples"]["failed"] == len(runs) - len(successes)
    assert res.metrics["mix"] == {"rs_rows": len(successes), "sft_rows": min(len(successes),
                                                                             len(train_world.sft_rows))}
    assert res.stage == "rs" and res.steps == 1 and (tmp_path / "rs" / "model" / "model.safetensors").is_file()


def test_mix_rows_ratio() -> None:
    new = [{"id": f"n{i}"} for i in range(6)]
    old = [{"id": f"o{i}"} for i in range(20)]
    half = mix_rows(new, old, 0.5, seed=3)
    assert Counter(r["id"][0] for r in half) == {"n": 6, "o": 6}
    assert mix_rows(new, old, 0.5, seed=3) == half  # seeded
    quarter = mix_rows(new, old, 0.25, seed=3)
    assert Counter(r["id"][0] for r in quarter) == {"n": 6, "o": 18}
    assert Counter(r["id"][0] for r in mix_rows(new, old[:2], 0.5, seed=0)) == {"n": 6, "o": 2}


def test_upsample_counts() -> None:
    rows: list[dict[str, Any]] = [{"bucket": b} for b in ("product", "voucher", "shop", "voucher")]
    out = upsample(rows, "voucher", 3)
    assert Counter(r["bucket"] for r in out) == {"product": 1, "shop": 1, "voucher": 6}


def test_teacher_rows_upsampled(train_world: TrainWorld, tiny_model: Path, tmp_path: Path) -> None:
    cfg = TeacherConfig(teacher="policy:expert", upsample_factor=3, **TRAIN)
    res = train_teacher(tiny_model, train_world.problems, [], cfg, tmp_path / "t", catalog_dir=train_world.catalog)
    before, after = res.metrics["rows_by_bucket"], res.metrics["rows_by_bucket_upsampled"]
    assert before.get("voucher", 0) > 0
    assert after == {b: n * (3 if b == "voucher" else 1) for b, n in before.items()}
    runs = [json.loads(line) for line in (tmp_path / "t" / "samples" / "runs.jsonl").read_text().splitlines()]
    assert res.metrics["kept"] == sum(r["success"] for r in runs) == sum(before.values())
    assert res.metrics["train_counts"]["rows"] == sum(after.values())
