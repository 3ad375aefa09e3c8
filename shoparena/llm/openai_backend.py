"""``openai:<base_url>/<model>`` — any OpenAI-compatible chat server through the official ``openai`` client.

The client runs on its aiohttp transport (``DefaultAioHttpClient``, cheaper per call than httpx) and is reused for
every call made on one event loop, so many episodes can be in flight at once. Requests go through the client's
generic ``post(..., cast_to=object)``: the body is sent as built and the JSON answer comes back as a dict, which
skips the typed ``chat.completions.create`` path (its parameter transform and response models cost ~6 ms of CPU per
call on a 20-turn episode, against ~1 ms) and keeps server extras such as ``reasoning_content``. Retries with
exponential backoff (honouring ``Retry-After``) on connection errors, timeouts, 408/409/429 and 5xx are the
client's own. Failures surface as :class:`~shoparena.llm.wire.BackendError` with a hint. A choice whose
``finish_reason`` is ``length`` (the server cut the completion at its token limit) comes back marked ``truncated``.

Every call has a bounded total time, connection, reading and retries together (``total_timeout``, by default
``timeout × (max_retries + 1)``, a minute of backoff per retry and a few seconds): the client's own timeout bounds each wait
for a byte, not a whole answer, so a server that drips its body a byte at a time would otherwise hold a call
forever.

URI rule: when the text contains ``/v1/``, ``base_url`` is everything up to and including ``/v1`` and the model is
the rest (model names contain slashes: ``openai:http://127.0.0.1:8000/v1/Qwen/Qwen3-4B``); otherwise the split is
at the last ``/``.

Several replicas of one model (a pool, :mod:`shoparena.llm.pool`): the first server's URI as above, then a query
with one ``replica=<base_url>`` per further server, and optionally ``cooloff=<seconds>``::

    openai:http://10.0.0.1:8000/v1/Qwen/Qwen3-4B?replica=http://10.0.0.2:8000/v1&replica=http://10.0.0.3:8000/v1

The model is named once, before the ``?``, so a model name with slashes stays unambiguous; a replica is a bare base
URL (nothing after its ``/v1``: every replica serves the model named before the ``?``). The URI has no comma, so it
fits where model URIs are listed comma-separated (``shoparena evaluate --model A,B``). Quote it in a shell (``&``).
A ``?`` therefore always starts this query in an ``openai:`` URI: an unknown key, an empty value, a replica that is
not an ``http(s)://`` base URL or that repeats another, is a :class:`~shoparena.errors.ConfigError`. A URI without
``?`` is one server, exactly as before.

The API key comes from ``SHOPARENA_OPENAI_API_KEY``, else ``OPENAI_API_KEY``, else ``"EMPTY"``
(local servers ignore it); ``SHOPARENA_OPENAI_TIMEOUT`` (seconds), ``SHOPARENA_OPENAI_MAX_RETRIES`` and
``SHOPARENA_OPENAI_TOTAL_TIMEOUT`` (seconds) override the defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any, NamedTuple
from urllib.parse import unquote

from shoparena.env.types import AssistantMessage
from shoparena.errors import ConfigError
from shoparena.llm.types import ChatBackend, Sampling
from shoparena.llm.wire import BackendError, assistant_from_wire, sampling_to_request

__all__ = ["OpenAIBackend", "OpenAITarget", "from_uri", "parse_openai_pool_uri", "parse_openai_uri"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_RETRIES = 3
RETRY_ALLOWANCE_S = 60.0
"""Seconds of backoff allowed per retry in the default total bound (the client honours a ``Retry-After`` up to a
minute)."""
SLACK_S = 5.0
"""Seconds added to the default total bound so that an attempt's own timeout, the clearer error, fires first."""


def parse_openai_uri(rest: str) -> tuple[str, str]:
    """``(base_url, model)`` from the part of an ``openai:`` URI after the scheme; for a pool of replicas, the first
    server's base URL (:func:`parse_openai_pool_uri` reads them all)."""
    target = parse_openai_pool_uri(rest)
    return target.base_urls[0], target.model


class OpenAITarget(NamedTuple):
    """What an ``openai:`` URI names: one model on one or more servers (module docstring)."""

    base_urls: tuple[str, ...]
    """The first server's base URL, then each ``replica=``'s, in the URI's order; each without a trailing ``/``."""
    model: str
    cooloff: float | None = None
    """Seconds a failed replica is left out before it is probed again (``cooloff=``; None: the pool's default)."""


_POOL_HINT = ("a pool is openai:<base_url>/<model>?replica=<base_url>&replica=<base_url>[&cooloff=<seconds>], "
              "e.g. openai:http://10.0.0.1:8000/v1/Qwen/Qwen3-4B?replica=http://10.0.0.2:8000/v1")


