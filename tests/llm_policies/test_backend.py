"""The policies as chat backends: both protocols and tool profiles, finishing, determinism, replay, levels."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shoparena.catalog.search import SearchService
from shoparena.env import run_episode
from shoparena.env.protocol_native import parse_qwen3, parse_reply_native
from shoparena.env.protocol_tags import parse_reply_tags
from shoparena.env.tools import get_toolset
from shoparena.errors import ConfigError
from shoparena.llm.policies import LEVELS, PolicyBackend, get_policy, policy_names
from shoparena.llm.types import Sampling, get_backend
from shoparena.scoring import format_reward
from shoparena.tasks.types import Problem
from tests.llm_policies.conftest import Sampled

HARNESSES = [("tags", "upstream4"), ("tags", "oro7"), ("native", "upstream4"), ("native", "oro7")]
TAG_REPLY = re.compile(r"^<think>[^<]+</think>\n<tool_call>\[.+\]</tool_call>$", re.S)


def calls_of(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["name"], str(c["parameters"])) for s in steps for c in s["completion"]["message"].get("tool_call", [])]


def fresh(level: str) -> PolicyBackend:
    return PolicyBackend(LEVELS[level])


def test_registry() -> None:
    assert policy_names() == ["random", "novice", "careful", "expert"]
    assert get_backend("policy:expert") is get_policy("expert")
    assert get_policy("expert").name == "policy:expert"


@pytest.mark.parametrize("level", ["random", "novice", "careful", "expert"])
@pytest.mark.parametrize(("protocol", "profile"), HARNESSES)
def test_episodes_finish_with_recommend_then_terminate(level: str, protocol: str, profile: str,
                                                       by_bucket: dict[str, Problem], svc: SearchService) -> None:
    names = get_toolset(profile).names
    for problem in by_bucket.values():
        ep = run_episode(problem, Sampled(get_policy(level), 0.7, seed=3), svc, protocol=protocol, profile=profile)
        assert ep.stop_reason == "terminate" and len(ep.steps) <= 25
        msgs = [s["completion"]["message"] for s in ep.steps]
        assert [c["name"] for c in msgs[-1]["tool_call"]] == ["terminate"]
        assert any(c["name"] == "recommend_product" for c in msgs[-2]["tool_call"])
        n = len(problem.reward)
        assert len(ep.recommendation.split(",")) == (1 if problem.bucket == "product" else n)
        for s, m in zip(ep.steps, msgs, strict=True):
            assert m["think"] and m["tool_call"] and not s["extra_info"].get("parse_errors")
            assert {c["name"] for c in m["tool_call"]} <= names
            assert format_reward(s["completion"]["content"]) == 1.0


@pytest.mark.parametrize("profile", ["upstream4", "oro7"])
def test_tag_replies_are_upstream_format(profile: str, by_bucket: dict[str, Problem], svc: SearchService) -> None:
    pol = Sampled(get_policy("expert"), 0.7, seed=1)
    seen: list[str] = []

    class Spy:
        def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            assert tools == [] and messages[1]["content"].startswith("# Dialogue Records History")
            reply = pol.respond(messages, tools)
            seen.append(reply.content)
            assert not reply.tool_calls
            return reply

    run_episode(by_bucket["shop"], Spy(), svc, protocol="tags", profile=profile)
    names = get_toolset(profile).names
    for content in seen:
        assert TAG_REPLY.match(content), content[:200]
        from shoparena.env.types import AssistantMessage

        parsed = parse_reply_tags(AssistantMessage(content=content), names)
        assert parsed.calls and not parsed.errors


def test_native_replies_use_api_tool_calls(by_bucket: dict[str, Problem], svc: SearchService) -> None:
    replies = []
    pol = Sampled(get_policy("expert"))

    class Spy:
        def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            assert tools and messages[1] == {"role": "user", "content": by_bucket["voucher"].query}
            replies.append(pol.respond(messages, tools))
            return replies[-1]

    ep = run_episode(by_bucket["voucher"], Spy(), svc, protocol="native", profile="oro7")
    names = get_toolset("oro7").names
    for r in replies:
        assert r.tool_calls and r.reasoning_content and not r.content
        parsed = parse_reply_native(r, names)
        assert parsed.think == r.reasoning_content and not parsed.errors
    assert "calculate_voucher" in {n for n, _ in calls_of(ep.steps)}


def test_qwen3_text_when_no_tools_are_passed(by_bucket: dict[str, Problem]) -> None:
    messages = [{"role": "system", "content": "You are a shopping assistant."},
                {"role": "user", "content": by_bucket["product"].query}]
    reply = get_policy("careful").complete(messages, None, Sampling())
    parsed = parse_qwen3(reply.content, get_toolset("upstream4").names)
    assert parsed.think and [c["name"] for c in parsed.calls] == ["find_product"] and not parsed.response


def test_react_ablation_has_no_think(by_bucket: dict[str, Problem], svc: SearchService) -> None:
    ep = run_episode(by_bucket["product"], Sampled(get_policy("expert")), svc, protocol="tags", react=True)
    assert ep.stop_reason == "terminate"
    assert all(s["completion"]["content"].startswith("<tool_call>") for s in ep.steps)


@pytest.mark.parametrize(("protocol", "profile"), [("tags", "upstream4"), ("native", "oro7")])
def test_same_seed_same_episode_even_without_the_cache(protocol: str, profile: str, problems: list[Problem],
                                                        svc: SearchService) -> None:
    for problem in problems[::9]:
        a = run_episode(problem, Sampled(fresh("expert"), 0.8, seed=5), svc, protocol=protocol, profile=profile)
        b = run_episode(problem, Sampled(fresh("expert"), 0.8, seed=5), svc, protocol=protocol, profile=profile)
        assert [s["completion"]["content"] for s in a.steps] == [s["completion"]["content"] for s in b.steps]


def test_replay_from_scratch_equals_the_cached_continuation(by_bucket: dict[str, Problem],
                                                            svc: SearchService) -> None:
    """Answer every recorded request again, newest first, on a fresh backend (each one a cache miss)."""
    for protocol in ("tags", "native"):
        pol = Sampled(fresh("expert"), 0.7, seed=2)
        ep = run_episode(by_bucket["shop"], pol, svc, protocol=protocol, profile="oro7")
        other = fresh("expert")
        for k in reversed(range(len(pol.requests))):
            messages, tools = pol.requests[k]
            again = other.complete(messages, tools or None, pol.sampling)
            assert again.content == ep.steps[k]["completion"]["content"] or protocol == "native"
            if protocol == "native":
                assert [(c.name, c.arguments) for c in again.tool_calls] == [
                    (c["name"], c["parameters"]) for c in ep.steps[k]["completion"]["message"]["tool_call"]]
        assert other.replays == len(pol.requests)


def test_seeds_differ_at_temperature_and_agree_when_greedy(problems: list[Problem], svc: SearchService) -> None:
    hot, cold = set(), set()
    for seed in range(6):
        for problem in problems[:6]:
            hot.add((problem.problem_id, tuple(calls_of(
                run_episode(problem, Sampled(get_policy("expert"), 0.9, seed=seed), svc).steps))))
            cold.add((problem.problem_id, tuple(calls_of(
                run_episode(problem, Sampled(get_policy("expert"), 0.0, seed=seed), svc).steps))))
    assert len(cold) == 6  # one trajectory per problem whatever the seed
    varied = sum(sum(pid == p.problem_id for pid, _ in hot) > 1 for p in problems[:6])
    assert varied >= 3, hot


def test_levels_differ_in_what_they_do(problems: list[Problem], svc: SearchService) -> None:
    stats: dict[str, dict[str, float]] = {}
    for level in ("novice", "careful", "expert"):
        queries, views, filtered, episodes = set(), 0, 0, 0
        for problem in problems:
            ep = run_episode(problem, Sampled(get_policy(level), 0.7, seed=0), svc, profile="upstream4")
            episodes += 1
            for name, params in ((c["name"], c["parameters"]) for s in ep.steps
                                 for c in s["completion"]["message"].get("tool_call", [])):
                if name == "find_product":
                    queries.add((problem.problem_id, params["q"]))
                    filtered += "price" in params or "service" in params
                views += name == "view_product_information"
        stats[level] = {"queries": len(queries) / episodes, "views": views / episodes, "filtered": filtered}
    assert stats["novice"]["queries"] < stats["careful"]["queries"] <= stats["expert"]["queries"]
    assert stats["novice"]["views"] < stats["careful"]["views"]
    assert stats["novice"]["filtered"] < stats["careful"]["filtered"] < stats["expert"]["filtered"]


def test_novice_searches_the_raw_request(by_bucket: dict[str, Problem], svc: SearchService) -> None:
    ep = run_episode(by_bucket["product"], Sampled(get_policy("novice")), svc)
    first = ep.steps[0]["completion"]["message"]["tool_call"][0]
    assert first["name"] == "find_product" and first["parameters"]["q"] == by_bucket["product"].query.rstrip()


def test_oro_helper_tools_are_used_when_offered(problems: list[Problem], svc: SearchService) -> None:
    used: dict[str, set[str]] = {"careful": set(), "expert": set()}
    for level in used:
        for problem in problems:
            ep = run_episode(problem, Sampled(get_policy(level), 0.7, seed=1), svc, profile="oro7")
            used[level] |= {n for n, _ in calls_of(ep.steps)}
    assert {"find_products_in_same_shop", "calculate_voucher"} <= used["expert"]
    assert {"check_product_match", "find_products_in_same_shop", "calculate_voucher"} <= used["careful"]


def test_think_is_grounded_in_observations(by_bucket: dict[str, Problem], svc: SearchService) -> None:
    ep = run_episode(by_bucket["product"], Sampled(get_policy("expert")), svc)
    seen_ids = {p["product_id"] for s in ep.steps for o in s["completion"]["message"].get("obs", [])
                if isinstance(o["results"], list) for p in o["results"] if isinstance(p, dict)}
    rec = ep.steps[-2]["completion"]["message"]
    assert rec["tool_call"][0]["parameters"]["product_ids"] in rec["think"]
    assert rec["tool_call"][0]["parameters"]["product_ids"] in seen_ids
    assert "₱" in rec["think"] and ("matches" in rec["think"] or "misses" in rec["think"])


def test_a_policy_starts_each_episode_once_and_continues_it_from_its_cache(problems: list[Problem],
                                                                          svc: SearchService) -> None:
    """Every step after an episode's first continues from the cached state instead of replaying the conversation, so
    a step's cost does not grow with the episode (its speed per harness is bench/policies.py's, not a test's)."""
    backend = fresh("expert")
    steps = 0

    class Counted:
        def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            nonlocal steps
            steps += 1
            return backend.complete(messages, tools or None, Sampling(temperature=0.7, seed=0))

    for p in problems:
        run_episode(p, Counted(), svc, protocol="tags", profile="upstream4")
    assert steps > 2 * len(problems)  # episodes of several steps, so continuing matters
    assert backend.replays == len(problems)  # one start per episode, every later step continued from the cache


