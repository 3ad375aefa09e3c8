"""shoparena.sdk against a real gateway: stdlib-only import, env-only configuration from a subprocess, errors,
per-thread keep-alive connections and reconnection."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

import shoparena.sdk as sdk
from shoparena.llm.gateway import Limits
from shoparena.sdk import Gateway, GatewayError
from tests.gateway import DIRECTIVE, REACT, directive, make_gateway, make_service

HEAVY = ("pydantic", "httpx", "numpy", "fastapi", "starlette", "uvicorn", "regex", "aiohttp", "openai", "torch")


@pytest.fixture(scope="module")
def gateway(tiny_products, tmp_path_factory):
    return make_gateway(make_service(tiny_products, tmp_path_factory.mktemp("sdk")))


@pytest.fixture(scope="module")
def sock_dir():
    path = Path(tempfile.mkdtemp(prefix="sdk", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def server(gateway, sock_dir):
    with gateway.serve(uds=str(sock_dir / "gw.sock"), uds_mode=0o666) as srv:
        assert (sock_dir / "gw.sock").stat().st_mode & 0o777 == 0o666
        yield srv


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=60, cwd="/")


def test_import_is_stdlib_only() -> None:
    out = _python("import json, sys, shoparena.sdk; print(json.dumps(sorted(sys.modules)))", {})
    assert out.returncode == 0, out.stderr
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert not loaded & set(HEAVY)


def test_a_subprocess_agent_configured_only_by_env(gateway, server) -> None:
    handle = gateway.open_run("sub-1", problem_id="p-sub", models=[DIRECTIVE, REACT])
    env = server.env(handle, model=DIRECTIVE)
    assert set(env) == {"SHOPARENA_GATEWAY", "SHOPARENA_RUN_TOKEN", "SHOPARENA_MODEL"}
    assert env["SHOPARENA_GATEWAY"].startswith("unix:")
    call = {"name": "find_product", "arguments": {"q": "violin bow", "page": 1}}
    code = f"""
        import json
        from shoparena.sdk import GatewayError, chat, find_product, view_product_information
        out = {{}}
        out["python"] = [p["product_id"] for p in find_product("cotton", price="-600", sort="priceasc")]
        reply = chat({json.dumps(directive("ok", [call]))})
        out["emitted"] = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        out["llm"] = [p["product_id"] for p in find_product("violin bow")]
        out["view"] = [p["product_id"] for p in view_product_information(["591486855"])]
        try:
            chat([{{"role": "user", "content": "hi"}}], model="policy:expert")
        except GatewayError as exc:
            out["refused"] = [exc.status, exc.message]
        print(json.dumps(out))
    """
    proc = _python(code, env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["emitted"]["name"] == "find_product" and json.loads(out["emitted"]["arguments"]) == call["arguments"]
    assert out["refused"][0] == 403 and "policy:expert" in out["refused"][1]
    log = gateway.close_run(handle.token)
    assert [(r.kind, r.status, r.axis) for r in log] == [
        ("search", 200, "B"), ("inference", 200, None), ("search", 200, "A"), ("search", 200, "B"),
        ("inference", 403, None)]
    assert log[0].result_product_ids == out["python"] and log[2].result_product_ids == out["llm"]
    assert log[2].attributed_to == 1 and log[1].model == DIRECTIVE and log[4].model == "policy:expert"
    assert {r.problem_id for r in log} == {"p-sub"}


def test_module_functions_follow_the_environment(gateway, server, monkeypatch) -> None:
    a = gateway.open_run("env-a")
    b = gateway.open_run("env-b")
    monkeypatch.setenv("SHOPARENA_GATEWAY", server.address)
    monkeypatch.setenv("SHOPARENA_RUN_TOKEN", a.token)
    sdk.find_product("violin")
    monkeypatch.setenv("SHOPARENA_RUN_TOKEN", b.token)  # a worker process moving to its next problem
    sdk.view_product_information("591486855")
    assert [r.path for r in gateway.close_run(a.token)] == ["/search/find_product"]
    assert [r.path for r in gateway.close_run(b.token)] == ["/search/view_product_information"]


def test_errors_are_gateway_errors(gateway, server, sock_dir, monkeypatch) -> None:
    with Gateway(server.address, "not-a-token") as c:
        with pytest.raises(GatewayError) as err:
            c.find_product("violin")
        assert err.value.status == 401 and "token" in err.value.message
    with Gateway(f"unix:{sock_dir / 'nobody.sock'}", "t", retries=1) as c:
        with pytest.raises(GatewayError) as err:
            c.find_product("violin")
        assert err.value.status == 0
    monkeypatch.delenv("SHOPARENA_GATEWAY", raising=False)
    with pytest.raises(GatewayError, match="SHOPARENA_GATEWAY"):
        Gateway()
    with pytest.raises(GatewayError, match="bad gateway address"):
        Gateway("ftp://x")
    with pytest.raises(GatewayError) as err:
        sdk.GatewaySearch(Gateway(server.address, "t")).get_product_raw("1")
    assert err.value.status == 403


def test_keep_alive_per_thread_and_reconnect_after_a_restart(gateway, sock_dir) -> None:
    handle = gateway.open_run("keepalive")
    path = str(sock_dir / "restart.sock")
    with Gateway(f"unix:{path}", handle.token) as c:
        with gateway.serve(uds=path):
            c.find_product("violin")
            c.find_product("drum")
            t = threading.Thread(target=c.find_product, args=("cotton",))
            t.start()
            t.join()
            assert len(c._all) == 2  # one connection per thread, reused within a thread
        with gateway.serve(uds=path):  # the old keep-alive connection is dead: retried on a new one
            c.find_product("coffee")
    log = gateway.close_run(handle.token)
    assert [r.params["q"] for r in log] == ["violin", "drum", "cotton", "coffee"]
    assert all(r.status == 200 for r in log)


def test_tcp_address(gateway) -> None:
    handle = gateway.open_run("tcp-run")
    with gateway.serve() as srv, Gateway(srv.address, handle.token) as c:
        assert srv.address.startswith("http://127.0.0.1:")
        assert c.health()["status"] == "ok"
        assert c.find_product("violin", page=1)[0]["product_id"] == "3706669986"
    assert len(gateway.close_run(handle.token)) == 1


def test_the_rate_limit_throttles_sdk_clients_and_count_limits_fail_them(gateway, server) -> None:
    handle = gateway.open_run("throttled", limits=Limits(rate_per_s=50, burst=2, max_search_calls=6))
    with Gateway(server.address, handle.token) as c:
        t0 = time.perf_counter()
        for _ in range(6):
            assert c.find_product("violin")  # never raises: 429s of the rate limit are waited out
        assert time.perf_counter() - t0 >= 0.07  # 4 calls beyond the burst at 50/s
        with pytest.raises(GatewayError) as err:
            c.find_product("violin")
        assert err.value.status == 429 and "search call limit" in err.value.message
    statuses = [r.status for r in gateway.close_run(handle.token)]
    assert statuses.count(200) == 6 and statuses[-1] == 429 and 429 in statuses[:-1]
