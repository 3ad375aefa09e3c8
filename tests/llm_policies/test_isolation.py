"""The policies never see ground truth: they read only ``messages`` + ``tools`` (+ sampling)."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

from shoparena.catalog.search import SearchService
from shoparena.env import run_episode
from shoparena.llm.policies import PolicyBackend, get_policy
from shoparena.tasks.types import Problem
from tests.llm_policies.conftest import Sampled

POLICY_DIR = Path(inspect.getfile(PolicyBackend)).parent
EVALUATION_ONLY = {"accuracy.py"}


def test_policy_modules_import_no_task_or_scoring_code() -> None:
    """Only the evaluation helper (``accuracy.py``) may touch problem records; the policy code imports nothing
    that holds rewards, vouchers or scores."""
    for path in sorted(POLICY_DIR.glob("*.py")):
        if path.name in EVALUATION_ONLY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(("shoparena.tasks", "shoparena.scoring", "shoparena.llm.policies.accuracy")), (
                    path.name, name)


def test_the_chat_interface_takes_only_the_conversation() -> None:
    for fn in (PolicyBackend.chat, PolicyBackend.complete):
        assert list(inspect.signature(fn).parameters) == ["self", "messages", "tools", "sampling"]


def test_same_trajectory_from_a_problem_record_or_the_bare_query(problems: list[Problem],
                                                                  svc: SearchService) -> None:
    """A problem with its reward and voucher, and the same query as a plain string, give identical episodes."""
    for p in problems[::7]:
        for protocol in ("tags", "native"):
            full = run_episode(p, Sampled(get_policy("expert"), 0.7, seed=4), svc, protocol=protocol, profile="oro7")
            bare = run_episode(p.query, Sampled(get_policy("expert"), 0.7, seed=4), svc, protocol=protocol,
                               profile="oro7")
            assert [s["completion"]["content"] for s in full.steps] == [s["completion"]["content"] for s in bare.steps]


def test_no_reward_data_reaches_the_policy(problems: list[Problem], svc: SearchService) -> None:
    """Before any observation, nothing of the reward (GT ids, GT titles) or voucher internals is in the request;
    at no point do reward/voucher field names appear."""
    for p in problems:
        pol = Sampled(get_policy("expert"), 0.7, seed=0)
        run_episode(p, pol, svc, protocol="native", profile="oro7")
        first: list[dict[str, Any]] = pol.requests[0][0]
        text = json.dumps(first, ensure_ascii=False)
        for item in p.reward:
            assert item.product_id not in text and item.title[0] not in text
        for messages, tools in pol.requests:
            blob = json.dumps([messages, tools], ensure_ascii=False)
            for secret in ("price_after_voucher", "reward_title_embeddings", '"reward"', "face_value", p.problem_id):
                assert secret not in blob
