"""Model URIs are checked before a run: each kind of URI that cannot work raises its own error."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from shoparena.errors import BackendError, ConfigError, NotFoundError
from shoparena.llm.check import check_model, check_models
from tests.hung_server import Mode, hung_server


def test_working_uris_pass(tmp_path: Path) -> None:
    from shoparena._http import BackgroundServer
    from shoparena.llm.serve import create_app
    from shoparena.llm.types import get_backend

    (tmp_path / "config.json").write_text("{}")
    with BackgroundServer(create_app(get_backend("policy:expert"))) as srv:
        check_models(["policy:expert", "policy:expert", f"hf:{tmp_path}", f"hf:{tmp_path}?mode=serial",
                      f"openai:{srv.url}/v1/m"])


@pytest.mark.parametrize("mode", ["silent", "headers"])
def test_a_server_that_accepts_but_never_answers_is_a_backend_error(mode: Mode) -> None:
    """A TCP connect is not enough: the check sends a real request and gives up after ``timeout_s``."""
    with hung_server(mode) as base, pytest.raises(BackendError, match="accepts connections but did not answer") as info:
        check_model(f"openai:{base}/m", timeout_s=1.0)
    assert "hung" in (info.value.hint or "")


@pytest.mark.parametrize(("uri", "error", "says"), [
    ("bogus:x", ConfigError, "unknown model backend"),
    ("nocolon", ConfigError, "unknown model backend"),
    ("policy:nosuch", ConfigError, "unknown offline policy"),
    ("hf:/nonexistent", NotFoundError, "config.json missing"),
    ("openai:not-a-url", ConfigError, "cannot read an OpenAI base URL"),
    ("openai:http://127.0.0.1:99999/v1/m", ConfigError, "bad port"),
    ("llamacpp:/tmp/m?mode=fast", ConfigError, "unknown mode"),
    ("llamacpp:/tmp/m?mode=batched&slots=2", ConfigError, "option of mode=slots"),
    ("hf:/tmp/m?gpu=1", ConfigError, "unknown option"),
])
def test_uris_that_cannot_work(uri: str, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        check_model(uri)


def test_near_miss_scheme_gets_the_closest_name() -> None:
    with pytest.raises(ConfigError) as info:
        check_model("polcy:expert")
    assert "did you mean policy" in (info.value.hint or "")


def test_unreachable_openai_server_is_a_backend_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(BackendError, match="cannot connect"):
        check_model(f"openai:http://127.0.0.1:{port}/v1/m", timeout_s=1.0)


def test_a_pool_starts_with_one_live_replica_and_not_with_none() -> None:
    from shoparena._http import BackgroundServer
    from shoparena.llm.serve import create_app
    from shoparena.llm.types import get_backend

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])  # closed again: nothing listens there
    dead = [f"http://127.0.0.1:{p}/v1" for p in ports]
    with BackgroundServer(create_app(get_backend("policy:expert"))) as srv:
        check_model(f"openai:{dead[0]}/m?replica={srv.url}/v1", timeout_s=1.0)  # the first is down, the second up
    with pytest.raises(BackendError, match="no replica answers") as info:
        check_model(f"openai:{dead[0]}/m?replica={dead[1]}", timeout_s=1.0)
    assert str(ports[0]) in str(info.value) and str(ports[1]) in str(info.value)
