"""The one chat interface every model sits behind, and the model-URI registry.

A backend turns ``messages`` (OpenAI chat format) + ``tools`` (OpenAI function specs) + :class:`Sampling` into an
:class:`~shoparena.env.types.AssistantMessage` (content, reasoning, tool calls, token usage). Backends are chosen
by a model URI whose scheme names a registered backend kind:

- ``openai:<base_url>/<model>`` — any OpenAI-compatible server (vLLM, SGLang, Ollama, hosted APIs);
- ``hf:<path>`` — a local transformers model with its chat template;
- ``policy:<name>`` — a built-in offline policy model (``novice``, ``careful``, ``expert`` …).

``get_backend(uri)`` resolves a URI; ``@backend("scheme")`` registers a factory ``(rest_of_uri) -> ChatBackend``.
Backends are async-first (many episodes in flight on one event loop); :func:`chat_sync` runs one call from
synchronous code. :class:`BackendPolicy` adapts a backend to the episode runner's one-method ``Policy``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from shoparena.env.types import AssistantMessage
from shoparena.errors import ConfigError
from shoparena.registry import Registry

__all__ = [
    "BACKENDS",
    "BackendPolicy",
    "ChatBackend",
    "Sampling",
    "SyncBackendPolicy",
    "backend",
    "backend_schemes",
    "chat_sync",
    "get_backend",
    "policy_for",
]


class Sampling(BaseModel):
    """Sampling parameters of one completion (OpenAI names). ``seed`` makes stochastic backends repeatable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int | None = None
    seed: int | None = None
    stop: list[str] | None = None
    enable_thinking: bool | None = None
    """Qwen3 chat-template switch (``extra_body.chat_template_kwargs.enable_thinking`` on vLLM/SGLang)."""


@runtime_checkable
class ChatBackend(Protocol):
    """``messages`` + ``tools`` + ``sampling`` → one assistant message. ``name`` is the model name reported in
    responses and logs."""

    name: str

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage: ...


BACKENDS: Registry[Callable[[str], ChatBackend]] = Registry(
    "model backend", error=ConfigError, usage="use openai:<base_url>/<model>, hf:<path>, llamacpp:<path> or policy:<name>")
"""Model-URI scheme → factory ``(rest_of_uri) -> ChatBackend``; the built-ins are imported on first use."""
BACKENDS.lazy("openai", "shoparena.llm.openai_backend:from_uri")
BACKENDS.lazy("hf", "shoparena.llm.hf_backend:from_uri", install="pip install 'shoparena[hf]'")
BACKENDS.lazy("policy", "shoparena.llm.policies:get_policy")
BACKENDS.lazy("llamacpp", "shoparena.llm.llamacpp_backend:from_uri", install="make llamacpp")


def backend(scheme: str) -> Callable[[Callable[[str], ChatBackend]], Callable[[str], ChatBackend]]:
    """Register a backend factory for ``scheme:`` URIs."""
    return BACKENDS.register(scheme)


def backend_schemes() -> list[str]:
    return BACKENDS.names()


def parse_path_uri(scheme: str, rest: str, options: Mapping[str, Callable[[str], Any]]) -> tuple[Path, dict[str, Any]]:
    """A local-model URI's ``PATH[?key=value&…]`` → (path, typed options), for the schemes that load a model from
    a directory (``hf:``, ``llamacpp:``). Each key must be one of ``options`` (its value converted by the given
    type; the last of a repeated key wins); an unknown key, an unconvertible or empty value, or an integer below 1
    is a :class:`~shoparena.errors.ConfigError` naming the scheme, the key and the accepted keys."""
    from urllib.parse import parse_qs

    path, _, query = rest.partition("?")
    out: dict[str, Any] = {}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key not in options:
            raise ConfigError(f"{scheme}: unknown option {key!r}", hint=f"options: {', '.join(options)}")
        kind = options[key]
        try:
            value = kind(values[-1])
        except ValueError:
            raise ConfigError(f"{scheme}: option {key}={values[-1]!r} is not a valid "
                              f"{getattr(kind, '__name__', 'value')}") from None
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ConfigError(f"{scheme}: option {key} must be ≥ 1")
        if isinstance(value, str) and not value:
            raise ConfigError(f"{scheme}: option {key} is empty", hint=f"options: {', '.join(options)}")
        out[key] = value
    return Path(path).expanduser(), out


def get_backend(uri: str) -> ChatBackend:
    """The backend a model URI names (``scheme:rest``)."""
    scheme, sep, rest = uri.partition(":")
    if not sep:
        raise BACKENDS.unknown(scheme, shown=uri)
    return BACKENDS.get(scheme)(rest)


def chat_sync(backend: ChatBackend, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
              sampling: Sampling | None = None) -> AssistantMessage:
    """Run one :meth:`ChatBackend.chat` from synchronous code (not from inside a running event loop)."""
    return asyncio.run(backend.chat(messages, tools, sampling))


class BackendPolicy:
    """A backend as the episode runner's policy (``async respond``), with fixed sampling parameters."""

    def __init__(self, backend: ChatBackend, sampling: Sampling | None = None) -> None:
        self.backend = backend
        self.sampling = sampling or Sampling()

    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantMessage:
        return await self.backend.chat(messages, tools or None, self.sampling)


class SyncBackendPolicy:
    """A backend with a blocking ``complete`` (the offline policies) as a synchronous policy: the runner then
    needs no event loop per episode."""

    def __init__(self, backend: Any, sampling: Sampling | None = None) -> None:
        self.backend = backend
        self.sampling = sampling or Sampling()

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantMessage:
        return self.backend.complete(messages, tools or None, self.sampling)  # type: ignore[no-any-return]


def policy_for(backend: ChatBackend, sampling: Sampling | None = None) -> BackendPolicy | SyncBackendPolicy:
    """The cheapest runner policy for ``backend``: synchronous when it offers ``complete``, else async."""
    if callable(getattr(backend, "complete", None)):
        return SyncBackendPolicy(backend, sampling)
    return BackendPolicy(backend, sampling)
