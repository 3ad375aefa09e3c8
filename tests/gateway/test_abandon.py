"""Generations abandoned when their run closes (shoparena/llm/abandon.py), through the real gateway over loopback
HTTP with the real ``hf:`` backend on the tiny Qwen3: the answer is dropped part-way, refused 409 and logged as an
orphan call, and the model is free for the next run."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("transformers")

from shoparena.llm.gateway import Gateway, Limits
from shoparena.llm.hf_backend import HFBackend
from shoparena.llm.tiny import build_tiny_qwen3
from tests.gateway import make_service

MODEL = "hf:tiny"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "a red floral dress under 700"}],
        "temperature": 0.0, "max_tokens": 24}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> HFBackend:
    return HFBackend(build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny"), device="cpu")


@pytest.fixture(scope="module")
def gateway(tiny_products, tmp_path_factory: pytest.TempPathFactory, backend: HFBackend) -> Gateway:
    return Gateway(make_service(tiny_products, tmp_path_factory.mktemp("gw")), {MODEL: backend},
                   limits=Limits.unlimited())


def _post(url: str, token: str) -> httpx.Response:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        return c.post("/inference/chat/completions", json=BODY)


def test_closing_a_run_stops_its_generation_and_frees_the_model(gateway: Gateway, backend: HFBackend) -> None:
    forwards: list[int] = []
    closing = gateway.open_run("run-closing", problem_id="p1")

    def hook(module, args, output) -> None:
        forwards.append(1)
        if len(forwards) == 2:  # the agent's clock runs out while its answer is being generated
            gateway.close_run(closing.token)

    with gateway.serve() as srv:
        handle = backend.model.register_forward_hook(hook)
        try:
            got = _post(srv.url, closing.token)
        finally:
            handle.remove()
        assert got.status_code == 409 and got.json()["error"]["type"] == "run_closed"
        assert len(forwards) == 2  # stopped at the next token, not after max_tokens
        orphan = gateway.orphan_calls()[-1]
        assert (orphan.run_id, orphan.kind, orphan.status, orphan.model) == ("run-closing", "inference", 409, MODEL)

        nxt = gateway.open_run("run-next", problem_id="p1")
        answer = _post(srv.url, nxt.token)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] > 2
        log = gateway.close_run(nxt.token)
        assert [(r.kind, r.status) for r in log] == [("inference", 200)]
