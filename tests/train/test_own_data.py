"""Our own data never breaks our own commands: what ``arena simulate`` generates, ``corpus build`` exports and every
training stage reads back (SFT rows rendered, KTO rows checked and fitted as the ``tiny`` recipe fits them, GRPO
prompts → their problems), over many seeds and sizes. The whole chain through ``train tiny`` and ``evaluate`` on
a simulated arena runs in ``tests/evaluate/test_loop.py`` (``shoparena loop``: arena days → corpus → five stages
→ evaluation); this file covers the breadth of seeds cheaply.

Two configurations once broke: a one-day simulation at seed 41 gave a corpus (built without ``--banks``) whose GRPO
rows held voucher problems without their voucher (``train tiny`` stopped with an internal error), and
``arena simulate --miners 8 --validators 2 --days 3 --seed 81`` refused its own bank (a 6-problem leak cluster
over 1 % of 540 problems)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from shoparena.errors import DataError

pytest.importorskip("transformers")

# (seed, miners, bank problems, catalog size): small worlds, seed 81 among them (seed 41's whole configuration
# runs below)
CASES = [(81, 2, 24, 300), (3, 2, 36, 400), (7, 3, 24, 300), (12, 2, 30, 350), (29, 2, 24, 300)]


def _simulate(root: Path, seed: int, miners: int, problems: int, catalog: int) -> Path:
    from shoparena.arena.simulate import SimulationConfig, simulate

    simulate(SimulationConfig(miners=miners, validators=1, days=1, seed=seed, catalog_size=catalog,
                              problems=problems, qualifying_problems=2, race_problems=2, sandbox="process",
                              out=str(root)))
    return root


def _rows(corpus: Path, name: str) -> list[dict[str, Any]]:
    from shoparena.corpus.export.common import read_jsonl_rows

    return read_jsonl_rows(corpus / f"{name}.jsonl")


@pytest.mark.parametrize(("seed", "miners", "problems", "catalog"), CASES)
def test_simulated_corpus_reads_back_through_every_stage(tmp_path: Path, tiny_tokenizer: Any, seed: int,
                                                         miners: int, problems: int, catalog: int) -> None:
    from shoparena.corpus.build import build_corpus
    from shoparena.tasks.banks import BankSet
    from shoparena.train.format import FormatConfig, encode_rows
    from shoparena.train.harness import problems_of_rows
    from shoparena.train.kto import fitting_rows, kto_rows
    from shoparena.train.recipe import load_recipe
    from shoparena.train.rollout import RolloutEnv

    arena = _simulate(tmp_path / "arena", seed, miners, problems, catalog)
    store = f"sqlite:///{arena / 'subnet.db'}"
    report = build_corpus(tmp_path / "corpus", store=store, catalog=arena / "catalog", banks=arena / "banks")
    corpus = tmp_path / "corpus"
    truth = {p.problem_id: p for p in BankSet.load(arena / "banks").all_problems()}
    recipe, _ = load_recipe("tiny")
    compact = recipe.sft.compact  # the observation compaction every later stage inherits from stage 1

    # SFT (stages 1-3): every row renders
    for name in ("sft_train", "sft_eval"):
        encoded = encode_rows(tiny_tokenizer, _rows(corpus, name), FormatConfig(max_length=2048, compact=compact,
                                                                                truncation="keep_start"))
        assert encoded.counts["dropped_unrenderable"] == 0, (name, dict(encoded.counts))

    # KTO (stage 4): rows check, and the tiny recipe's max_length keeps both labels where the corpus has them
    kto = _rows(corpus, "kto_train")
    if kto:
        given = kto_rows(kto, compact=compact)
        assert len(given) == len(kto)
        if len({r["label"] for r in given}) == 2:
            fit = fitting_rows(given, tiny_tokenizer, recipe.kto.max_length)
            assert {r["label"] for r in fit} == {True, False}, (seed, len(fit), len(given))

    # GRPO (stages 2, 3 and 5): each prompt's problem is the bank's problem itself, whole
    grpo = _rows(corpus, "grpo_train")
    assert len(grpo) == report.exports["grpo_train"]["rows"]
    read = problems_of_rows(grpo)
    assert [p.problem_id for p in read] == [r["problem_id"] for r in grpo]
    for p in read:
        assert p == truth[p.problem_id], p.problem_id
    if grpo:
        env = RolloutEnv(grpo, arena / "catalog")
        assert [env.problem(r) for r in grpo] == read

    # without --banks the problems come from the store's records (query and GT ids only): no GRPO prompt is made
    # of them (a voucher problem without its voucher once stopped `train tiny`); SFT and KTO are unchanged
    bare = build_corpus(tmp_path / "bare", store=store, catalog=arena / "catalog")
    assert problems_of_rows(_rows(tmp_path / "bare", "grpo_train")) == []
    assert bare.exports["grpo_train"]["rows"] == 0
    if grpo:
        assert bare.exports["grpo_train"]["report"]["rejected"].get("no_ground_truth", 0) > 0


def test_seed_41_one_day_grpo_prompts_carry_their_voucher(tmp_path: Path) -> None:
    """``arena simulate --miners 6 --validators 2 --days 1 --seed 41`` then ``corpus build``: built from the store
    alone, its GRPO export once held voucher problems rebuilt from records, without their voucher; with the banks
    every GRPO problem, the voucher ones included, is the bank's problem whole."""
    from shoparena.arena.simulate import SimulationConfig, simulate
    from shoparena.corpus.build import build_corpus
    from shoparena.tasks.banks import BankSet
    from shoparena.train.harness import problems_of_rows

    arena = tmp_path / "arena"
    simulate(SimulationConfig(miners=6, validators=2, days=1, seed=41, sandbox="process", out=str(arena)))
    store = f"sqlite:///{arena / 'subnet.db'}"
    bare = build_corpus(tmp_path / "bare", store=store, catalog=arena / "catalog")
    assert problems_of_rows(_rows(tmp_path / "bare", "grpo_train")) == []
    assert bare.exports["grpo_train"]["report"]["rejected"]["no_ground_truth"] > 0
    # `train tiny` on that corpus: a data error before any work (stages 2-3 have no problem to sample)
    from shoparena.train.recipe import load_recipe, run_recipe

    with pytest.raises(DataError, match="no train problems") as exc:
        run_recipe(load_recipe("tiny")[0], tmp_path / "bare", tmp_path / "train", catalog_dir=arena / "catalog")
    assert exc.value.hint and "--banks" in exc.value.hint and not (tmp_path / "train").exists()
    build_corpus(tmp_path / "corpus", store=store, catalog=arena / "catalog", banks=arena / "banks")
    truth = {p.problem_id: p for p in BankSet.load(arena / "banks").all_problems()}
    read = problems_of_rows(_rows(tmp_path / "corpus", "grpo_train"))
    vouchers = [p for p in read if p.bucket == "voucher"]
    assert vouchers and all(p.voucher is not None for p in vouchers)
    assert all(p == truth[p.problem_id] for p in read)