def parse_openai_pool_uri(rest: str) -> OpenAITarget:
    """The servers and model an ``openai:`` URI names (the part after the scheme): one server, or a pool with
    ``?replica=…`` (module docstring). Raises :class:`~shoparena.errors.ConfigError` on a form it cannot read."""
    rest = rest.strip()
    head, sep, query = rest.partition("?")
    base_url, model = _parse_one(head, rest)
    if not sep:
        return OpenAITarget((base_url,), model)
    bases, cooloff = [base_url], None
    for item in query.split("&"):
        key, eq, raw = item.partition("=")
        value = unquote(raw).strip()
        if not eq or not value:
            raise ConfigError(f"'{item}' in 'openai:{rest}' is not key=value", hint=_POOL_HINT)
        if key == "replica":
            bases.append(_replica(value, model, rest))
        elif key == "cooloff":
            try:
                cooloff = float(value)
            except ValueError:
                cooloff = -1.0
            if not (0 < cooloff < float("inf")):
                raise ConfigError(f"cooloff={value!r} in 'openai:{rest}' is not a positive number of seconds",
                                  hint="e.g. cooloff=30")
        else:
            raise ConfigError(f"unknown option {key!r} in 'openai:{rest}' (known: replica, cooloff)", hint=_POOL_HINT)
    if len(bases) == 1:
        raise ConfigError(f"'openai:{rest}' has a '?' but names no replica", hint=_POOL_HINT)
    seen: set[str] = set()
    for b in bases:
        if b.rstrip("/") in seen:
            raise ConfigError(f"the replica {b} is named twice in 'openai:{rest}'",
                              hint="name each server once (the first one is the URL before the '?')")
        seen.add(b.rstrip("/"))
    return OpenAITarget(tuple(bases), model, cooloff)


def _parse_one(text: str, whole: str) -> tuple[str, str]:
    marker = text.find("/v1/")
    if marker >= 0:
        base_url, model = text[: marker + len("/v1")], text[marker + len("/v1/"):]
    else:
        base_url, _, model = text.rpartition("/")
    if not base_url.startswith(("http://", "https://")) or not model:
        raise ConfigError(
            f"cannot read an OpenAI base URL and model from 'openai:{whole}'",
            hint="use openai:<base_url>/<model>, e.g. openai:http://127.0.0.1:8000/v1/Qwen/Qwen3-4B",
        )
    return base_url, model


def _replica(value: str, model: str, whole: str) -> str:
    base = value.rstrip("/")
    if not base.startswith(("http://", "https://")) or base in ("http:/", "https:/", "http:", "https:"):
        raise ConfigError(f"replica={value!r} in 'openai:{whole}' is not an http(s):// base URL", hint=_POOL_HINT)
    marker = base.find("/v1/")
    if marker >= 0:
        raise ConfigError(
            f"replica={value!r} in 'openai:{whole}' goes on past /v1 ({base[marker + len('/v1/'):]!r})",
            hint=f"a replica is a base URL only (…/v1); every replica serves the model before the '?' ({model!r})")
    return base


def env_number(name: str, default: float, *, positive: bool = True) -> float:
    """The number the environment variable ``name`` holds (``default`` when unset or empty): finite, and above 0
    (``positive``, for seconds) or at least 0 (a count such as retries); anything else is a ConfigError naming
    the variable."""
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not (number > 0 if positive else number >= 0) or number == float("inf"):
        what = "a positive number of seconds" if positive else "a number ≥ 0"
        raise ConfigError(f"{name}={value!r} is not {what}", hint=f"e.g. {name}={default:g}")
    return number


