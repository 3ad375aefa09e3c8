"""GatewayPolicy + GatewaySearch drive the shared episode runner end to end through a real gateway."""

from __future__ import annotations

import json

import pytest

from shoparena.env import run_episode
from shoparena.llm.gateway import Gateway
from shoparena.sdk import Gateway as Client
from shoparena.sdk import GatewayPolicy, GatewaySearch
from tests.gateway import DIRECTIVE, REACT, make_gateway, make_service

PROBLEM = {"problem_id": "bow-1", "query": "Violin bow with horsetail hair", "reward": {"secret": True}}


@pytest.fixture(scope="module")
def service(tiny_products, tmp_path_factory):
    return make_service(tiny_products, tmp_path_factory.mktemp("ep"))


def _episode(gateway: Gateway, run_id: str, **overrides):
    handle = gateway.open_run(run_id, problem_id=PROBLEM["problem_id"], models=[REACT, DIRECTIVE])
    with gateway.serve() as srv, Client(srv.address, handle.token, REACT) as c:
        episode = run_episode(PROBLEM, GatewayPolicy(gateway=c, seed=1), GatewaySearch(c), **overrides)
    return episode, gateway.close_run(handle.token)


@pytest.mark.parametrize(("style", "protocol"), [("native", "native"), ("qwen3", "native"), ("native", "tags")])
def test_react_episode_through_the_gateway_is_all_axis_a(service, style, protocol) -> None:
    episode, log = _episode(make_gateway(service, style=style), f"ep-{style}-{protocol}", protocol=protocol)
    assert episode.stop_reason == "terminate" and episode.recommendation == "3706669986"
    assert episode.inference_total == 3 and episode.error is None
    assert [(r.kind, r.path.rsplit("/", 1)[-1]) for r in log] == [
        ("inference", "completions"), ("search", "find_product"), ("inference", "completions"),
        ("search", "view_product_information"), ("inference", "completions")]
    searches = [r for r in log if r.kind == "search"]
    assert [(r.axis, r.via, r.attributed_to) for r in searches] == [("A", None, 0), ("A", None, 2)]
    # the observations the agent saw are what the gateway says it returned
    found = episode.steps[0]["completion"]["message"]["obs"][0]["results"]
    assert [p["product_id"] for p in found] == searches[0].result_product_ids
    assert all("secret" not in json.dumps(r.params) for r in log)


def test_oro7_composite_tools_are_attributed_via_their_name(service) -> None:
    specs = [{"q": "violin bow", "price": "0-500"}, {"q": "drum sticks"}]
    reply = {"content": "", "tool_calls": [
        {"name": "find_products_in_same_shop", "arguments": {"product_queries": json.dumps(specs)}},
        {"name": "check_product_match", "arguments": {"product_id": "3706669986",
                                                      "requirements": json.dumps({"material": "horsetail"})}},
        {"name": "calculate_voucher", "arguments": {"product_prices": "256,150", "voucher_type": "fixed",
                                                    "discount_value": 50, "threshold": 300, "budget": 400}},
        {"name": "terminate", "arguments": {"status": "success"}}]}
    gateway = make_gateway(service)
    handle = gateway.open_run("ep-oro7", models=[DIRECTIVE])
    problem = {"problem_id": "shop-1", "query": json.dumps({"reply": reply})}
    with gateway.serve() as srv, Client(srv.address, handle.token, DIRECTIVE) as c:
        episode = run_episode(problem, GatewayPolicy(gateway=c), GatewaySearch(c), protocol="native", profile="oro7")
    results = [o["results"] for o in episode.steps[0]["completion"]["message"]["obs"]]
    assert results[0]["found"] is True and results[1]["matched"] is True
    assert results[2]["total_after"] == 356
    searches = [r for r in gateway.close_run(handle.token) if r.kind == "search"]
    assert [(r.path.rsplit("/", 1)[-1], r.axis, r.via) for r in searches] == [
        ("find_product", "A", "find_products_in_same_shop"), ("find_product", "A", "find_products_in_same_shop"),
        ("view_product_information", "A", "check_product_match")]
    assert {r.attributed_to for r in searches} == {0}


def test_python_issued_calls_are_axis_b(service, monkeypatch) -> None:
    import shoparena.sdk as sdk

    gateway = make_gateway(service)
    handle = gateway.open_run("ep-pipeline", models=[DIRECTIVE])
    with gateway.serve() as srv:
        for key, value in srv.env(handle).items():
            monkeypatch.setenv(key, value)
        sdk.chat([{"role": "user", "content": "classify: violin bow"}])  # the LLM only classifies
        hits = sdk.find_product("violin bow", price="0-500")
        sdk.view_product_information([hits[0]["product_id"]])
    log = gateway.close_run(handle.token)
    assert [(r.kind, r.axis) for r in log] == [("inference", None), ("search", "B"), ("search", "B")]