def test_a_conversation_written_by_other_policies_is_continued(problems: list[Problem], svc: SearchService) -> None:
    """Each step answered by another level (every request a replay of someone else's history)."""

    class Mixed:
        k = 0

        def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            self.k += 1
            level = ("novice", "expert", "careful")[self.k % 3]
            return get_policy(level).complete(messages, tools or None, Sampling(temperature=0.7, seed=self.k))

    for p in problems[::5]:
        for protocol in ("tags", "native"):
            ep = run_episode(p, Mixed(), svc, protocol=protocol, profile="oro7")
            assert ep.stop_reason == "terminate" and ep.error is None


def test_nothing_found_still_terminates(svc: SearchService) -> None:
    ep = run_episode("Find me a zyzzyva quuxotron flange.", Sampled(get_policy("expert")), svc)
    assert ep.stop_reason == "terminate" and len(ep.steps) <= 25


_XPROC = """
import hashlib, sys, tempfile
from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.synthetic import generate_catalog
from shoparena.env import run_episode
from shoparena.llm.policies import get_policy
from shoparena.llm.types import BackendPolicy, Sampling
from shoparena.tasks.generator import generate_problems
ix = SearchIndex.build(generate_catalog(600, 0), tempfile.mkdtemp() + "/ix")
h = hashlib.sha256()
for k, p in enumerate(generate_problems(ix, 6, seed=2)):
    ep = run_episode(p, BackendPolicy(get_policy("expert"), Sampling(temperature=0.8, seed=k)), SearchService(ix))
    h.update("".join(s["completion"]["content"] for s in ep.steps).encode())
print(h.hexdigest())
"""


