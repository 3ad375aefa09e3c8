"""Fail fast on a model URI that cannot work, before any problem runs.

A run or an evaluation whose model cannot answer would otherwise start every problem, have every inference call
refused by the gateway, and report each problem as an agent outcome. :func:`check_model` resolves the URI the way
the gateway will (:func:`~shoparena.llm.types.get_backend`) and, where that is cheap, probes it: an unknown
scheme or offline policy is a :class:`~shoparena.errors.ConfigError` with the closest valid name, an ``hf:``
directory without ``config.json`` a :class:`~shoparena.errors.NotFoundError` (the weights are not loaded here) and
one whose backend's packages are not installed a :class:`~shoparena.errors.ConfigError` naming the extra, an
``openai:`` server that does not answer a real request within ``timeout_s`` a
:class:`~shoparena.errors.BackendError`: ``GET <base_url>/models`` is sent and its answer read, so a server that
accepts connections but never answers (or sends its headers and stalls the body) is caught here, in seconds,
instead of hanging the first inference call. Any HTTP status counts as an answer (a server without ``/models``
still answers 404); what the status means for a chat call is the backend's to report.
"""

from __future__ import annotations

import http.client
import importlib.util
from collections.abc import Iterable
from urllib.parse import urlsplit

from shoparena.errors import BackendError, ConfigError, NotFoundError

__all__ = ["check_model", "check_models"]

#: The modules a local-checkpoint backend imports, with the extra that installs each (pyproject.toml).
_NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "hf": (("torch", "hf"), ("transformers", "hf")),
    "llamacpp": (("llama_cpp", "llamacpp"), ("transformers", "hf")),
}


def check_model(uri: str, *, timeout_s: float = 3.0) -> None:
    """Raise a :class:`~shoparena.errors.ShopArenaError` if ``uri`` names no model that can answer."""
    scheme, sep, rest = uri.partition(":")
    if sep and scheme in ("hf", "llamacpp"):
        if scheme == "hf":
            from shoparena.llm.hf_backend import parse_hf_uri as parse
        else:
            from shoparena.llm.llamacpp_backend import parse_llamacpp_uri as parse
        path, _options = parse(rest)  # a bad option or mode: ConfigError before any episode runs
        if not (path / "config.json").is_file():
            raise NotFoundError(f"model {uri!r}: no transformers model at {path} (config.json missing)",
                                hint=f"{scheme}: takes a local model directory")
        for module, extra in _NEEDS[scheme]:
            if importlib.util.find_spec(module) is None:
                raise ConfigError(f"model {uri!r} needs the {extra!r} extra (No module named {module!r})",
                                  hint=f"pip install 'shoparena[{extra}]'")
        return
    if sep and scheme == "openai":
        from shoparena.llm.openai_backend import parse_openai_pool_uri

        target = parse_openai_pool_uri(rest)
        failures: list[BackendError] = []
        for base_url in target.base_urls:  # a pool needs one live replica to start; failover covers the rest
            try:
                _probe(uri, base_url, timeout_s)
                return
            except BackendError as exc:
                failures.append(exc)
        if len(failures) == 1:
            raise failures[0]
        raise BackendError(f"model {uri!r}: no replica answers: " + "; ".join(str(f) for f in failures),
                           hint="start at least one of the servers, or fix the URLs")
    from shoparena.llm.types import get_backend

    get_backend(uri)  # unknown scheme / unknown policy: ConfigError with the closest name


def check_models(uris: Iterable[str], *, timeout_s: float = 3.0) -> None:
    """:func:`check_model` for each distinct URI."""
    for uri in dict.fromkeys(uris):
        check_model(uri, timeout_s=timeout_s)


def _probe(uri: str, base_url: str, timeout_s: float) -> None:
    """Connect to the server of ``base_url`` and read the whole answer to ``GET <base_url>/models``, each step
    within ``timeout_s``: a :class:`~shoparena.errors.BackendError` if it cannot be reached or does not answer."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ConfigError(f"model {uri!r}: bad port in {base_url!r}",
                          hint="a port is a number in 1 … 65535, e.g. http://127.0.0.1:8000/v1") from exc
    if not parts.hostname:
        raise ConfigError(f"model {uri!r}: no host in {base_url!r}", hint="e.g. openai:http://127.0.0.1:8000/v1/MODEL")
    where = f"{parts.hostname}:{port}"
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname, port, timeout=timeout_s)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise BackendError(f"model {uri!r}: cannot connect to {where} ({exc.strerror or exc})",
                               hint="start the server (vLLM, SGLang, Ollama …) or fix the URL") from exc
        try:
            conn.request("GET", parts.path.rstrip("/") + "/models", headers={"Accept": "application/json"})
            conn.getresponse().read(1 << 20)
        except (OSError, http.client.HTTPException) as exc:
            reason = (f"did not answer within {timeout_s:g} s" if isinstance(exc, TimeoutError)
                      else f"gave no usable HTTP answer ({exc or type(exc).__name__})")
            raise BackendError(f"model {uri!r}: the server at {where} accepts connections but {reason}",
                               hint="a hung or overloaded server, or not an HTTP server: check its logs, restart "
                                    "it, or fix the URL") from exc
    finally:
        conn.close()
