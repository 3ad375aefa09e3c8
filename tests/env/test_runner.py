"""The episode runner with scripted policies (docs/shoppingbench.md §5.3)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from shoparena.catalog.search import SearchService
from shoparena.env.records import messages_to_steps
from shoparena.env.runner import arun_episode, resolve_config, run_episode
from shoparena.env.types import AssistantMessage, Episode, StepRecord, ToolCall
from shoparena.errors import ConfigError
from shoparena.scoring.format import format_reward
from shoparena.tasks.types import Problem, RewardItem, Voucher
from tests.env._env_helpers import AsyncScriptedPolicy, FakeClock, ScriptedPolicy, tags

QUERY = "I need a full size violin bow with horsetail hair."
SEARCH = {"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}
RECOMMEND = {"name": "recommend_product", "parameters": {"product_ids": "3706669986"}}
TERMINATE = {"name": "terminate", "parameters": {"status": "success"}}


def calls_of(step: dict[str, Any]) -> list[str]:
    return [c["name"] for c in step["completion"]["message"].get("tool_call", [])]


def test_stop_on_terminate_and_history_5_3(backend: SearchService, clock: FakeClock) -> None:
    pol = ScriptedPolicy([tags("search", [SEARCH]), tags("found it", [RECOMMEND, TERMINATE], "Here you go.")])
    ep = run_episode({"problem_id": "p1", "query": QUERY}, pol, backend, clock=clock)
    assert ep.stop_reason == "terminate" and len(ep.steps) == 2 and ep.recommendation == "3706669986"
    assert ep.inference_total == 2 and ep.inference_failure_count == 0 and ep.n_tool_calls == 3
    first, second = ep.steps
    assert first["extra_info"]["step"] == 1 and first["extra_info"]["problem_id"] == "p1"
    assert first["extra_info"]["query"] == QUERY and "execution_time" in first["extra_info"]
    assert "execution_time" not in second["extra_info"]
    assert first["completion"]["message"]["tool_call"][0]["tool_call_id"] == "6MtnW7sD"
    assert first["completion"]["message"]["obs"][0]["results"][0]["product_id"] == "3706669986"
    assert second["completion"]["message"]["response"] == "Here you go."
    # the second request carries the full history: user, think, tool_call (with id), obs
    system, user = pol.requests[1][0]
    assert system["role"] == "system" and "# Available Tools\n1. Name: find_product" in system["content"]
    assert user["content"].startswith("# Dialogue Records History\n<user>" + QUERY + "</user>\n\n<think>search</think>")
    assert '"tool_call_id":"6MtnW7sD"' in user["content"] and "<obs>" in user["content"]
    assert pol.requests[0][1] == []  # the tag protocol sends no function specs


def test_all_tools_in_a_step_run_even_after_terminate_5_3(backend: SearchService) -> None:
    ep = run_episode(QUERY, ScriptedPolicy([tags("t", [TERMINATE, RECOMMEND])]), backend)
    obs = ep.steps[0]["completion"]["message"]["obs"]
    assert [o["results"] for o in obs] == ["The interaction has been completed with status: success",
                                          "Having recommended the products to the user: 3706669986."]
    assert ep.stop_reason == "terminate" and ep.recommendation == "3706669986"


@pytest.mark.parametrize(("profile", "limit"), [("upstream4", 30), ("oro7", 25)])
def test_max_steps_defaults_5_3(backend: SearchService, profile: str, limit: int) -> None:
    pol = ScriptedPolicy([tags("again", [SEARCH])] * 40)
    ep = run_episode(QUERY, pol, backend, profile=profile)
    assert ep.stop_reason == "max_steps" and len(ep.steps) == limit and ep.config.max_steps == limit
    assert run_episode(QUERY, ScriptedPolicy([tags("a", [SEARCH])] * 5), backend, max_steps=3).steps[-1][
        "extra_info"]["step"] == 3


def test_empty_output_upstream_stops_on_first_and_records_it_5_3(backend: SearchService) -> None:
    ep = run_episode(QUERY, ScriptedPolicy([tags("s", [SEARCH]), "no tags at all", tags("s", [SEARCH])]), backend)
    assert ep.stop_reason == "empty_output" and len(ep.steps) == 2
    assert ep.steps[1]["completion"]["message"] == {} and ep.steps[1]["completion"]["content"] == "no tags at all"
    assert ep.inference_failure_count == 1


def test_empty_output_oro_skips_three_consecutive_5_3(backend: SearchService) -> None:
    replies = ["", "", tags("s", [SEARCH]), "", AssistantMessage(), "", tags("never", [SEARCH])]
    ep = run_episode(QUERY, ScriptedPolicy(replies), backend, profile="oro7")
    assert ep.stop_reason == "empty_output" and len(ep.steps) == 1
    assert ep.steps[0]["extra_info"]["step"] == 3  # ORO keeps counting through skipped empty replies
    assert ep.inference_total == 6 and ep.inference_failure_count == 5


def test_last_recommend_wins_no_early_stop_5_3(backend: SearchService) -> None:
    rec2 = {"name": "recommend_product", "parameters": {"product_ids": ["591486855", "1203344556"]}}
    pol = ScriptedPolicy([tags("a", [RECOMMEND]), tags("b", [SEARCH]), tags("c", [rec2]), tags("d", [TERMINATE])])
    ep = run_episode(QUERY, pol, backend)
    assert len(ep.steps) == 4 and ep.recommendation == "591486855,1203344556"


def test_parallel_calls_execute_in_order_with_ids(backend: SearchService) -> None:
    view = {"name": "view_product_information", "parameters": {"product_ids": "591486855"}}
    ep = run_episode(QUERY, ScriptedPolicy([tags("p", [SEARCH, view, SEARCH]), tags("t", [TERMINATE])]), backend)
    msg = ep.steps[0]["completion"]["message"]
    assert [c["tool_call_id"] for c in msg["tool_call"]] == [o["tool_call_id"] for o in msg["obs"]]
    assert msg["obs"][1]["results"][0]["product_id"] == "591486855"
    assert msg["obs"][0]["results"] == msg["obs"][2]["results"]


def test_tool_error_is_an_observation_and_the_episode_goes_on(backend: SearchService) -> None:
    bad = {"name": "find_product", "parameters": {"q": "violin", "page": "first"}}
    ep = run_episode(QUERY, ScriptedPolicy([tags("oops", [bad]), tags("t", [TERMINATE])]), backend)
    obs = ep.steps[0]["completion"]["message"]["obs"][0]["results"]
    assert obs["argument"] == "page" and obs["tool"] == "find_product"
    assert ep.stop_reason == "terminate" and ep.error is None


def test_unknown_and_malformed_calls_are_recorded_as_parse_errors(backend: SearchService) -> None:
    ep = run_episode(QUERY, ScriptedPolicy([tags("x", [{"name": "buy_now", "parameters": {}}]),
                                            "<think>y</think><tool_call>[{bad json</tool_call>",
                                            tags("t", [TERMINATE])]), backend)
    assert ep.steps[0]["extra_info"]["parse_errors"] == ["unknown tool 'buy_now' skipped"]
    assert ep.steps[1]["extra_info"]["parse_errors"][0].startswith("malformed")
    assert ep.stop_reason == "terminate"


def test_policy_exception_ends_with_error_not_a_crash(backend: SearchService) -> None:
    ep = run_episode(QUERY, ScriptedPolicy([tags("s", [SEARCH]), RuntimeError("model server down")]), backend)
    assert ep.stop_reason == "error" and len(ep.steps) == 1
    assert ep.error is not None and (ep.error.type, ep.error.message) == ("RuntimeError", "model server down")
    assert ep.inference_total == 2 and ep.inference_failure_count == 1
    bad = run_episode(QUERY, ScriptedPolicy([42]), backend)
    assert bad.stop_reason == "error" and bad.error and bad.error.type == "TypeError"


def test_policy_sees_only_the_query_text(backend: SearchService) -> None:
    problem = Problem(problem_id="p-canary", bucket="voucher", query=QUERY,
                      reward=[RewardItem(product_id="CANARY-ID-1", title=["CANARY TITLE"])],
                      voucher=Voucher(voucher_type="platform", threshold=777123, discount_type="fixed",
                                      face_value=31337, price_after_voucher=424242.5, budget=99991),
                      reward_title_embeddings={"CANARY TITLE": [0.5]})
    for protocol in ("tags", "native"):
        pol = ScriptedPolicy([tags("t", [TERMINATE])])
        ep = run_episode(problem, pol, backend, protocol=protocol)
        seen = json.dumps(pol.requests)
        assert QUERY in seen
        for secret in ("CANARY", "777123", "31337", "424242", "99991"):
            assert secret not in seen
        assert ep.problem_id == "p-canary"


def test_timestamps_and_timings_from_the_clock(backend: SearchService) -> None:
    clock = FakeClock(start=1000.0, tick=0.5)
    ep = run_episode(QUERY, ScriptedPolicy([tags("s", [SEARCH]), tags("t", [TERMINATE])]), backend, clock=clock)
    stamps = [s["extra_info"]["timestamp"] for s in ep.steps]
    assert all(isinstance(t, int) and t > 1_000_000 for t in stamps) and stamps == sorted(stamps)
    assert ep.timings.total_s == pytest.approx(ep.steps[0]["extra_info"]["execution_time"])
    assert ep.timings.started_ms == 1000500 and ep.timings.policy_s > 0 and ep.timings.tools_s > 0


def test_auto_recommend_rescue_is_opt_in_5_3(backend: SearchService) -> None:
    script = [tags("s", [SEARCH]), tags("t", [TERMINATE])]
    assert run_episode(QUERY, ScriptedPolicy(script), backend, profile="oro7").recommendation is None
    ep = run_episode(QUERY, ScriptedPolicy(script), backend, profile="oro7", auto_recommend=True)
    assert ep.recommendation == "3706669986" and len(ep.steps) == 3
    last = ep.steps[-1]
    assert last["extra_info"]["auto_recommend"] is True and last["extra_info"]["step"] == 3
    assert last["completion"]["message"]["think"] == "Auto-recommending best available candidates."
    shop = run_episode("Find a shop that sells both a violin bow and strings.", ScriptedPolicy(script), backend,
                       profile="oro7", auto_recommend=True)
    assert shop.recommendation == "3706669986,1203344556"
    done = run_episode(QUERY, ScriptedPolicy([tags("s", [SEARCH, RECOMMEND]), tags("t", [TERMINATE])]), backend,
                       profile="oro7", auto_recommend=True)
    assert len(done.steps) == 2


def test_native_protocol_with_real_qwen3_text_and_api_tool_calls(backend: SearchService, data_dir: Any) -> None:
    raw = json.loads((data_dir / "oro_samples" / "outputs.jsonl").read_text().splitlines()[0])["raw_text"]
    final = AssistantMessage(reasoning_content="Pick the first.", tool_calls=[
        ToolCall(id="call_9", name="recommend_product", arguments={"product_ids": ["3706669986"]}),
        ToolCall(id="call_10", name="terminate", arguments={})])
    pol = ScriptedPolicy([raw, final])
    ep = run_episode(QUERY, pol, backend, protocol="native", profile="oro_sft4")
    assert ep.stop_reason == "terminate" and ep.recommendation == "3706669986"
    messages, tools = pol.requests[1]
    assert tools == ep.tools and tools[0]["function"]["name"] == "find_product"
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[0]["content"].startswith("You are Teacher") and messages[1]["content"] == QUERY
    assert messages[2]["tool_calls"][0]["function"]["name"] == "find_product"
    assert "step_meta" not in messages[2]
    for step in ep.steps:
        assert format_reward(step["completion"]["content"]) == 1.0
    assert [c["tool_call_id"] for c in ep.steps[1]["completion"]["message"]["tool_call"]] == ["call_9", "call_10"]


def test_episode_record_validates_and_messages_round_trip(backend: SearchService) -> None:
    pol = ScriptedPolicy([tags("s", [SEARCH]), tags("t", [RECOMMEND, TERMINATE], "done")])
    ep = run_episode(QUERY, pol, backend, record_prompt=True)
    again = Episode.model_validate_json(ep.model_dump_json())
    assert again == ep
    for step in ep.steps:
        StepRecord.model_validate(step)
    assert [len(s["prompt"]) for s in ep.steps] == [2, 2]
    assert [m["role"] for m in ep.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert messages_to_steps(ep.messages) == ep.steps


def test_async_runner_runs_20_episodes_concurrently(backend: SearchService) -> None:
    order: list[int] = []

    class Tracing(AsyncScriptedPolicy):
        def __init__(self, idx: int) -> None:
            super().__init__([tags(f"s{idx}", [SEARCH]), tags(f"r{idx}", [RECOMMEND, TERMINATE])])
            self.idx = idx

        async def respond(self, messages: list[dict], tools: list[dict]) -> Any:  # type: ignore[override]
            order.append(self.idx)
            return await super().respond(messages, tools)

    async def main() -> list[Episode]:
        return await asyncio.gather(*(arun_episode({"problem_id": f"p{i}", "query": QUERY}, Tracing(i), backend)
                                      for i in range(20)))

    eps = asyncio.run(main())
    assert [e.problem_id for e in eps] == [f"p{i}" for i in range(20)]
    assert all(e.stop_reason == "terminate" and e.recommendation == "3706669986" for e in eps)
    assert order[:20] == list(range(20))  # every episode made its first call before any made its second


def test_sync_runner_accepts_async_policies_outside_a_loop_and_async_runner_sync_ones(backend: SearchService) -> None:
    assert run_episode(QUERY, AsyncScriptedPolicy([tags("t", [TERMINATE])]), backend).stop_reason == "terminate"
    ep = asyncio.run(arun_episode(QUERY, ScriptedPolicy([tags("t", [TERMINATE])]), backend))
    assert ep.stop_reason == "terminate"

    async def inside() -> None:
        with pytest.raises(ConfigError):
            run_episode(QUERY, AsyncScriptedPolicy([]), backend)

    asyncio.run(inside())


def test_config_overrides_and_defaults() -> None:
    cfg = resolve_config(profile="oro7")
    assert (cfg.max_steps, cfg.empty_limit, cfg.record_empty, cfg.tag_flavor) == (25, 3, False, "oro")
    assert resolve_config(max_steps=7).max_steps == 7
    with pytest.raises(ConfigError):
        resolve_config(protocol="smoke")
    with pytest.raises(ConfigError):
        resolve_config(not_a_field=1)


def test_runner_overhead_per_tool_call(backend: SearchService) -> None:
    """Tool calls/s through the whole loop with cheap tools (target ≥ 5,000/s/core; loose bound here)."""
    burst = [{"name": "recommend_product", "parameters": {"product_ids": str(i)}} for i in range(20)]
    pol = ScriptedPolicy([tags("go", burst)] * 25)
    t0 = time.perf_counter()
    ep = run_episode(QUERY, pol, backend, profile="oro7")
    rate = ep.n_tool_calls / (time.perf_counter() - t0)
    assert ep.n_tool_calls == 500 and rate > 2_000, rate


def test_usage_is_summed_over_replies(backend: SearchService) -> None:
    from shoparena.env.types import Usage

    pol = ScriptedPolicy([AssistantMessage(content=tags("s", [SEARCH]), usage=Usage(prompt_tokens=10, completion_tokens=3)),
                          {"content": tags("t", [TERMINATE]),
                           "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}}])
    ep = run_episode(QUERY, pol, backend)
    assert ep.usage == Usage(prompt_tokens=30, completion_tokens=7, total_tokens=24)
    assert run_episode(QUERY, ScriptedPolicy([tags("t", [TERMINATE])]), backend).usage is None


@pytest.mark.parametrize("flavor", ["upstream", "oro", "both"])
def test_record_flavours_and_self_describing_messages_6_1(backend: SearchService, flavor: str) -> None:
    pol = ScriptedPolicy([tags("s", [SEARCH]), tags("t", [TERMINATE])])
    ep = run_episode(QUERY, pol, backend, record_flavor=flavor)
    msg = ep.steps[0]["completion"]["message"]
    assert ("obs" in msg) == (flavor != "oro")
    assert ("result" in msg["tool_call"][0]) == (flavor != "upstream")
    assert messages_to_steps(ep.messages) == ep.steps
