"""The gateway over real loopback sockets (TCP and Unix): routes, auth, allowlist, limits and the call log."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from shoparena.catalog.search import SearchService
from shoparena.clock import ManualClock
from shoparena.llm.gateway import Gateway, GatewayServer, Limits, dump_record
from shoparena.llm.hf_backend import completion_to_message
from tests.gateway import DIRECTIVE, REACT, directive, make_gateway, make_service


@pytest.fixture(scope="module")
def service(tiny_products, tmp_path_factory) -> SearchService:
    return make_service(tiny_products, tmp_path_factory.mktemp("gw"))


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def gateway(service, clock) -> Gateway:
    return make_gateway(service, clock=clock)


@pytest.fixture(scope="module", params=["tcp", "unix"])
def server(request, gateway) -> Iterator[GatewayServer]:
    if request.param == "tcp":
        with gateway.serve() as srv:
            yield srv
        return
    short = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))  # Unix socket paths are limited to ~107 bytes
    try:
        with gateway.serve(uds=str(short / "gw.sock")) as srv:
            yield srv
    finally:
        shutil.rmtree(short, ignore_errors=True)


def client(srv: GatewayServer, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(uds=srv.uds) if srv.uds else None
    return httpx.Client(base_url=srv.url, headers=headers, transport=transport, timeout=10)


_n = iter(range(10**6))


def open_run(gateway: Gateway, **kw):
    return gateway.open_run(f"run-{next(_n)}", problem_id="p1", **kw)


def test_health_needs_no_token(server) -> None:
    with client(server) as c:
        assert c.get("/health").json()["status"] == "ok"


def test_search_answers_like_the_in_process_service(server, gateway, service) -> None:
    run = open_run(gateway)
    with client(server, run.token) as c:
        params = {"q": "cotton", "page": "1", "price": "-600", "sort": "priceasc", "service": "COD"}
        got = c.get("/search/find_product", params=params)
        assert got.status_code == 200 and got.json() == service.find_product(**params)
        assert c.get("/search/find_product", params={"q": "violin", "page": "9"}).json() == []
        view = c.get("/search/view_product_information", params={"product_ids": "591486855,nope,3706669986"})
        assert view.json() == service.view_product_information("591486855,nope,3706669986")
    log = gateway.close_run(run.token)
    assert [r.seq for r in log] == [0, 1, 2]
    assert log[0].result_product_ids == [p["product_id"] for p in service.find_product(**params)]
    assert log[0].params == params and log[0].kind == "search" and log[0].problem_id == "p1"
    assert log[1].result_product_ids == []
    assert log[2].result_product_ids == ["591486855", "3706669986"]
    assert all(r.axis == "B" and r.status == 200 for r in log)


def test_tokens_missing_wrong_or_closed_get_401_and_are_logged_as_orphans(server, gateway) -> None:
    run = open_run(gateway)
    with client(server) as c:
        assert c.get("/search/find_product", params={"q": "violin"}).status_code == 401
        bad = c.get("/search/find_product", params={"q": "violin"}, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and "token" in bad.json()["error"]["message"]
        assert c.post("/inference/chat/completions", json={}, headers={"Authorization": "Token x"}).status_code == 401
        ok = c.get("/search/find_product", params={"q": "violin"}, headers={"Authorization": f"Bearer {run.token}"})
        assert ok.status_code == 200
        log = gateway.close_run(run.token)
        late = c.get("/search/find_product", params={"q": "late"}, headers={"Authorization": f"Bearer {run.token}"})
        assert late.status_code == 401
    assert len(log) == 1
    orphans = gateway.orphan_calls()
    assert orphans[-1].run_id == run.run_id and orphans[-1].status == 401 and orphans[-1].params == {"q": "late"}
    assert [o.status for o in orphans[-4:-1]] == [401, 401, 401] and orphans[-2].run_id == ""


def test_default_deny(server, gateway) -> None:
    run = open_run(gateway)
    with client(server, run.token) as c:
        raw = c.get("/search/get_product_raw", params={"product_ids": "591486855"})
        assert raw.status_code == 403 and "get_product_raw" in raw.json()["error"]["message"]
        assert c.get("/search/get_product_raw").status_code == 403
        assert c.get("/search/health").status_code == 403
        assert c.get("/find_product", params={"q": "violin"}).status_code == 404
        assert c.get("/etc/passwd").status_code == 404
        assert c.post("/search/find_product").status_code == 405
        assert c.get("/inference/chat/completions").status_code == 405
        assert c.post("/inference/models").status_code == 404
    with client(server) as c:
        assert c.get("/search/get_product_raw").status_code == 403  # even without a token
    log = gateway.close_run(run.token)
    assert [(r.kind, r.status) for r in log] == [
        ("search", 403), ("search", 403), ("search", 403), ("other", 404), ("other", 404), ("search", 405),
        ("inference", 405), ("inference", 404)]
    assert all(r.error and r.axis is None for r in log)


def test_inference_round_trip_and_log(server, gateway) -> None:
    run = open_run(gateway, models=[DIRECTIVE])
    calls = [{"id": "c1", "name": "find_product", "arguments": {"q": "violin", "page": 1}}]
    messages = directive("thinking done", calls, reasoning="why", usage={"prompt_tokens": 9, "completion_tokens": 4,
                                                                        "total_tokens": 13})
    with client(server, run.token) as c:
        body = {"model": DIRECTIVE, "messages": messages, "temperature": 0.5, "seed": 3,
                "tools": [{"type": "function", "function": {"name": "find_product", "parameters": {}}}]}
        got = c.post("/inference/chat/completions", json=body).json()
        no_model = c.post("/inference/chat/completions", json={"messages": directive("x")})
        assert no_model.status_code == 200 and no_model.json()["model"] == DIRECTIVE  # the run's first model
    msg = got["choices"][0]["message"]
    assert got["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["content"] == "thinking done" and msg["reasoning_content"] == "why"
    assert msg["tool_calls"][0]["function"] == {"name": "find_product", "arguments": '{"q": "violin", "page": 1}'}
    assert got["usage"]["total_tokens"] == 13
    rec = gateway.close_run(run.token)[0]
    assert rec.kind == "inference" and rec.model == DIRECTIVE and rec.status == 200
    assert rec.usage.completion_tokens == 4 and rec.content == "thinking done"
    assert [(t.name, t.arguments, t.id) for t in rec.tool_calls] == [("find_product", {"q": "violin", "page": 1}, "c1")]
    assert "messages" not in rec.params and "tools" not in rec.params
    assert rec.params["n_messages"] == 1 and len(rec.params["messages_sha256"]) == 64
    assert rec.params["tool_names"] == ["find_product"] and rec.params["temperature"] == 0.5


def test_what_the_parser_dropped_is_logged_not_sent(server, gateway) -> None:
    """A local backend's completion with a malformed and an unclosed ``<tool_call>`` block: the agent gets neither
    (no tool call, the text around them), the call log says what was dropped; a clean completion notes nothing."""
    run = open_run(gateway, models=[DIRECTIVE])
    bad = ('<think>pick one</think><tool_call>{"name": "find_product", "arguments": {"q": "mug"</tool_call> hm '
           '<tool_call>{"name": "recommend_product"')
    good = '<tool_call>{"name": "find_product", "arguments": {"q": "mug"}}</tool_call>'
    with client(server, run.token) as c:
        got = [c.post("/inference/chat/completions",
                      json={"model": DIRECTIVE, "messages": [{"role": "user", "content": json.dumps({"reply": {
                          "text": text}})}]}).json() for text in (bad, good)]
    msg = got[0]["choices"][0]["message"]
    assert not msg.get("tool_calls") and msg["content"] == "hm" and "parse_notes" not in msg
    assert got[1]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "find_product"
    first, second = gateway.close_run(run.token)
    assert first.tool_calls == [] and first.content == "hm"
    assert len(first.parse_notes) == 2 and "malformed <tool_call> block" in first.parse_notes[0]
    assert "unclosed <tool_call> block dropped" in first.parse_notes[1]
    assert second.parse_notes is None and [t.name for t in second.tool_calls] == ["find_product"]
    assert "parse_notes" in dump_record(first).decode() and "parse_notes" not in completion_to_message(bad).model_dump()


def test_model_allowlist_and_bad_bodies(server, gateway) -> None:
    run = open_run(gateway, models=[DIRECTIVE])
    with client(server, run.token) as c:
        other = c.post("/inference/chat/completions", json={"model": REACT, "messages": directive("x")})
        assert other.status_code == 403 and REACT in other.json()["error"]["message"]
        evil = {"model": "openai:http://evil.example/v1/x", "messages": directive("x")}
        assert c.post("/inference/chat/completions", json=evil).status_code == 403
        assert c.post("/inference/chat/completions", content=b"{not json").status_code == 400
        assert c.post("/inference/chat/completions", json={"model": DIRECTIVE}).status_code == 400
        hot = c.post("/inference/chat/completions", json={"model": DIRECTIVE, "messages": directive("x"),
                                                           "temperature": 9})
        assert hot.status_code == 400 and "temperature" in hot.json()["error"]["message"]
        boom = c.post("/inference/chat/completions", json={"model": DIRECTIVE, "messages": directive("RAISE")})
        assert boom.status_code == 502 and "backend exploded" in boom.json()["error"]["message"]
    log = gateway.close_run(run.token)
    assert [r.status for r in log] == [403, 403, 400, 400, 400, 502]
    assert log[0].model == REACT and all(r.error for r in log)


def test_open_run_rejects_models_outside_the_gateway_allowlist(gateway) -> None:
    from shoparena.errors import ConfigError

    with pytest.raises(ConfigError):
        gateway.open_run("x-run", models=["policy:expert"])
    handle = gateway.open_run("dup-run")
    with pytest.raises(ConfigError):
        gateway.open_run("dup-run")
    gateway.close_run(handle.token)
    gateway.close_run(gateway.open_run("dup-run").token)  # the id is free again once closed


def test_search_and_inference_count_limits_answer_429(server, gateway) -> None:
    run = open_run(gateway, limits=Limits(max_search_calls=2, max_inference_calls=1, rate_per_s=None))
    with client(server, run.token) as c:
        codes = [c.get("/search/find_product", params={"q": "violin"}).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        chat = {"model": DIRECTIVE, "messages": directive("x")}
        assert [c.post("/inference/chat/completions", json=chat).status_code for _ in range(2)] == [200, 429]
        final = c.get("/search/view_product_information", params={"product_ids": "1"}).json()["error"]
        assert "limit" in final["message"] and final["type"] == "limit_exceeded" and "retry_after" not in final
    log = gateway.close_run(run.token)
    assert [r.status for r in log] == [200, 200, 429, 200, 429, 429]


def test_rate_limit_is_a_token_bucket(server, gateway, clock) -> None:
    run = open_run(gateway, limits=Limits(rate_per_s=20, burst=3, max_search_calls=None))
    with client(server, run.token) as c:

        def find() -> int:
            return c.get("/search/find_product", params={"q": "violin"}).status_code

        answers = [c.get("/search/find_product", params={"q": "violin"}) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        err = answers[3].json()["error"]
        assert err["type"] == "rate_limited"
        assert err["retry_after"] == pytest.approx(0.05)  # one token at 20/s
        clock.advance(0.04)  # 0.8 of a token: still refused
        assert find() == 429
        clock.advance(0.07)  # 0.8 + 1.4 tokens: two calls pass, the third waits again
        assert [find(), find(), find()] == [200, 200, 429]
        clock.advance(3600)  # an idle hour refills only up to the burst
        assert [find() for _ in range(4)] == [200, 200, 200, 429]
    assert [r.status for r in gateway.close_run(run.token)] == [200, 200, 200, 429, 429, 200, 200, 429,
                                                               200, 200, 200, 429]


def test_completion_token_budget(server, gateway) -> None:
    run = open_run(gateway, limits=Limits.unlimited().model_copy(update={"max_completion_tokens": 10}))
    backend = gateway._backends[DIRECTIVE]
    with client(server, run.token) as c:
        usage = {"prompt_tokens": 1, "completion_tokens": 7, "total_tokens": 8}
        chat = {"model": DIRECTIVE, "messages": directive("x", usage=usage), "max_tokens": 100}
        assert c.post("/inference/chat/completions", json=chat).status_code == 200
        assert backend.samplings[-1].max_tokens == 10  # clamped to the budget
        assert c.post("/inference/chat/completions", json=chat).status_code == 200
        assert backend.samplings[-1].max_tokens == 3  # what was left
        over = c.post("/inference/chat/completions", json=chat)
        assert over.status_code == 429 and "budget" in over.json()["error"]["message"]
    gateway.close_run(run.token)


def test_body_size_limit_413_with_and_without_content_length(server, gateway) -> None:
    run = open_run(gateway, limits=Limits.unlimited().model_copy(update={"max_body_bytes": 1000}))
    big = b'{"model": "test:directive", "messages": [' + b'{"role": "user", "content": "x"},' * 60 + b"{}]}"
    with client(server, run.token) as c:
        assert c.post("/inference/chat/completions", content=big).status_code == 413
        chunked = c.post("/inference/chat/completions", content=iter([big[:600], big[600:]]))
        assert chunked.status_code == 413 and "1000" in chunked.json()["error"]["message"]
        assert c.post("/inference/chat/completions", json={"model": DIRECTIVE, "messages": directive("x")}).status_code == 200
    assert [r.status for r in gateway.close_run(run.token)] == [413, 413, 200]


def test_default_limits_are_orolike() -> None:
    limits = Limits()
    assert (limits.rate_per_s, limits.burst, limits.max_body_bytes) == (30.0, 50, 10 * 1024 * 1024)
    with pytest.raises(ValueError):
        Limits(bogus=1)


def test_log_records_timings_and_one_record_per_request(server, gateway) -> None:
    run = open_run(gateway)
    t_start = int(time.time() * 1000)
    with client(server, run.token) as c:
        for q in ("violin", "cotton", "drum"):
            c.get("/search/find_product", params={"q": q})
        c.get("/nowhere")
        c.post("/inference/chat/completions", json={"model": DIRECTIVE, "messages": directive("x")})
    t_end = int(time.time() * 1000)
    log = gateway.close_run(run.token)
    assert len(log) == 5 and [r.seq for r in log] == list(range(5))
    assert all(t_start <= r.started_at <= t_end and 0 < r.duration_ms < 1000 for r in log)
    assert [r.started_at for r in log] == sorted(r.started_at for r in log)
    assert all(r.run_id == run.run_id for r in log)
    with pytest.raises(ValidationError):
        log[0].status = 500  # frozen


def test_oversized_parameter_values_are_logged_as_hashes(server, gateway) -> None:
    run = open_run(gateway)
    long_q = "violin " * 1000
    with client(server, run.token) as c:
        assert c.get("/search/find_product", params={"q": long_q}).status_code == 200
        body = {"model": DIRECTIVE, "messages": directive("x"), "metadata": {"blob": "z" * 10_000}, "seed": 1}
        assert c.post("/inference/chat/completions", json=body).status_code == 200
    search, chat = gateway.close_run(run.token)
    assert search.params["q"] == {"sha256": hashlib.sha256(long_q.encode()).hexdigest(), "bytes": len(long_q)}
    assert search.result_product_ids  # the search itself saw the full text
    assert set(chat.params["metadata"]) == {"sha256", "bytes"} and chat.params["seed"] == 1


def test_the_openai_client_speaks_to_the_gateway_plain_and_streaming(gateway) -> None:
    openai = pytest.importorskip("openai")
    run = open_run(gateway, models=[DIRECTIVE])
    calls = [{"id": "c9", "name": "find_product", "arguments": {"q": "violin"}}]
    with gateway.serve() as srv:
        client = openai.OpenAI(base_url=srv.url + "/inference", api_key=run.token, max_retries=0)
        plain = client.chat.completions.create(model=DIRECTIVE, messages=directive("hello", calls), seed=2)
        assert plain.choices[0].message.tool_calls[0].function.name == "find_product"
        assert plain.choices[0].finish_reason == "tool_calls"
        stream = client.chat.completions.create(model=DIRECTIVE, messages=directive("streamed"), stream=True,
                                                stream_options={"include_usage": True})
        chunks = list(stream)
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "streamed"
        assert chunks[-1].usage is not None
        with pytest.raises(openai.PermissionDeniedError):
            client.chat.completions.create(model="gpt-4o", messages=directive("x"))
    log = gateway.close_run(run.token)
    assert [(r.status, r.params.get("stream")) for r in log] == [(200, None), (200, True), (403, None)]
    assert log[0].tool_calls[0].id == "c9"