class OpenAIBackend:
    """A chat backend over an OpenAI-compatible ``/chat/completions`` endpoint.

    One ``AsyncOpenAI`` client per event loop (an aiohttp session belongs to the loop that created it). It is
    closed by :meth:`aclose` (or ``async with``) or, failing that, when the loop's runner (``asyncio.run``,
    :func:`~shoparena.llm.types.chat_sync`) cancels its leftover tasks at exit.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float | None = None,
                 max_retries: int | None = None, connect_timeout: float | None = None,
                 total_timeout: float | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.name = model
        self.api_key = (api_key or os.environ.get("SHOPARENA_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY")
                        or "EMPTY")
        self.timeout = timeout if timeout is not None else env_number("SHOPARENA_OPENAI_TIMEOUT", DEFAULT_TIMEOUT_S)
        self.max_retries = (max_retries if max_retries is not None
                            else int(env_number("SHOPARENA_OPENAI_MAX_RETRIES", DEFAULT_MAX_RETRIES, positive=False)))
        self.connect_timeout = connect_timeout
        """Seconds to establish a connection (None: ``timeout``); a caller that must fail fast sets a few."""
        self.total_timeout = (total_timeout if total_timeout is not None else env_number(
            "SHOPARENA_OPENAI_TOTAL_TIMEOUT",
            self.timeout * (self.max_retries + 1) + RETRY_ALLOWANCE_S * self.max_retries + SLACK_S))
        """Seconds one call may take in all: connection, reading and retries together."""
        self.dropped_tool_calls = 0
        """Tool calls left out because their arguments were not a JSON object (each is also logged)."""
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, asyncio.Task[None]]] = {}

    def client(self) -> Any:
        """The ``openai.AsyncOpenAI`` client of the running event loop (created on first use)."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is None:
            import openai

            timeout = (self.timeout if self.connect_timeout is None
                       else openai.Timeout(self.timeout, connect=self.connect_timeout))
            client = openai.AsyncOpenAI(
                base_url=self.base_url, api_key=self.api_key, timeout=timeout, max_retries=self.max_retries,
                http_client=openai.DefaultAioHttpClient(timeout=timeout),
            )
            entry = self._clients[loop] = (client, loop.create_task(self._close_at_exit(loop, client)))
        return entry[0]

    async def _close_at_exit(self, loop: asyncio.AbstractEventLoop, client: Any) -> None:
        try:
            await loop.create_future()  # pending until aclose() or the loop's runner cancels it
        finally:
            self._clients.pop(loop, None)
            await client.close()

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        body: dict[str, Any] = {"model": self.name, "messages": messages, **sampling_to_request(sampling or Sampling())}
        if tools:
            body["tools"] = tools
        data = await self._post(body)
        try:
            choice = data["choices"][0]
            raw, usage, finish = choice["message"], data.get("usage"), choice.get("finish_reason")
            if not isinstance(raw, dict):
                raise TypeError
        except (TypeError, KeyError, IndexError, AttributeError):
            raise BackendError(f"{self.base_url} answered without a chat completion: {str(data)[:300]}",
                               hint="is this an OpenAI-compatible /chat/completions endpoint?") from None
        message, notes = assistant_from_wire(raw, usage, finish)
        for note in notes:
            self.dropped_tool_calls += 1
            log.warning("%s: %s", self.name, note)
        return message

    async def _post(self, body: dict[str, Any]) -> Any:
        import openai

        try:
            return await asyncio.wait_for(self.client().post("/chat/completions", body=body, cast_to=object),
                                          self.total_timeout)
        except TimeoutError as exc:  # the whole call's bound, not one attempt's
            raise BackendError(
                f"{self.base_url} did not finish an answer within {self.total_timeout:g} s (connection, reading "
                f"and {self.max_retries} retries together)",
                hint="a hung, slow or overloaded server: check it, or raise SHOPARENA_OPENAI_TOTAL_TIMEOUT",
            ) from exc
        except openai.APITimeoutError as exc:
            if not isinstance(_root(exc), TimeoutError):  # aiohttp's refusals arrive mislabelled as timeouts
                raise _connection_error(self, exc) from exc
            raise BackendError(
                f"{self.base_url} did not answer within {self.timeout:g} s ({self.max_retries} retries)",
                hint="a slow or overloaded server: raise SHOPARENA_OPENAI_TIMEOUT or lower the concurrency",
            ) from exc
        except openai.APIConnectionError as exc:
            raise _connection_error(self, exc) from exc
        except openai.APIStatusError as exc:
            raise BackendError(
                f"{self.base_url} answered {exc.status_code}: {_server_message(exc)}",
                hint=_status_hint(exc.status_code, self.name), status=exc.status_code,
            ) from exc

    async def aclose(self) -> None:
        """Close the client of the running loop (its connection pool)."""
        entry = self._clients.get(asyncio.get_running_loop())
        if entry is not None:
            entry[1].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entry[1]

    async def __aenter__(self) -> OpenAIBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.base_url!r}, {self.name!r})"


def _root(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _connection_error(backend: OpenAIBackend, exc: BaseException) -> BackendError:
    root = _root(exc)
    return BackendError(
        f"cannot connect to {backend.base_url} ({str(root) or type(root).__name__}; {backend.max_retries} retries)",
        hint="is the server running and listening there? start one with `shoparena llm serve --model …`",
    )


def _server_message(exc: Any) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail")
            if msg:
                return str(msg)
        elif isinstance(err, str):
            return err
    return str(body or exc.message)


def _status_hint(status: int, model: str) -> str:
    if status in (401, 403):
        return "set SHOPARENA_OPENAI_API_KEY (or OPENAI_API_KEY) to a key the server accepts"
    if status == 404:
        return f"check the base URL (it usually ends in /v1) and that the server serves the model {model!r}"
    if status == 400 or status == 422:
        return "the server refused the request; its message above says which field"
    if status == 429:
        return "rate limited even after retries: lower the concurrency or wait"
    return "the server failed even after retries; check its logs"


def from_uri(rest: str) -> ChatBackend:
    """The ``openai:`` scheme's factory (registered lazily in :data:`shoparena.llm.types.BACKENDS`): one server's
    :class:`OpenAIBackend`, or a :class:`~shoparena.llm.pool.PooledOpenAIBackend` over the replicas a
    ``?replica=`` URI names."""
    target = parse_openai_pool_uri(rest)
    if len(target.base_urls) == 1:
        return OpenAIBackend(target.base_urls[0], target.model)
    from shoparena.llm.pool import PooledOpenAIBackend

    return PooledOpenAIBackend(target.base_urls, target.model, cooloff=target.cooloff)
