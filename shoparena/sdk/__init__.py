"""What a single-file agent imports: search and inference through the gateway, nothing else.

Stdlib only at import (it runs inside a minimal sandbox). Configured by the environment: ``SHOPARENA_GATEWAY``
(``http://host:port`` or ``unix:/path/to.sock``), ``SHOPARENA_RUN_TOKEN`` and ``SHOPARENA_MODEL``.

    from shoparena.env import run_episode
    from shoparena.sdk import GatewayPolicy, GatewaySearch

    def agent_main(problem_data):
        return run_episode(problem_data, GatewayPolicy(), GatewaySearch()).steps

The module-level functions use a client built from the current environment; refusals raise
:class:`GatewayError` (``status`` 401 bad token, 403 model / endpoint not allowed, 413, 429 limits, 0 unreachable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shoparena.sdk.adapters import GatewayPolicy, GatewaySearch
from shoparena.sdk.client import Gateway, GatewayError, default_gateway

__all__ = ["Gateway", "GatewayError", "GatewayPolicy", "GatewaySearch", "chat", "default_gateway", "find_product",
           "view_product_information"]


def find_product(q: str, page: int | str = 1, shop_id: str | None = None, price: str | None = None,
                 sort: str | None = None, service: str | None = None) -> Any:
    """Search the catalog (upstream ``find_product``): up to 10 ``{product_id, shop_id, title, price, service,
    sold_count}`` items."""
    return default_gateway().find_product(q, page, shop_id, price, sort, service)


def view_product_information(product_ids: str | Sequence[str]) -> Any:
    """Details (``product_id, short_description, description, sku_options, attributes``) of the ids found."""
    return default_gateway().view_product_information(product_ids)


def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, model: str | None = None,
         temperature: float = 0.0, top_p: float = 1.0, max_tokens: int | None = None,
         seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """One OpenAI chat completion through the gateway (``model`` defaults to ``SHOPARENA_MODEL``)."""
    return default_gateway().chat(messages, tools, model=model, temperature=temperature, top_p=top_p,
                                  max_tokens=max_tokens, seed=seed, **extra)
