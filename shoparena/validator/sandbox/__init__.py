"""Sandboxed evaluation: run a submitted single-file agent on sanitised problems, one process per problem.

    sandbox = get_sandbox("bubblewrap", forbidden=[catalog_dir, problems_file])
    for outcome in sandbox.run(agent_file, problems, gateway_socket=sock, env_for=env_for, workers=4):
        ...  # outcome.envelope: the ORO envelope (SUCCESS / FAILED / TIMED_OUT, error, dialogue)

Backends: ``bubblewrap`` (default, hermetic), ``docker`` (hermetic, production validators) and ``process``
(NOT hermetic: validator-logic tests on machines without either; refused unless ``allow_non_hermetic=True``).
The contract is :class:`~shoparena.validator.sandbox.types.Sandbox`; problems are sanitised by
:func:`~shoparena.validator.sandbox.sanitise.sanitise` on the way in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoparena.errors import ConfigError
from shoparena.registry import Registry
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from shoparena.validator.sandbox.docker import DockerSandbox
from shoparena.validator.sandbox.process import ProcessSandbox
from shoparena.validator.sandbox.sanitise import PUBLIC_KEYS, sanitise
from shoparena.validator.sandbox.types import Envelope, Outcome, Sandbox, SandboxLimits

__all__ = ["PUBLIC_KEYS", "SANDBOXES", "Envelope", "Outcome", "Sandbox", "SandboxLimits", "get_sandbox",
           "sandbox_backend", "sandbox_names", "sanitise"]

SANDBOXES: Registry[Callable[..., Sandbox]] = Registry("sandbox backend")
"""Backend name → factory ``(**options) -> Sandbox``."""
SANDBOXES.add("bubblewrap", BubblewrapSandbox)
SANDBOXES.add("docker", DockerSandbox)
SANDBOXES.add("process", ProcessSandbox)
SANDBOXES.alias("bwrap", "bubblewrap")


def sandbox_backend(name: str) -> Callable[[Callable[..., Sandbox]], Callable[..., Sandbox]]:
    """Register a backend factory under ``name``."""
    return SANDBOXES.register(name)


def sandbox_names() -> list[str]:
    return SANDBOXES.names()


def get_sandbox(name: str = "bubblewrap", *, allow_non_hermetic: bool = False, **options: Any) -> Sandbox:
    """The backend ``name`` built with ``options`` (e.g. ``forbidden=[…]`` for bubblewrap, ``image=`` for
    docker). A non-hermetic backend raises :class:`ConfigError` unless ``allow_non_hermetic`` is set."""
    sandbox = SANDBOXES.get(name)(**options)
    if not sandbox.hermetic and not allow_non_hermetic:
        raise ConfigError(f"the {sandbox.name!r} sandbox does not isolate the agent (it can read the catalog "
                          "and the ground truth, and reach the network)",
                          hint="use bubblewrap or docker; for tests of the validator logic only, pass "
                               "--allow-non-hermetic")
    return sandbox