@pytest.mark.parametrize("seed", [81, 78, 18])
def test_simulate_accepts_its_own_bank(tmp_path: Path, seed: int) -> None:
    """The world of ``arena simulate --miners 8 --validators 2 --days 3 --seed S`` (540 problems): seed 81's
    generator once gave a retailer substitution the GT product of another family; seeds 78 and 18 join two
    families by a genuine shared constraint signature (6 problems, over 1 % of 540)."""
    from shoparena.arena.simulate import SimulationConfig, _world

    _index, banks, _catalog = _world(SimulationConfig(miners=8, validators=2, days=3, seed=seed), tmp_path)
    problems = banks.all_problems()
    assert len(problems) == 540
    families: dict[str, set[str]] = defaultdict(set)
    for p in problems:
        for gt in p.gt_ids():
            families[gt].add(p.cluster_id or p.problem_id)
    shared = {gt: fams for gt, fams in families.items() if len(fams) > 1}
    assert not shared, shared  # the generator never hands one GT product to two families


def test_a_bad_grpo_problem_is_a_data_error_naming_the_row() -> None:
    import json

    from shoparena.train.harness import problems_of_rows

    view = {"problem_id": "p1", "bucket": "voucher", "query": "two mugs, with a voucher",
            "reward": [{"product_id": "1", "title": [""]}]}
    with pytest.raises(DataError, match=r"GRPO row 2 \(problem p1\).*needs a 'voucher'") as exc:
        problems_of_rows([{"problem": None}, {"problem_id": "p1", "problem": json.dumps(view)}])
    assert exc.value.hint and "--banks" in exc.value.hint
    with pytest.raises(DataError, match="GRPO row 1"):
        problems_of_rows([{"problem_id": "x", "problem": "{not json"}])
    with pytest.raises(DataError, match="GRPO row 1"):
        problems_of_rows([{"problem_id": "x", "problem": "[1, 2]"}])
