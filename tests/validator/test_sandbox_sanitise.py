"""Sanitisation: an agent sees the query and harmless metadata, never an answer (docs/arena.md §4, §15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.tasks.loader import load_problems
from shoparena.validator.sandbox import PUBLIC_KEYS, sanitise

SECRET_KEYS = {"reward", "voucher", "reward_title_embeddings", "Knowledge_Attribute", "knowledge_attribute",
               "knowledge_product", "cluster_id", "gt_ids", "suite"}


def _raw_records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        return data["problems"] if isinstance(data, dict) else data
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _secrets(raw: dict) -> list[str]:
    """Strings that would give the answer away: GT ids and titles, embedding keys, the trivia answer."""
    out: list[str] = []
    reward = raw.get("reward")
    for item in reward if isinstance(reward, list) else [reward]:
        if isinstance(item, dict):
            out.append(str(item.get("product_id")))
            titles = item.get("title")
            out += [t for t in (titles if isinstance(titles, list) else [titles]) if isinstance(t, str)]
    out += list(raw.get("reward_title_embeddings") or {})
    answer = raw.get("Knowledge_Attribute")
    if answer is not None and len(str(answer)) >= 8:  # short answers ("2", "red") occur in ordinary text
        out.append(str(answer))
    return [s for s in out if s and s != "None"]


SUITES = sorted((Path(__file__).parents[1] / "data" / "oro_suites").glob("problem_suite_v*.json"))
UPSTREAM = sorted((Path(__file__).parents[1] / "data" / "shoppingbench").glob("synthesize_*_test.jsonl"))


@pytest.mark.parametrize("path", SUITES + UPSTREAM, ids=lambda p: p.stem)
def test_real_problems_lose_every_answer(path: Path) -> None:
    raws = _raw_records(path)
    assert raws
    for raw in raws:
        clean = sanitise(raw, suite=path.stem)
        assert set(clean) <= set(PUBLIC_KEYS) and not set(clean) & SECRET_KEYS
        assert clean["query"] == raw["query"]
        blob = json.dumps(clean, ensure_ascii=False)
        for secret in _secrets(raw):
            if secret not in raw["query"]:
                assert secret not in blob, (path.name, secret[:60])


@pytest.mark.parametrize("path", SUITES + UPSTREAM[:2], ids=lambda p: p.stem)
def test_loaded_and_raw_problems_sanitise_alike(path: Path) -> None:
    problems = load_problems(path)
    for raw, problem in zip(_raw_records(path), problems, strict=True):
        from_problem, from_raw = sanitise(problem), sanitise(raw, suite=path.stem)
        assert from_problem["problem_id"] == from_raw["problem_id"] == problem.problem_id
        assert set(from_problem) <= set(PUBLIC_KEYS)
        assert from_problem["query"] == problem.query
        assert sanitise(from_problem) == from_problem  # idempotent: the sandbox sanitises again on the way in
        assert from_problem.keys() >= problem.public_view().keys()


def test_oro_suite_keeps_only_harmless_metadata() -> None:
    raw = _raw_records(SUITES[-1])[0]
    assert {"reward", "reward_title_embeddings"} <= set(raw)
    clean = sanitise(raw, suite="problem_suite_v3")
    assert set(clean) == {"problem_id", "query", "category", "difficulty", "title"}
    assert clean["title"] == raw["title"]


def test_a_title_repeating_the_answer_is_dropped_and_odd_values_are_ignored() -> None:
    raw = {"problem_id": "p1", "query": "find me a violin bow", "title": "Heart String Violin Bows",
           "reward": {"product_id": "3706669986", "title": ["Heart String Violin Bows Full Size Handmade"]},
           "difficulty": {"nested": "no"}, "category": True, "Knowledge_Attribute": "horsetail hair"}
    assert sanitise(raw) == {"problem_id": "p1", "query": "find me a violin bow"}
    with pytest.raises(ValueError, match="query"):
        sanitise({"problem_id": "p2", "query": "  "})
