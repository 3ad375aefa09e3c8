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

from shoparena.errors import ConfigError, NotFoundError, closest
from shoparena.validator.sandbox.bwrap import BubblewrapSandbox
from shoparena.validator.sandbox.docker import DockerSandbox
from shoparena.validator.sandbox.process import ProcessSandbox
from shoparena.validator.sandbox.sanitise import PUBLIC_KEYS, sanitise
from shoparena.validator.sandbox.types import Envelope, Outcome, Sandbox, SandboxLimits

__all__ = ["PUBLIC_KEYS", "Envelope", "Outcome", "Sandbox", "SandboxLimits", "get_sandbox", "sandbox_backend",
           "sandbox_names", "sanitise"]

_REGISTRY: dict[str, Callable[..., Sandbox]] = {}
_ALIASES = {"bwrap": "bubblewrap"}


def sandbox_backend(name: str) -> Callable[[Callable[..., Sandbox]], Callable[..., Sandbox]]:
    """Register a backend factory under ``name``."""

    def register(factory: Callable[..., Sandbox]) -> Callable[..., Sandbox]:
        _REGISTRY[name] = factory
        return factory

    return register


sandbox_backend("bubblewrap")(BubblewrapSandbox)
sandbox_backend("docker")(DockerSandbox)
sandbox_backend("process")(ProcessSandbox)


def sandbox_names() -> list[str]:
    return sorted(_REGISTRY)


def get_sandbox(name: str = "bubblewrap", *, allow_non_hermetic: bool = False, **options: Any) -> Sandbox:
    """The backend ``name`` built with ``options`` (e.g. ``forbidden=[…]`` for bubblewrap, ``image=`` for
    docker). A non-hermetic backend raises :class:`ConfigError` unless ``allow_non_hermetic`` is set."""
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        near = closest(name, sandbox_names())
        raise NotFoundError(f"no sandbox backend {name!r}",
                            hint=(f"did you mean {near}? " if near else "") + f"choose one of {sandbox_names()}")
    sandbox = _REGISTRY[key](**options)
    if not sandbox.hermetic and not allow_non_hermetic:
        raise ConfigError(f"the {key!r} sandbox does not isolate the agent (it can read the catalog and the "
                          "ground truth, and reach the network)",
                          hint="use bubblewrap or docker; for tests of the validator logic only, pass "
                               "--allow-non-hermetic")
    return sandbox