def test_same_output_in_another_process() -> None:
    """No per-process state (``hash`` randomisation, global RNG) leaks into the replies."""
    import os
    import subprocess
    import sys

    digests = {subprocess.run([sys.executable, "-c", _XPROC], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1


def _view_sizes(problems: list[Problem], svc: SearchService, uri: str) -> tuple[list[int], int]:
    sizes, answered = [], 0
    for p in problems:
        episode = run_episode(p, Sampled(get_backend(uri), 0.7, seed=3), svc, protocol="native", profile="upstream4")
        for step in episode.steps:
            for call in step["completion"]["message"].get("tool_call") or []:
                if call["name"] == "view_product_information":
                    sizes.append(len(str(call["parameters"]["product_ids"]).split(",")))
                answered += call["name"] == "recommend_product"
    return sizes, answered


def test_a_view_cap_bounds_the_products_each_view_call_asks_for(problems: list[Problem], svc: SearchService) -> None:
    chosen = [p for p in problems if p.bucket == "product"][:6]
    plain, _ = _view_sizes(chosen, svc, "policy:expert")
    capped, answered = _view_sizes(chosen, svc, "policy:expert?view=2")
    assert max(plain) > 2  # the expert looks at many candidates at once
    assert capped and max(capped) <= 2  # one item per product problem: at most two ids a call
    assert answered == len(chosen)  # the capped expert still finishes with a recommendation
    none, _ = _view_sizes(chosen[:2], svc, "policy:expert?view=0")
    assert none == []


def test_policy_options_are_checked() -> None:
    from shoparena.llm.policies import get_policy

    assert get_policy("expert?view=2") is get_policy("EXPERT?view=2")  # one shared instance per URI
    assert get_policy("expert?view=2").name == "policy:expert?view=2"
    for bad, words in [("expert?view=11", "from 0 to 10"), ("expert?view=-1", "whole number"),
                       ("expert?view=", "whole number"), ("expert?view=²", "whole number"), ("expert?seed=1", "unknown or repeated"),
                       ("expert?view=1&view=2", "unknown or repeated"), ("judge-strict?view=1", "judge"),
                       ("expret?view=1", "did you mean policy:expert")]:
        with pytest.raises(ConfigError) as info:
            get_policy(bad)
        assert words in f"{info.value} {info.value.hint or ''}", bad
