"""Every HTTP service answers bad input with a 4xx and a JSON error in its own shape, never a traceback.

One table per service, each row: method, path, body / headers → the expected status and a word of the message.
The servers are real uvicorn servers on loopback (``tests/http/conftest.py``). Rows marked ``declared`` claim a
``Content-Length`` over the service's body limit and send no body: a 413 then proves the body was refused before
it was read. (A ``Content-Length`` that is not a number never reaches the apps: uvicorn answers it with a plain
400 of its own.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.arena.api import create_app
from shoparena.arena.auth import RequestVerifier, sign_headers
from shoparena.arena.chain import LocalChain
from shoparena.clock import ManualClock
from shoparena.llm.gateway import Gateway
from tests.arena_service import T0, config, make_arena
from tests.gateway import DIRECTIVE, directive
from tests.http import assert_json_error, raw_request
from tests.http.conftest import IDS, Target

USER = [{"role": "user", "content": "a red dress"}]
MiB = 1024 * 1024


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: str
    status: int
    body: Any = None
    """A JSON value to send (``content`` wins when given)."""
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] | None = None
    auth: str | None = None
    """Gateway: ``"run"`` (a valid run token), ``"closed"`` (a closed run's). Arena: an identity name, or
    ``"stale:<name>"`` (signed two minutes ago), ``"forged:<name>"`` (another hotkey's signature)."""
    declared: int | None = None
    """Send only the head, claiming this ``Content-Length``."""
    says: str | None = None


def J(text: str) -> bytes:
    """Raw JSON text, possibly not valid JSON."""
    return text.encode()


CHAT = "/v1/chat/completions"
SERVE = [
    Case("malformed-json", "POST", CHAT, 400, content=J('{"messages": [')),
    Case("nan", "POST", CHAT, 400, content=J('{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}')),
    Case("not-utf8", "POST", CHAT, 400, content=b'{"messages": "\xff\xfe"}'),
    Case("body-is-a-list", "POST", CHAT, 400, body=[1, 2]),
    Case("missing-messages", "POST", CHAT, 400, body={"model": "echo"}, says="messages"),
    Case("messages-a-string", "POST", CHAT, 400, body={"messages": "hi"}, says="messages"),
    Case("messages-empty", "POST", CHAT, 400, body={"messages": []}, says="messages"),
    Case("message-not-an-object", "POST", CHAT, 400, body={"messages": [1]}, says="messages"),
    Case("no-role", "POST", CHAT, 400, body={"messages": [{"content": "hi"}]}, says="role"),
    Case("unknown-role", "POST", CHAT, 400, body={"messages": [{"role": "robot", "content": "hi"}]}, says="role"),
    Case("content-a-number", "POST", CHAT, 400, body={"messages": [{"role": "user", "content": 5}]},
         says="content"),
    Case("image-part", "POST", CHAT, 400, says="image_url", body={"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]}),
    Case("part-without-text", "POST", CHAT, 400, says="content[0]",
         body={"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}),
    Case("temperature-a-word", "POST", CHAT, 400, body={"messages": USER, "temperature": "hot"}, says="temperature"),
    Case("temperature-too-high", "POST", CHAT, 400, body={"messages": USER, "temperature": 7}, says="temperature"),
    Case("max-tokens-zero", "POST", CHAT, 400, body={"messages": USER, "max_tokens": 0}, says="max_tokens"),
    Case("max-tokens-negative", "POST", CHAT, 400, body={"messages": USER, "max_tokens": -5}, says="max_tokens"),
    Case("max-tokens-huge", "POST", CHAT, 400, body={"messages": USER, "max_tokens": 10**40}, says="max_tokens"),
    Case("n-two", "POST", CHAT, 400, body={"messages": USER, "n": 2}, says="n"),
    Case("unknown-model", "POST", CHAT, 404, body={"model": "gpt-9", "messages": USER}, says="gpt-9"),
    Case("text-plain", "POST", CHAT, 415, content=json.dumps({"messages": USER}).encode(),
         headers={"Content-Type": "text/plain"}, says="json"),
    Case("get-on-post-route", "GET", CHAT, 405),
    Case("unknown-path", "GET", "/v1/nope", 404),
    Case("oversized", "POST", CHAT, 413, declared=17 * MiB, headers={"Content-Type": "application/json"},
         says="bytes"),
]

SEARCH = [
    Case("unknown-path", "GET", "/find_products", 404),
    Case("post-on-get-route", "POST", "/find_product", 405, body={"q": "violin"}),
    Case("body-on-a-get", "GET", "/find_product", 413, declared=110 * MiB),
]

CLOSED = "closed"
GATEWAY = [
    Case("no-token", "GET", "/search/find_product", 401, params={"q": "violin"}, says="token"),
    Case("unknown-token", "GET", "/search/find_product", 401, params={"q": "violin"},
         headers={"Authorization": "Bearer not-a-token"}),
    Case("basic-auth", "GET", "/search/find_product", 401, headers={"Authorization": "Basic dXNlcjpwYXNz"}),
    Case("empty-bearer", "GET", "/search/find_product", 401, headers={"Authorization": "Bearer"}),
    Case("closed-run", "GET", "/search/find_product", 401, params={"q": "violin"}, auth=CLOSED),
    Case("raw-products", "GET", "/search/get_product_raw", 403, params={"product_ids": "1"}, auth="run"),
    Case("other-search-path", "GET", "/search/admin", 403, auth="run"),
    Case("unknown-path", "GET", "/nope", 404, auth="run"),
    Case("post-on-search", "POST", "/search/find_product", 405, auth="run"),
    Case("get-on-inference", "GET", "/inference/chat/completions", 405, auth="run"),
    Case("malformed-json", "POST", "/inference/chat/completions", 400, content=J("{not json"), auth="run"),
    Case("nan", "POST", "/inference/chat/completions", 400, auth="run",
         content=J('{"model": "' + DIRECTIVE + '", "messages": [{"role": "user", "content": "x"}], "top_p": NaN}')),
    Case("body-is-a-list", "POST", "/inference/chat/completions", 400, body=[], auth="run"),
    Case("messages-a-string", "POST", "/inference/chat/completions", 400, auth="run",
         body={"model": DIRECTIVE, "messages": "hi"}, says="messages"),
    Case("image-part", "POST", "/inference/chat/completions", 400, auth="run", says="input_audio",
         body={"model": DIRECTIVE, "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}),
    Case("temperature-a-word", "POST", "/inference/chat/completions", 400, auth="run",
         body={"model": DIRECTIVE, "messages": USER, "temperature": "hot"}, says="temperature"),
    Case("max-tokens-negative", "POST", "/inference/chat/completions", 400, auth="run",
         body={"model": DIRECTIVE, "messages": USER, "max_tokens": -1}, says="max_tokens"),
    Case("model-not-allowed", "POST", "/inference/chat/completions", 403, auth="run",
         body={"model": "openai:http://evil.example/v1/m", "messages": USER}, says="not allowed"),
    Case("oversized", "POST", "/inference/chat/completions", 413, auth="run", declared=110 * MiB),
]

WEIGHTS = "/v1/validator/weights"
SELECT = "/v1/miner/race-selection"
ARENA = [
    Case("unsigned", "GET", "/v1/miner/agents", 401),
    Case("forged-signature", "GET", "/v1/miner/agents", 401, auth="forged:miner"),
    Case("stale-signature", "GET", "/v1/miner/agents", 401, auth="stale:miner"),
    Case("unregistered-hotkey", "GET", "/v1/miner/agents", 403, auth="stranger"),
    Case("miner-on-validator-route", "POST", "/v1/validator/work/claim", 403, auth="miner"),
    Case("malformed-json", "PUT", SELECT, 400, content=J('{"agent_version_id": '), auth="miner",
         headers={"Content-Type": "application/json"}, says="json"),
    Case("nan", "POST", WEIGHTS, 400, auth="validator", headers={"Content-Type": "application/json"},
         content=J('{"uids": [1], "weights": [NaN], "ok": true}'), says="json"),
    Case("infinite-score", "POST", "/v1/validator/evaluation-runs/x/complete", 400, auth="validator",
         headers={"Content-Type": "application/json"},
         content=J('{"terminal_status": "SUCCESS", "validator_score": 1e999}'), says="json"),
    Case("wrong-type", "PUT", SELECT, 422, body={"agent_version_id": 5}, auth="miner", says="agent_version_id"),
    Case("missing-fields", "POST", WEIGHTS, 422, body={}, auth="validator", says="uids"),
    Case("extra-field", "PUT", SELECT, 422, body={"agent_version_id": None, "admin": True}, auth="miner",
         says="admin"),
    Case("uids-a-string", "POST", WEIGHTS, 422, body={"uids": "all", "weights": [1], "ok": True},
         auth="validator", says="uids"),
    Case("bad-terminal-status", "POST", "/v1/validator/evaluation-runs/x/complete", 422, auth="validator",
         body={"terminal_status": "GREAT"}, says="terminal_status"),
    Case("text-plain", "PUT", SELECT, 422, content=b'{"agent_version_id": null}', auth="miner",
         headers={"Content-Type": "text/plain"}),
    Case("submit-without-file", "POST", "/v1/miner/submit", 422, auth="miner", content=b"agent_name=a",
         headers={"Content-Type": "application/x-www-form-urlencoded"}, says="file"),
    Case("limit-a-word", "GET", "/v1/public/races", 422, params={"limit": "many"}, says="limit"),
    Case("unknown-race", "GET", "/v1/public/races/race-nope", 404),
    Case("unknown-run", "GET", "/v1/validator/evaluation-runs/nope/problems", 404, auth="validator"),
    Case("unknown-path", "GET", "/v1/public/nope", 404),
    Case("wrong-method", "DELETE", "/v1/public/races", 405),
    Case("oversized", "POST", "/v1/miner/submit", 413, declared=110 * MiB, auth="miner"),
]


def _headers(service: str, target: Target, case: Case) -> dict[str, str]:
    headers = dict(case.headers)
    if service == "gateway" and case.auth is not None:
        gw: Gateway = target.extra["gateway"]
        run = gw.open_run(f"bad-input-{case.id}", models=[DIRECTIVE])
        if case.auth == CLOSED:
            gw.close_run(run.token)
        headers["Authorization"] = f"Bearer {run.token}"
    elif service == "arena" and case.auth is not None:
        how, _, name = case.auth.rpartition(":")
        clock = ManualClock(T0 - 120) if how == "stale" else target.extra["clock"]
        signed = sign_headers(IDS[name].hotkey, clock=clock)
        if how == "forged":
            signed["X-Hotkey"] = IDS["validator"].hotkey_ss58
        headers.update(signed)
    return headers


TABLE = [(svc, c) for svc, cases in (("serve", SERVE), ("search", SEARCH), ("gateway", GATEWAY), ("arena", ARENA))
         for c in cases]


@pytest.mark.parametrize(("service", "case"), TABLE, ids=[f"{s}-{c.id}" for s, c in TABLE])
def test_bad_input_gets_a_4xx_json_error(service: str, case: Case, request: pytest.FixtureRequest) -> None:
    target: Target = request.getfixturevalue(service)
    headers = _headers(service, target, case)
    if case.declared is not None:
        status, got, raw = raw_request(target.url, case.method, case.path,
                                       {**headers, "Content-Length": str(case.declared)})
        assert_json_error(status, got.get("content-type", ""), raw, case.status, case.says)
        if status == 413:
            assert got.get("connection") == "close"  # the rest of the upload is not read
        return
    kwargs: dict[str, Any] = {"headers": headers, "params": case.params}
    if case.content is not None:
        kwargs["content"] = case.content
    elif case.body is not None:
        kwargs["json"] = case.body
    resp = httpx.request(case.method, target.url + case.path, timeout=20, **kwargs)
    assert_json_error(resp.status_code, resp.headers.get("content-type", ""), resp.content, case.status, case.says)


def test_a_replayed_arena_request_is_refused(arena: Target) -> None:
    headers = sign_headers(IDS["miner"].hotkey, clock=arena.extra["clock"])
    assert httpx.get(f"{arena.url}/v1/miner/agents", headers=headers).status_code == 200
    again = httpx.get(f"{arena.url}/v1/miner/agents", headers=headers)
    assert_json_error(again.status_code, again.headers["content-type"], again.content, 401, "replay")


def test_content_as_a_list_of_text_parts_is_joined(serve: Target, gateway: Target) -> None:
    parts = [{"type": "text", "text": "a red dress"}, {"type": "text", "text": "under 500"}]
    resp = httpx.post(f"{serve.url}{CHAT}", json={"messages": [{"role": "user", "content": parts}]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "a red dress\nunder 500"
    assert serve.extra["backend"].seen[-1] == [{"role": "user", "content": "a red dress\nunder 500"}]

    gw: Gateway = gateway.extra["gateway"]
    run = gw.open_run("parts", models=[DIRECTIVE])
    text = directive("from parts")[0]["content"]
    body = {"model": DIRECTIVE, "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    resp = httpx.post(f"{gateway.url}/inference/chat/completions", json=body,
                      headers={"Authorization": f"Bearer {run.token}"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "from parts"


def test_upstream_search_answers_are_kept(search: Target) -> None:
    """Not errors upstream, so not errors here: agents and the scorer read these answers (docs/shoppingbench.md §2)."""
    for page in ("0", "-1", "6", "99999999999999999999", "abc"):
        resp = httpx.get(f"{search.url}/find_product", params={"q": "violin", "page": page})
        assert (resp.status_code, resp.json()) == (200, [])
    resp = httpx.get(f"{search.url}/view_product_information", params={"product_ids": "nope,,,"})
    assert (resp.status_code, resp.json()) == (200, [])
    resp = httpx.get(f"{search.url}/find_product", params={"q": "violin", "price": "nan-inf"})
    assert resp.status_code == 200 and resp.json()  # a side that does not parse is no bound


def test_out_of_range_public_limits_are_clamped(arena: Target) -> None:
    for limit in ("0", "-5", "1000000"):
        assert httpx.get(f"{arena.url}/v1/public/races", params={"limit": limit}).status_code == 200


def test_an_unexpected_failure_is_a_500_without_a_traceback(tmp_path: Path) -> None:
    """The arena's database vanishing under a running service: the catch-all answers, the log keeps the details."""
    clock, chain = ManualClock(T0), LocalChain(seed=1)
    service = make_arena(f"sqlite:///{tmp_path / 'gone.db'}", clock=clock, chain=chain, cfg=config())
    with BackgroundServer(create_app(service, RequestVerifier(chain.metagraph, clock=clock))) as srv:
        assert httpx.get(f"{srv.url}/v1/public/leaderboard").status_code == 200
        service.close()
        for f in tmp_path.iterdir():
            f.unlink()
        resp = httpx.get(f"{srv.url}/v1/public/leaderboard")
        body = assert_json_error(resp.status_code, resp.headers["content-type"], resp.content, 500, "server log")
        assert body["error"] == "InternalError" and "races" not in resp.text  # no SQL, no table names
