"""The OpenAI-compatible server: exact wire format, streaming, errors, and the ``hf:`` backend behind it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.env.types import AssistantMessage, ToolCall, Usage
from shoparena.errors import ConfigError
from shoparena.llm.serve import create_app
from shoparena.llm.types import Sampling
from shoparena.llm.wire import BackendError, request_to_sampling, to_openai_message, to_openai_response

REPLY = AssistantMessage(
    content="Searching now.", reasoning_content="The user wants a dress.",
    tool_calls=[ToolCall(id="call_1", name="find_product", arguments={"q": "red dress", "page": 1}),
                ToolCall(id="call_2", name="view_product_information", arguments={"product_ids": "1,2"})],
    usage=Usage(prompt_tokens=40, completion_tokens=12, total_tokens=52),
)
USER = [{"role": "user", "content": "a red dress"}]


class FixedBackend:
    """A real backend that answers every request with ``reply`` and remembers what it was asked."""

    def __init__(self, reply: AssistantMessage = REPLY, name: str = "fixed", error: Exception | None = None) -> None:
        self.name, self.reply, self.error = name, reply, error
        self.calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, Sampling | None]] = []

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        self.calls.append((messages, tools, sampling))
        if self.error is not None:
            raise self.error
        return self.reply


@pytest.fixture
def fixed() -> Iterator[tuple[FixedBackend, str]]:
    backend = FixedBackend()
    with BackgroundServer(create_app(backend)) as srv:
        yield backend, srv.url


def test_response_wire_format(fixed: tuple[FixedBackend, str]) -> None:
    _, url = fixed
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "fixed", "messages": USER})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "fixed" and body["id"].startswith("chatcmpl-")
    assert isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["index"] == 0
    assert choice["message"] == {
        "role": "assistant", "content": "Searching now.", "reasoning_content": "The user wants a dress.",
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "find_product", "arguments": '{"q": "red dress", "page": 1}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "view_product_information", "arguments": '{"product_ids": "1,2"}'}},
        ]}
    assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}


def test_request_fields_reach_the_backend(fixed: tuple[FixedBackend, str]) -> None:
    backend, url = fixed
    tools = [{"type": "function", "function": {"name": "find_product", "parameters": {"type": "object"}}}]
    httpx.post(f"{url}/v1/chat/completions", json={
        "model": "fixed", "messages": USER, "tools": tools, "temperature": 0.7, "top_p": 0.9, "max_tokens": 64,
        "seed": 3, "stop": "</tool_call>", "chat_template_kwargs": {"enable_thinking": False},
        "tool_choice": "auto", "logprobs": False,  # accepted and ignored
    }).raise_for_status()
    messages, got_tools, sampling = backend.calls[-1]
    assert messages == USER and got_tools == tools
    assert sampling == Sampling(temperature=0.7, top_p=0.9, max_tokens=64, seed=3, stop=["</tool_call>"],
                                enable_thinking=False)


def test_plain_answer_finishes_with_stop() -> None:
    backend = FixedBackend(AssistantMessage(content="Here you go."), name="plain")
    with BackgroundServer(create_app(backend, model_name="served-name")) as srv:
        body = httpx.post(f"{srv.url}/v1/chat/completions", json={"messages": USER}).json()
        models = httpx.get(f"{srv.url}/v1/models").json()
        health = httpx.get(f"{srv.url}/health").json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Here you go."}
    assert body["model"] == "served-name"
    assert [m["id"] for m in models["data"]] == ["served-name"] and models["object"] == "list"
    assert health == {"status": "ok", "model": "served-name"}


def test_stream_is_valid_sse(fixed: tuple[FixedBackend, str]) -> None:
    _, url = fixed
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={
            "model": "fixed", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in r.iter_lines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    delta = chunks[0]["choices"][0]["delta"]
    assert delta["content"] == "Searching now." and delta["reasoning_content"] == "The user wants a dress."
    assert [tc["index"] for tc in delta["tool_calls"]] == [0, 1]
    assert json.loads(delta["tool_calls"][0]["function"]["arguments"]) == {"q": "red dress", "page": 1}
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"]["total_tokens"] == 52


@pytest.mark.parametrize(("body", "status", "fragment"), [
    ({"model": "fixed", "messages": []}, 400, "messages"),
    ({"model": "fixed", "messages": USER, "temperature": 5}, 400, "temperature"),
    ({"model": "fixed", "messages": USER, "n": 2}, 400, "n"),
    ({"model": "gpt-4o", "messages": USER}, 404, "gpt-4o"),
])
def test_bad_requests_are_openai_errors(fixed: tuple[FixedBackend, str], body: dict, status: int,
                                        fragment: str) -> None:
    r = httpx.post(f"{fixed[1]}/v1/chat/completions", json=body)
    assert r.status_code == status
    error = r.json()["error"]
    assert fragment in error["message"] and error["type"] in ("invalid_request_error", "not_found_error")


def test_non_json_body_and_unknown_route(fixed: tuple[FixedBackend, str]) -> None:
    r = httpx.post(f"{fixed[1]}/v1/chat/completions", content=b"{nope")
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    assert httpx.get(f"{fixed[1]}/v1/nothing").json()["error"]["message"] == "Not Found"


@pytest.mark.parametrize(("error", "status"), [
    (ConfigError("bad sampling"), 400),
    (BackendError("upstream down"), 502),
    (BackendError("upstream says no", status=429), 429),
    (RuntimeError("boom"), 500),
])
def test_backend_failures_map_to_status(error: Exception, status: int) -> None:
    with BackgroundServer(create_app(FixedBackend(error=error))) as srv:
        r = httpx.post(f"{srv.url}/v1/chat/completions", json={"messages": USER})
    assert r.status_code == status
    assert str(error).split("\n")[0] in r.json()["error"]["message"]


def test_request_to_sampling_defaults_aliases_and_cap() -> None:
    assert request_to_sampling({"messages": USER}) == Sampling()
    assert request_to_sampling({"messages": USER, "max_completion_tokens": 9, "enable_thinking": True}) == \
        Sampling(max_tokens=9, enable_thinking=True)
    assert request_to_sampling({"messages": USER}, max_tokens_cap=100).max_tokens == 100
    assert request_to_sampling({"messages": USER, "max_tokens": 500}, max_tokens_cap=100).max_tokens == 100


def test_length_finish_and_stable_ids_for_unnamed_calls() -> None:
    truncated = AssistantMessage(content="and then", usage=Usage(prompt_tokens=5, completion_tokens=8))
    assert to_openai_response(truncated, "m", max_tokens=8)["choices"][0]["finish_reason"] == "length"
    assert to_openai_response(truncated, "m", max_tokens=9)["choices"][0]["finish_reason"] == "stop"
    unnamed = AssistantMessage(tool_calls=[ToolCall(name="find_product", arguments={"q": "violin bow", "page": 1})])
    first = to_openai_response(unnamed, "m")["choices"][0]["message"]
    assert first["tool_calls"][0]["id"] == "6MtnW7sD" == to_openai_message(unnamed)["tool_calls"][0]["id"]
    assert first["content"] is None


def test_serves_the_hf_backend(hf_backend: Any) -> None:
    with BackgroundServer(create_app(hf_backend)) as srv:
        r = httpx.post(f"{srv.url}/v1/chat/completions", timeout=30, json={
            "model": "tiny-qwen3", "messages": USER, "max_tokens": 6, "temperature": 0})
        again = httpx.post(f"{srv.url}/v1/chat/completions", timeout=30, json={
            "model": "tiny-qwen3", "messages": USER, "max_tokens": 6, "temperature": 0})
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["message"] == again.json()["choices"][0]["message"]
    assert 1 <= body["usage"]["completion_tokens"] <= 6
    assert body["choices"][0]["finish_reason"] == ("length" if body["usage"]["completion_tokens"] == 6 else "stop")
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]


def test_cli_serve_starts_a_server(tmp_path: Any) -> None:
    """``shoparena llm serve`` in a subprocess, on a Unix socket, fronting an ``openai:`` backend."""
    import os
    import subprocess
    import sys
    import time

    sock = tmp_path / "llm.sock"
    cmd = [sys.executable, "-c", "from shoparena.cli.llm import app; app()", "serve",
           "--model", "openai:http://127.0.0.1:9/v1/Qwen/Qwen3-4B", "--uds", str(sock), "--name", "served"]
    env = {**os.environ, "SHOPARENA_OPENAI_MAX_RETRIES": "0"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), proc.stderr.read().decode() if proc.poll() is not None else "no socket"
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://llm") as client:
            assert client.get("/health").json() == {"status": "ok", "model": "served"}
            r = client.post("/v1/chat/completions", json={"model": "served", "messages": USER})
        assert r.status_code == 502 and "cannot connect" in r.json()["error"]["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
