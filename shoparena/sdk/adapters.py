"""The gateway as the two things the episode runner needs: a search backend and a policy.

``run_episode(problem_data, GatewayPolicy(), GatewaySearch())`` inside a single-file agent runs the shared loop
with every search and every completion going through (and logged by) the gateway. The runner's types are
imported only when a policy answers, so ``import shoparena.sdk`` stays stdlib-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shoparena.sdk.client import Gateway, GatewayError, default_gateway

__all__ = ["GatewayPolicy", "GatewaySearch"]


class GatewaySearch:
    """The ``SearchBackend`` protocol over the gateway. ``get_product_raw`` / ``get`` are not available to
    agents and raise :class:`GatewayError` (403) without a request."""

    def __init__(self, gateway: Gateway | None = None) -> None:
        self._gateway = gateway

    @property
    def gateway(self) -> Gateway:
        return self._gateway or default_gateway()

    def find_product(self, q: str, page: int | str = 1, shop_id: str | None = None, price: str | None = None,
                     sort: str | None = None, service: str | None = None) -> Any:
        return self.gateway.find_product(q, page, shop_id, price, sort, service)

    def view_product_information(self, product_ids: str | Sequence[str]) -> Any:
        return self.gateway.view_product_information(product_ids)

    def get_product_raw(self, product_ids: str | Sequence[str]) -> Any:
        raise GatewayError(403, "get_product_raw is not available to agents", path="/search/get_product_raw")

    def get(self, product_id: str) -> Any:
        raise GatewayError(403, "full product records are not available to agents", path="/search/get_product_raw")


class GatewayPolicy:
    """The episode runner's ``Policy`` over the gateway's chat endpoint, with fixed sampling parameters.

    ``model`` defaults to ``SHOPARENA_MODEL``; ``extra`` is added to every request body (e.g.
    ``{"chat_template_kwargs": {"enable_thinking": False}}``)."""

    def __init__(self, model: str | None = None, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int | None = None, seed: int | None = None, *, gateway: Gateway | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self.model = model
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.seed = seed
        self.extra = dict(extra or {})
        self._gateway = gateway

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """One completion as an :class:`~shoparena.env.types.AssistantMessage`."""
        from shoparena.env.protocol_native import assistant_from_openai

        gateway = self._gateway or default_gateway()
        response = gateway.chat(messages, tools or None, model=self.model, temperature=self.temperature,
                                top_p=self.top_p, max_tokens=self.max_tokens, seed=self.seed, **self.extra)
        choices = response.get("choices") or []
        if not choices:
            raise GatewayError(502, "the completion has no choices", path="/inference/chat/completions")
        return assistant_from_openai(choices[0].get("message") or {}, response.get("usage"))
