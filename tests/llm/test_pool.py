"""A pool of OpenAI-compatible replicas behind ``openai:…?replica=…``, against real servers in their own processes.

Each replica is this project's model server (:func:`shoparena.llm.serve.create_app`, or ``shoparena llm serve``)
in a subprocess on a loopback port, so "a replica dies" is its process being killed. The echo replicas answer each
request with their label and the request's last user message, after a delay: every answer says which replica gave
it and to which request, and calls stay in flight long enough to kill a replica under them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoparena.errors import ConfigError
from shoparena.llm.openai_backend import OpenAIBackend, from_uri, parse_openai_pool_uri, parse_openai_uri
from shoparena.llm.pool import PooledOpenAIBackend
from shoparena.llm.types import Sampling
from shoparena.llm.wire import BackendError
from tests.hung_server import hung_server

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

ECHO_REPLICA = r'''
import asyncio, sys
import uvicorn
from shoparena._http import bind_socket
from shoparena.env.types import AssistantMessage
from shoparena.llm.serve import create_app

label, delay, port = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])

class Echo:
    name = "m"

    async def chat(self, messages, tools=None, sampling=None):
        await asyncio.sleep(delay)
        return AssistantMessage(content=f"{label}|{messages[-1]['content']}")

posts = 0
app = create_app(Echo())

@app.middleware("http")
async def count(request, call_next):
    global posts
    posts += request.method == "POST"
    return await call_next(request)

@app.get("/posts")
async def seen():
    return {"posts": posts}

sock = bind_socket("127.0.0.1", port)
print(sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="error", access_log=False, lifespan="off")).run(sockets=[sock])
'''
"""A replica: ``python -c ECHO_REPLICA LABEL DELAY PORT`` (port 0: any free one) prints its port, then serves
model ``m``; ``GET /posts`` counts the POSTs it received."""


class Replica:
    def __init__(self, label: str, delay: float, port: int = 0) -> None:
        self.label = label
        self.proc = subprocess.Popen([sys.executable, "-c", ECHO_REPLICA, label, str(delay), str(port)], env=ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = port

    def ready(self) -> Replica:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.strip(), f"replica {self.label} did not start: {self.proc.stderr.read() if self.proc.stderr else ''}"
        self.port = int(line)
        deadline = time.monotonic() + 20
        while True:  # the port is bound before uvicorn serves it
            try:
                httpx.get(f"{self.root}/health", timeout=2).raise_for_status()
                return self
            except httpx.HTTPError:
                assert time.monotonic() < deadline, f"replica {self.label} never answered /health"
                time.sleep(0.05)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        return self.root + "/v1"

    def posts(self) -> int:
        return int(httpx.get(f"{self.root}/posts", timeout=5).json()["posts"])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


@contextmanager
def replicas(*specs: tuple[str, float]) -> Iterator[list[Replica]]:
    """Echo replicas ``(label, delay)``, started together, stopped (killed) at the end."""
    started = [Replica(label, delay) for label, delay in specs]
    try:
        yield [r.ready() for r in started]
    finally:
        for r in started:
            r.stop()


def ask(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"request {i}"}]


def who(reply: Any, i: int) -> str:
    """The label of the replica that answered request ``i`` (and that the answer is to request ``i``)."""
    label, _, echoed = reply.content.partition("|")
    assert echoed == f"request {i}", reply.content
    return label


def closed_port() -> int:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ── the URI ───────────────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("rest", "bases", "model", "cooloff"), [
    ("http://127.0.0.1:8000/v1/Qwen/Qwen3-4B", ("http://127.0.0.1:8000/v1",), "Qwen/Qwen3-4B", None),
    ("http://a:8000/v1/Qwen/Qwen3-4B?replica=http://b:8000/v1&replica=https://c/v1/",
     ("http://a:8000/v1", "http://b:8000/v1", "https://c/v1"), "Qwen/Qwen3-4B", None),
    ("http://a/v1/m?replica=http%3A%2F%2Fb%2Fv1&cooloff=2.5", ("http://a/v1", "http://b/v1"), "m", 2.5),
    ("http://a:30000/my-model?replica=http://b:30000", ("http://a:30000", "http://b:30000"), "my-model", None),
])
def test_pool_uri_forms(rest: str, bases: tuple[str, ...], model: str, cooloff: float | None) -> None:
    target = parse_openai_pool_uri(rest)
    assert (target.base_urls, target.model, target.cooloff) == (bases, model, cooloff)
    assert parse_openai_uri(rest) == (bases[0], model)  # the first server, as one-server callers read it
    backend = from_uri(rest)
    if len(bases) == 1:
        assert type(backend) is OpenAIBackend and (backend.base_url, backend.name) == (bases[0], model)
    else:
        assert isinstance(backend, PooledOpenAIBackend) and backend.name == model
        assert [r.base_url for r in backend.replicas] == [b.rstrip("/") for b in bases]
        assert backend.cooloff == (cooloff or 30.0)


@pytest.mark.parametrize(("rest", "says"), [
    ("http://a/v1/m?", "not key=value"),
    ("http://a/v1/m?replica=", "not key=value"),
    ("http://a/v1/m?replicas=http://b/v1", "unknown option 'replicas'"),
    ("http://a/v1/m?cooloff=5", "names no replica"),
    ("http://a/v1/m?replica=b:8000/v1", "not an http(s):// base URL"),
    ("http://a/v1/m?replica=http://b/v1/m", "goes on past /v1"),
    ("http://a/v1/m?replica=http://a/v1/", "named twice"),
    ("http://a/v1/m?replica=http://b/v1&cooloff=-1", "positive number"),
    ("http://a/v1/m?replica=http://b/v1&cooloff=soon", "positive number"),
    ("http://a/v1/?replica=http://b/v1", "cannot read"),
])
def test_bad_pool_uris_are_config_errors(rest: str, says: str) -> None:
    with pytest.raises(ConfigError, match="openai:") as info:
        parse_openai_pool_uri(rest)
    assert says in info.value.message and info.value.hint


def test_a_pool_uri_is_one_model_where_uris_are_listed_with_commas() -> None:
    from shoparena.evaluate.core import parse_models

    uri = "openai:http://a:8000/v1/Qwen/Qwen3-4B?replica=http://b:8000/v1&replica=http://c:8000/v1"
    [entry] = parse_models(f"pool={uri}")
    assert (entry.label, entry.uri) == ("pool", uri)
    assert [e.uri for e in parse_models(f"policy:expert,{uri}")] == ["policy:expert", uri]


# ── spreading and failover ────────────────────────────────────────────────────────────────────────────────


def test_calls_go_to_the_replica_with_the_least_outstanding_work() -> None:
    """Four calls take turns (A B A B); once B's are answered and A's are still running, four more go B B, then
    A and B in turn again: each to the replica with the fewest in flight (plain turns would give A B A B)."""

    async def main(pool: PooledOpenAIBackend) -> tuple[list[str], list[str], list[int]]:
        first = [asyncio.create_task(pool.chat(ask(i))) for i in range(4)]
        deadline = time.monotonic() + 20
        while pool.stats()[1]["answered"] < 2:  # B (fast) answered its two; A (slow) still holds its two
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert pool.stats()[0]["in_flight"] == 2
        second = [asyncio.create_task(pool.chat(ask(i))) for i in range(4, 8)]
        await asyncio.sleep(0)  # each new call has chosen its replica
        in_flight = [s["in_flight"] for s in pool.stats()]
        replies = await asyncio.gather(*first, *second)
        labels = [who(r, i) for i, r in enumerate(replies)]
        await pool.aclose()
        return labels[:4], labels[4:], in_flight

    with replicas(("A", 4.0), ("B", 0.05)) as (a, b):
        pool = PooledOpenAIBackend([a.base, b.base], "m")
        first, second, in_flight = asyncio.run(main(pool))
        posts = (a.posts(), b.posts())
    assert first == ["A", "B", "A", "B"]
    assert second == ["B", "B", "A", "B"] and in_flight == [3, 3]
    assert posts == (3, 5)
    assert [(s["answered"], s["failed"], s["in_flight"], s["up"]) for s in pool.stats()] == [
        (3, 0, 0, True), (5, 0, 0, True)]


def test_a_replica_killed_under_a_batch_loses_no_call() -> None:
    """Twenty calls in flight, ten on each replica; B's process is killed before it answers any: its ten fail
    (connection reset, then refused) and each is answered by A, to the right request."""

    async def main(pool: PooledOpenAIBackend, b: Replica) -> list[str]:
        calls = [asyncio.create_task(pool.chat(ask(i))) for i in range(20)]
        deadline = time.monotonic() + 20
        while await asyncio.to_thread(b.posts) < 10:  # B holds its ten
            assert time.monotonic() < deadline
        b.kill()
        replies = await asyncio.gather(*calls)
        await pool.aclose()
        return [who(r, i) for i, r in enumerate(replies)]

    with replicas(("A", 1.0), ("B", 1.0)) as (a, b):
        pool = PooledOpenAIBackend([a.base, b.base], "m", max_retries=1, cooloff=60)
        labels = asyncio.run(main(pool, b))
        a_posts = a.posts()
    assert labels == ["A"] * 20
    assert a_posts == 20
    (sa, sb) = pool.stats()
    assert (sa["answered"], sa["failed"], sa["up"]) == (20, 0, True)
    assert (sb["answered"], sb["failed"], sb["up"]) == (0, 10, False)
    assert "cannot connect" in sb["last_error"] or "Server disconnected" in sb["last_error"]


def test_a_cancelled_call_frees_its_place() -> None:
    """A call cancelled while a replica generates (the gateway drops a closed run's calls) is no longer counted in
    flight there, and the replica stays in the pool."""

    async def main(pool: PooledOpenAIBackend) -> tuple[list[int], list[str]]:
        slow = asyncio.create_task(pool.chat(ask(0)))
        deadline = time.monotonic() + 20
        while pool.stats()[0]["in_flight"] == 0:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        in_flight = [s["in_flight"] for s in pool.stats()]
        labels = [who(await pool.chat(ask(i)), i) for i in (1, 2)]
        await pool.aclose()
        return in_flight, labels

    with replicas(("A", 0.5), ("B", 0.5)) as (a, b):
        pool = PooledOpenAIBackend([a.base, b.base], "m")
        in_flight, labels = asyncio.run(main(pool))
    assert in_flight == [0, 0]
    assert sorted(labels) == ["A", "B"]  # both still in the pool, taking turns
    assert [(s["failed"], s["up"]) for s in pool.stats()] == [(0, True), (0, True)]


def test_every_replica_dead_is_a_backend_error_naming_them() -> None:
    ports = [closed_port(), closed_port()]
    pool = PooledOpenAIBackend([f"http://127.0.0.1:{p}/v1" for p in ports], "m", max_retries=0, cooloff=60,
                               probe_timeout=2)

    async def main() -> list[Any]:
        out = await asyncio.gather(*(pool.chat(ask(i)) for i in range(3)), return_exceptions=True)
        out.append(await asyncio.gather(pool.chat(ask(3)), return_exceptions=True))  # both left out: probed first
        await pool.aclose()
        return out

    *batch, (late,) = asyncio.run(main())
    for outcome in [*batch, late]:
        assert isinstance(outcome, BackendError), outcome
        assert all(f"127.0.0.1:{p}" in outcome.message for p in ports) and "no replica of 'm'" in outcome.message
        assert "probed again" in (outcome.hint or "")
    for outcome in batch:  # chained to the last replica's own error, the connection failure
        assert isinstance(outcome.__cause__, BackendError) and "cannot connect" in outcome.__cause__.message
    assert "probe failed" in late.message
    assert [s["up"] for s in pool.stats()] == [False, False]
    assert sum(s["answered"] for s in pool.stats()) == 0


def test_a_hung_replica_times_out_and_the_call_is_answered_elsewhere() -> None:
    async def main(pool: PooledOpenAIBackend) -> list[str]:
        replies = [await pool.chat(ask(i)) for i in range(3)]
        await pool.aclose()
        return [who(r, i) for i, r in enumerate(replies)]

    with hung_server("silent") as hung, replicas(("A", 0.0)) as (a,):
        pool = PooledOpenAIBackend([hung, a.base], "m", timeout=0.5, max_retries=0, cooloff=60)
        labels = asyncio.run(main(pool))
    assert labels == ["A", "A", "A"]
    assert [(s["answered"], s["failed"], s["up"]) for s in pool.stats()] == [(0, 1, False), (3, 0, True)]
    assert "did not answer within 0.5 s" in pool.stats()[0]["last_error"]


@pytest.mark.parametrize(("model", "sampling", "status"), [
    ("m", Sampling(temperature=7.0), 400),  # the server refuses the request: every replica would
    ("other", Sampling(), 404),  # no replica serves that model
])
def test_a_refused_request_is_not_sent_to_another_replica(model: str, sampling: Sampling, status: int) -> None:
    async def main(pool: PooledOpenAIBackend) -> BackendError:
        with pytest.raises(BackendError) as info:
            await pool.chat(ask(0), None, sampling)
        await pool.aclose()
        return info.value

    with replicas(("A", 0.0), ("B", 0.0)) as (a, b):
        pool = PooledOpenAIBackend([a.base, b.base], model, max_retries=2)
        error = asyncio.run(main(pool))
        posts = (a.posts(), b.posts())
    assert error.status == status and f"{status}:" in error.message
    assert posts == (1, 0)  # once, to the first replica, and never retried
    assert [(s["refused"], s["failed"], s["up"]) for s in pool.stats()] == [(1, 0, True), (0, 0, True)]


def test_a_recovered_replica_is_used_again_after_its_cooloff(caplog: pytest.LogCaptureFixture) -> None:
    """B dies and is left out; restarted on its port, it is probed once its cool-off is over and gets calls
    again."""
    caplog.set_level(logging.INFO, logger="shoparena.llm.pool")

    async def main(pool: PooledOpenAIBackend, b: Replica) -> tuple[list[str], list[str]]:
        before = [who(await pool.chat(ask(i)), i) for i in range(4)]  # B is dead: A answers all, B left out
        restarted = await asyncio.to_thread(lambda: Replica("B", 0.0, b.port).ready())
        after: list[str] = []
        deadline = time.monotonic() + 20
        try:
            while "B" not in after:
                assert time.monotonic() < deadline, after
                i = len(before) + len(after)
                after.append(who(await pool.chat(ask(i)), i))
                await asyncio.sleep(0.05)
            after += [who(await pool.chat(ask(i)), i) for i in range(100, 104)]
        finally:
            restarted.stop()
            await pool.aclose()
        return before, after

    with replicas(("A", 0.0), ("B", 0.0)) as (a, b):
        b.kill()
        pool = PooledOpenAIBackend([a.base, b.base], "m", max_retries=0, cooloff=0.5)
        before, after = asyncio.run(main(pool, b))
    assert before == ["A"] * 4
    assert after[-4:] == ["A", "B", "A", "B"] or after[-4:] == ["B", "A", "B", "A"]  # back in turn with A
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"replica {b.base} of m left out") for m in messages)
    assert any(m.startswith(f"replica {b.base} of m answers again") for m in messages)


# ── an evaluation through a pool ──────────────────────────────────────────────────────────────────────────


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "shoparena", "llm", "serve", "--model", "policy:careful",
                             "--name", "careful", "--port", str(port)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _wait_health(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).raise_for_status()
            return
        except httpx.HTTPError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "shoparena llm serve did not start"
            time.sleep(0.05)


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _run_steps(out: Path) -> dict[str, bytes]:
    """Each episode's steps as sorted-key JSON, without the wall-clock fields (when and how fast it ran)."""
    from shoparena.store.types import canonical_json

    wall_clock = ("timestamp", "execution_time")
    return {steps[0]["extra_info"]["problem_id"]: canonical_json(
        [{**s, "extra_info": {k: v for k, v in (s.get("extra_info") or {}).items() if k not in wall_clock}}
         for s in steps]) for steps in _lines(out / "rollouts.jsonl")}


def test_an_evaluation_survives_a_replica_killed_mid_run(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight episodes of the ReAct agent through the gateway, the model two ``shoparena llm serve`` replicas of
    the ``careful`` policy; the second replica's process is killed once two episodes have finished. Every episode
    finishes; every inference call was answered by a replica; the episodes are byte for byte those of the same
    run straight from the policy."""
    from shoparena.validator.run import RunConfig, run_agents
    from tests.worlds import small_world

    monkeypatch.setenv("SHOPARENA_OPENAI_MAX_RETRIES", "1")
    caplog.set_level(logging.DEBUG, logger="shoparena.llm.pool")
    catalog, problems, _ = small_world(tmp_path, size=300, catalog_seed=3, n=8, problem_seed=5)
    ports = [_free_port(), _free_port()]
    procs = [_serve(p) for p in ports]
    bases = [f"http://127.0.0.1:{p}/v1" for p in ports]
    finished: list[int] = []

    def progress(k: int) -> None:
        finished.append(k)
        if sum(finished) == 2:
            procs[1].kill()
            procs[1].wait(timeout=10)
            logging.getLogger(__name__).warning("killed")

    try:
        for proc, port in zip(procs, ports, strict=True):
            _wait_health(proc, port)
        uri = f"openai:{bases[0]}/careful?replica={bases[1]}&cooloff=600"
        summary = run_agents(catalog, problems, RunConfig(agent="react", model=uri, concurrency=2),
                             tmp_path / "pooled", progress=progress)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stderr:
                proc.stderr.close()
    assert procs[1].returncode is not None and sum(finished) == 8
    assert summary.statuses == {"SUCCESS": 8}
    runs = _lines(tmp_path / "pooled" / "runs.jsonl")
    assert len(runs) == 8 and all(r["status"] == "SUCCESS" and r["error"] is None for r in runs)
    inference = [c for c in _lines(tmp_path / "pooled" / "calls.jsonl") if c["kind"] == "inference"]
    assert inference and all(c["status"] == 200 for c in inference)

    # who answered: each answered call is logged once with its replica; once the killed one is left out, none by it
    log = [r.getMessage() for r in caplog.records]
    answered = [m.rpartition(" answered by ")[2] for m in log if " answered by " in m]
    assert len(answered) == len(inference) and set(answered) == set(bases)
    left_out = next(i for i, m in enumerate(log) if m.startswith(f"replica {bases[1]} of careful left out"))
    assert left_out > log.index("killed")
    after = [m.rpartition(" answered by ")[2] for m in log[left_out:] if " answered by " in m]
    assert after and set(after) == {bases[0]}

    # nothing wrong: the same episodes and scores as the policy itself gives, without servers
    direct = run_agents(catalog, problems, RunConfig(agent="react", model="policy:careful", concurrency=2),
                        tmp_path / "direct")
    assert _run_steps(tmp_path / "pooled") == _run_steps(tmp_path / "direct")
    assert (summary.asr, summary.pass_at_k) == (direct.asr, direct.pass_at_k)


def test_shoparena_serve_fronts_a_pool_as_one_endpoint() -> None:
    """``shoparena serve --model openai:…?replica=…`` is one endpoint over the replicas: it keeps answering, the
    same answer, when one replica dies, and answers 502 naming both when the other dies too."""
    ports = [_free_port(), _free_port()]
    replicas_ = [_serve(p) for p in ports]
    front_port = _free_port()
    pool_uri = f"openai:http://127.0.0.1:{ports[0]}/v1/careful?replica=http://127.0.0.1:{ports[1]}/v1"
    front = subprocess.Popen([sys.executable, "-m", "shoparena", "serve", "--model", pool_uri, "--name", "front",
                              "--port", str(front_port)], env={**ENV, "SHOPARENA_OPENAI_MAX_RETRIES": "0"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    body = {"model": "front", "messages": [{"role": "user", "content": "a red dress under 50 dollars"}]}
    url = f"http://127.0.0.1:{front_port}/v1/chat/completions"
    try:
        for proc, port in [*zip(replicas_, ports, strict=True), (front, front_port)]:
            _wait_health(proc, port)
        first = httpx.post(url, json=body, timeout=30).json()["choices"][0]["message"]
        replicas_[1].kill()
        replicas_[1].wait(timeout=10)
        after = [httpx.post(url, json=body, timeout=30) for _ in range(4)]
        replicas_[0].kill()
        replicas_[0].wait(timeout=10)
        dead = httpx.post(url, json=body, timeout=30)
    finally:
        for proc in (*replicas_, front):
            proc.kill()
            proc.wait(timeout=10)
            if proc.stderr:
                proc.stderr.close()
    assert first["role"] == "assistant" and (first.get("content") or first.get("tool_calls"))
    assert [r.status_code for r in after] == [200] * 4
    assert all(r.json()["choices"][0]["message"] == first for r in after)
    message = dead.json()["error"]["message"]
    assert dead.status_code == 502 and "no replica of 'careful' answered" in message
    assert all(f"127.0.0.1:{p}" in message for p in ports)
