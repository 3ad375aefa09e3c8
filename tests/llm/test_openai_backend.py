"""The ``openai:`` backend against real servers on loopback: our ``serve`` app and small FastAPI apps."""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from shoparena._http import BackgroundServer
from shoparena.env.types import AssistantMessage
from shoparena.errors import ConfigError
from shoparena.llm.openai_backend import OpenAIBackend, parse_openai_uri
from shoparena.llm.serve import create_app
from shoparena.llm.types import Sampling, chat_sync, get_backend
from shoparena.llm.wire import BackendError
from tests.hung_server import Mode, hung_server
from tests.llm.test_serve import REPLY, USER, FixedBackend

TOOLS = [{"type": "function", "function": {"name": "find_product", "parameters": {"type": "object"}}}]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def once(backend: OpenAIBackend, *args: Any) -> AssistantMessage:
    async with backend:
        return await backend.chat(*args)


@pytest.mark.parametrize(("rest", "expected"), [
    ("http://127.0.0.1:8000/v1/Qwen/Qwen3-4B", ("http://127.0.0.1:8000/v1", "Qwen/Qwen3-4B")),
    ("https://api.example.com/v1/gpt-4o-mini", ("https://api.example.com/v1", "gpt-4o-mini")),
    ("http://localhost:11434/v1/llama3.1:8b", ("http://localhost:11434/v1", "llama3.1:8b")),
    ("http://127.0.0.1:30000/my-model", ("http://127.0.0.1:30000", "my-model")),
    ("http://host/api/openai/deployments/model", ("http://host/api/openai/deployments", "model")),
])
def test_uri_rules(rest: str, expected: tuple[str, str]) -> None:
    assert parse_openai_uri(rest) == expected


@pytest.mark.parametrize("rest", ["http://127.0.0.1:8000/v1/", "localhost:8000/v1/m", "model-only"])
def test_bad_uris(rest: str) -> None:
    with pytest.raises(ConfigError, match="openai:"):
        parse_openai_uri(rest)


@pytest.fixture
def served() -> Iterator[tuple[FixedBackend, str]]:
    backend = FixedBackend(name="Qwen/Qwen3-4B")
    with BackgroundServer(create_app(backend)) as srv:
        yield backend, srv.url + "/v1"


def test_round_trip_tool_calls_reasoning_usage(served: tuple[FixedBackend, str]) -> None:
    fixed, base = served
    reply = run(once(OpenAIBackend(base, "Qwen/Qwen3-4B"), USER, TOOLS, Sampling()))
    assert reply == REPLY
    assert fixed.calls[-1][1] == TOOLS


def test_sampling_reaches_the_server(served: tuple[FixedBackend, str]) -> None:
    fixed, base = served
    sampling = Sampling(temperature=0.6, top_p=0.95, max_tokens=77, seed=11, stop=["</tool_call>"],
                       enable_thinking=False)
    run(once(OpenAIBackend(base, "Qwen/Qwen3-4B"), USER, None, sampling))
    assert fixed.calls[-1][2] == sampling
    assert fixed.calls[-1][1] is None


def test_fifty_concurrent_calls_share_one_client() -> None:
    class Slow(FixedBackend):
        in_flight = peak = 0

        async def chat(self, *args: Any) -> AssistantMessage:
            Slow.in_flight += 1
            Slow.peak = max(Slow.peak, Slow.in_flight)
            await asyncio.sleep(0.05)
            Slow.in_flight -= 1
            return await super().chat(*args)

    async def main(base: str) -> tuple[list[AssistantMessage], int]:
        async with OpenAIBackend(base, "slow") as backend:
            replies = await asyncio.gather(*(backend.chat(USER, TOOLS) for _ in range(50)))
            clients = {id(backend.client())}
        return replies, len(clients)

    with BackgroundServer(create_app(Slow(name="slow"))) as srv:
        t0 = time.perf_counter()
        replies, n_clients = run(main(srv.url + "/v1"))
        elapsed = time.perf_counter() - t0
    assert replies == [REPLY] * 50 and n_clients == 1
    assert Slow.peak >= 10 and elapsed < 2.0  # sequential calls would take ≥ 2.5 s


def _flaky_app(failures: int) -> tuple[FastAPI, list[float]]:
    """Answers 500 ``failures`` times (the first without a Retry-After, later ones with 10 ms), then a reply."""
    app, attempts = FastAPI(), []

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> JSONResponse:
        attempts.append(time.perf_counter())
        if len(attempts) <= failures:
            headers = {"retry-after-ms": "10"} if len(attempts) > 1 else {}
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500, headers=headers)
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}]})

    return app, attempts


def test_retries_with_backoff_then_succeeds() -> None:
    app, attempts = _flaky_app(failures=2)
    with BackgroundServer(app) as srv:
        reply = run(once(OpenAIBackend(srv.url + "/v1", "m", max_retries=3), USER))
    assert reply.content == "fine" and len(attempts) == 3
    assert attempts[1] - attempts[0] >= 0.3  # the client's exponential backoff (0.5 s ± 25 %)


def test_retries_exhausted_is_a_backend_error() -> None:
    app, attempts = _flaky_app(failures=10)
    with BackgroundServer(app) as srv, pytest.raises(BackendError, match="500: overloaded") as info:
        run(once(OpenAIBackend(srv.url + "/v1", "m", max_retries=1), USER))
    assert len(attempts) == 2 and info.value.status == 500


