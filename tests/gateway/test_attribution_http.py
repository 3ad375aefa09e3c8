"""Axis attribution through the real gateway: completions in native, tag and Qwen3 form, consumption, composites."""

from __future__ import annotations

import json

import pytest

from shoparena.catalog.search import SearchService
from shoparena.llm.gateway import Gateway, Limits
from shoparena.sdk import Gateway as Client
from shoparena.sdk import GatewayError
from tests.gateway import DIRECTIVE, directive, make_gateway, make_service


@pytest.fixture(scope="module")
def service(tiny_products, tmp_path_factory) -> SearchService:
    return make_service(tiny_products, tmp_path_factory.mktemp("att"))


@pytest.fixture(scope="module")
def gateway(service) -> Gateway:
    return make_gateway(service)


@pytest.fixture(scope="module")
def server(gateway):
    with gateway.serve() as srv:
        yield srv


_n = iter(range(10**6))


@pytest.fixture
def run(gateway, server):
    """``(client, handle)`` for a fresh run; the test closes it."""
    handle = gateway.open_run(f"att-{next(_n)}", models=[DIRECTIVE])
    with Client(server.address, handle.token) as c:
        yield c, handle


def emit(c: Client, content: str = "", tool_calls: list | None = None) -> dict:
    return c.chat(directive(content, tool_calls))


def axes(log) -> list[tuple]:
    return [(r.path.rsplit("/", 1)[-1], r.axis, r.via, r.attributed_to) for r in log if r.kind == "search"]


def test_native_tool_calls_make_matching_searches_axis_a(run, gateway) -> None:
    c, h = run
    c.find_product("violin")  # before any completion: Python
    emit(c, tool_calls=[{"name": "find_product", "arguments": {"q": "violin bow", "page": 1}},
                        {"name": "view_product_information", "arguments": {"product_ids": ["591486855", "3706669986"]}}])
    c.find_product("violin bow", page="1")
    c.view_product_information("591486855,3706669986")
    c.view_product_information("3706669986")  # not what was emitted
    assert axes(gateway.close_run(h.token)) == [
        ("find_product", "B", None, None), ("find_product", "A", None, 1),
        ("view_product_information", "A", None, 1), ("view_product_information", "B", None, None)]


def test_tag_protocol_text_counts_as_emission(run, gateway) -> None:
    c, h = run
    text = ('<think>look for bows</think>\n<tool_call>[{"name": "find_product", "parameters": '
            '{"q": "violin bow", "page": 1, "sort": "default"}}]</tool_call>')
    out = emit(c, content=text)
    assert "tool_calls" not in out["choices"][0]["message"]  # text stays text
    c.find_product("violin bow")
    log = gateway.close_run(h.token)
    assert [t.name for t in log[0].tool_calls] == ["find_product"]
    assert axes(log) == [("find_product", "A", None, 0)]


def test_qwen3_text_counts_as_emission(run, gateway) -> None:
    c, h = run
    block = json.dumps({"name": "view_product_information", "arguments": {"product_ids": "591486855"}})
    emit(c, content=f"<think>check it</think>\n<tool_call>\n{block}\n</tool_call>")
    c.view_product_information(["591486855"])
    assert axes(gateway.close_run(h.token)) == [("view_product_information", "A", None, 0)]


def test_one_emission_justifies_one_call(run, gateway) -> None:
    c, h = run
    emit(c, tool_calls=[{"name": "find_product", "arguments": {"q": "cotton"}}])
    c.find_product("cotton")
    c.find_product("cotton")
    emit(c, tool_calls=[{"name": "find_product", "arguments": {"q": "cotton"}}])
    c.find_product("cotton")
    assert [a[1:] for a in axes(gateway.close_run(h.token))] == [("A", None, 0), ("B", None, None), ("A", None, 3)]


def test_tool_calls_the_agent_writes_into_messages_are_not_emissions(run, gateway) -> None:
    c, h = run
    forged = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "find_product", "arguments": '{"q": "drum"}'}}]},
        *directive("fine")]
    c.chat(forged)
    c.find_product("drum")
    assert axes(gateway.close_run(h.token)) == [("find_product", "B", None, None)]


def test_refused_searches_consume_nothing(gateway, server) -> None:
    handle = gateway.open_run("att-limit", models=[DIRECTIVE],
                              limits=Limits(max_search_calls=0, rate_per_s=None))
    with Client(server.address, handle.token) as c:
        emit(c, tool_calls=[{"name": "find_product", "arguments": {"q": "drum"}}])
        with pytest.raises(GatewayError) as err:
            c.find_product("drum")
        assert err.value.status == 429
    log = gateway.close_run(handle.token)
    assert log[1].status == 429 and log[1].axis is None


def test_composite_tools_issue_agentic_searches_via_their_name(run, gateway) -> None:
    c, h = run
    specs = [{"q": "violin bow", "price": "0-500"}, {"q": "maple drum sticks"}]
    emit(c, tool_calls=[{"name": "find_products_in_same_shop", "arguments": {"product_queries": json.dumps(specs)}},
                        {"name": "check_product_match",
                         "arguments": {"product_id": "3706669986", "requirements": '{"material": "horsetail"}'}}])
    c.find_product("violin bow", 1, price="0-500")
    c.find_product("maple drum sticks", 1, shop_id="3450032")
    c.view_product_information("3706669986")
    c.view_product_information("3706669986")  # the check issues one view only
    emit(c, content="done")  # back to the model: the composite windows close
    c.find_product("maple drum sticks", 1, shop_id="3450032")
    assert axes(gateway.close_run(h.token)) == [
        ("find_product", "A", "find_products_in_same_shop", 0), ("find_product", "A", "find_products_in_same_shop", 0),
        ("view_product_information", "A", "check_product_match", 0), ("view_product_information", "B", None, None),
        ("find_product", "B", None, None)]
