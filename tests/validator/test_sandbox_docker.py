"""The Docker backend for real, where a Docker engine and a sandbox image exist (the argv is unit-tested in
test_sandbox_argv.py everywhere)."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator

import pytest

from shoparena.validator.sandbox import SandboxLimits, get_sandbox
from shoparena.validator.sandbox.docker import DockerSandbox
from tests.validator.hostile import agent
from tests.validator.hostile.world import World, gateway_world

IMAGE = os.environ.get("SHOPARENA_SANDBOX_IMAGE")
_REASON = DockerSandbox().unavailable() or (None if IMAGE else
                                            "set SHOPARENA_SANDBOX_IMAGE to an image with python and shoparena")
if _REASON:
    print(f"docker sandbox tests skipped: {_REASON}", file=sys.stderr)
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"docker backend not testable here: {_REASON}")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with gateway_world(n_problems=2) as w:
        yield w


def test_docker_runs_an_agent_through_the_gateway_and_blocks_the_host(world: World) -> None:
    sandbox = get_sandbox("docker", image=IMAGE)
    limits = SandboxLimits(timeout_s=60, memory_mb=1024)
    outs = list(sandbox.run(agent("gateway"), [p.public_view() for p in world.problems], gateway_socket=world.socket,
                            env_for=world.env_for, limits=limits))
    for out in outs:
        assert out.envelope.status == "SUCCESS", (out.envelope.error, out.stderr_tail)
        assert [c.kind for c in world.calls(out.envelope.problem_id)] == ["search"]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    query = json.dumps({"port": listener.getsockname()[1], "abstract": "shoparena-docker-test"})
    [out] = list(sandbox.run(agent("net"), [{"problem_id": "net", "query": query}], gateway_socket=world.socket,
                             env_for=world.env_for, limits=limits))
    world.calls("net")
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert "CONNECTED" not in json.dumps(out.envelope.dialogue)