def test_refused_connection_is_a_clear_error() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(BackendError, match=f"cannot connect to http://127.0.0.1:{port}/v1") as info:
        run(once(OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=0), USER))
    assert "server running" in (info.value.hint or "") and info.value.status is None


def test_client_errors_carry_the_server_message(served: tuple[FixedBackend, str]) -> None:
    _, base = served
    with pytest.raises(BackendError, match="404: The model `other` does not exist") as info:
        run(once(OpenAIBackend(base, "other", max_retries=3), USER))
    assert info.value.status == 404 and "/v1" in (info.value.hint or "")
    with pytest.raises(BackendError, match="400: invalid request: temperature") as info:
        run(once(OpenAIBackend(base, "Qwen/Qwen3-4B"), USER, None, Sampling(temperature=7.0)))


def test_timeout_is_a_clear_error() -> None:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def slow() -> JSONResponse:
        await asyncio.sleep(0.6)
        return JSONResponse({})

    with BackgroundServer(app) as srv, pytest.raises(BackendError, match=r"did not answer within 0\.2 s"):
        run(once(OpenAIBackend(srv.url + "/v1", "m", timeout=0.2, max_retries=0), USER))


def test_raw_server_fields_bad_arguments_and_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    app, seen = FastAPI(), []

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization"))
        message = {"role": "assistant", "content": None, "reasoning": "vLLM's newer field name", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "find_product", "arguments": '{"q": "x"'}},
            {"id": "b", "type": "function", "function": {"name": "terminate", "arguments": ""}}]}
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})

    monkeypatch.setenv("SHOPARENA_OPENAI_API_KEY", "sk-test")
    backend = OpenAIBackend("http://unused/v1", "m")
    with BackgroundServer(app) as srv:
        backend.base_url = srv.url + "/v1"
        reply = run(once(backend, USER))
    assert seen == ["Bearer sk-test"]
    assert reply.reasoning_content == "vLLM's newer field name" and reply.content == ""
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("b", "terminate", {})]
    assert backend.dropped_tool_calls == 1 and reply.usage is not None and reply.usage.total_tokens == 7


def test_openai_over_served_hf_matches_hf_directly(hf_backend: Any) -> None:
    sampling = Sampling(temperature=1.0, seed=4, max_tokens=10)
    direct = run(hf_backend.chat(USER, TOOLS, sampling))
    with BackgroundServer(create_app(hf_backend)) as srv:
        remote = run(once(OpenAIBackend(srv.url + "/v1", "tiny-qwen3"), USER, TOOLS, sampling))
    assert remote == direct and direct.content


def test_sync_calls_close_their_clients(served: tuple[FixedBackend, str], caplog: pytest.LogCaptureFixture) -> None:
    backend = OpenAIBackend(served[1], "Qwen/Qwen3-4B")
    assert [chat_sync(backend, USER) for _ in range(3)] == [REPLY] * 3  # a fresh event loop each time
    gc.collect()
    assert not backend._clients and "Unclosed" not in caplog.text


def test_an_answer_that_is_not_a_completion_is_an_error() -> None:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def odd() -> JSONResponse:
        return JSONResponse({"detail": "hello"})

    with BackgroundServer(app) as srv, pytest.raises(BackendError, match="without a chat completion"):
        run(once(OpenAIBackend(srv.url + "/v1", "m"), USER))


def test_openai_uri_resolves_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    monkeypatch.delenv("SHOPARENA_OPENAI_API_KEY", raising=False)
    backend = get_backend("openai:http://127.0.0.1:8000/v1/Qwen/Qwen3-4B")
    assert isinstance(backend, OpenAIBackend)
    assert (backend.base_url, backend.name, backend.api_key) == ("http://127.0.0.1:8000/v1", "Qwen/Qwen3-4B",
                                                                 "sk-fallback")


@pytest.mark.parametrize("mode", ["silent", "headers", "drip"])
def test_a_hung_server_costs_a_call_its_total_bound(mode: Mode) -> None:
    """Connection, reading and retries together stay within ``total_timeout``, even against a server that drips
    its body a byte at a time (each byte within the per-read timeout, which alone would wait forever)."""
    with hung_server(mode) as base, pytest.raises(BackendError, match="within") as info:
        run(asyncio.wait_for(once(OpenAIBackend(base, "m", timeout=1.0, max_retries=1, total_timeout=4.0), USER),
                             60))
    assert info.value.status is None and info.value.hint


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_a_timeout_from_the_environment_must_be_positive_seconds(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("SHOPARENA_OPENAI_TIMEOUT", value)
    with pytest.raises(ConfigError, match="SHOPARENA_OPENAI_TIMEOUT"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m")


def test_zero_retries_from_the_environment_is_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOPARENA_OPENAI_MAX_RETRIES", "0")
    assert OpenAIBackend("http://127.0.0.1:9/v1", "m").max_retries == 0
    monkeypatch.setenv("SHOPARENA_OPENAI_MAX_RETRIES", "-2")
    with pytest.raises(ConfigError, match="SHOPARENA_OPENAI_MAX_RETRIES"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m")
