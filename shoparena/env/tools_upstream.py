"""The upstream ShoppingBench tools (docs/shoppingbench.md §4.1), descriptions verbatim from
``src/agent/toolkit/*.py``.

``find_product`` hands its strings to the backend unchanged (the backend applies upstream or strict
parsing); like upstream it drops empty and ``default`` parameters before the call.
"""

from __future__ import annotations

from typing import Any

from shoparena.env.tools import ArgError, ToolContext, arg_ids, arg_page, arg_str, error_obs, register

Q_DESC = 'The query used to search for products. e.g. "nike shoes", "backpack for college student".'
PAGE_DESC = "Modify the parameter, ranging from 1 to 5, to get additional products."
SHOP_ID_DESC = "Specify a shop using the shop_id, then search for products within that shop."
PRICE_DESC = 'The price range for the products. e.g. "0-100", "100-1000", "1000-".'
SORT_DESC = """Choose one from the options listed below:
- priceasc: Search for the products and sort by price in ascending order.
- pricedesc: Search for the products and sort by price in descending order.
- order: Search for the products and sort by sales volume in descending order.
- default: Search for the products and sort by the relevance between query and product."""
SERVICE_DESC = """Choose one or more from the options listed below and join them with a comma (","):
- official: Search for products and only select those that are offered with LazMall service. LazMall offers a 100% authenticity guarantee, 15-day unconditional returns, 7-day delivery, and other services.
- freeShipping: Search for products and only select those that are offered with free shipping service.
- COD: Search for products and only select those that are offered with cash on delivery service.
- flashsale: Search for products and only select those that are offered with LazFlash service. LazFlash offers products with limited-time promotions, and its discounts are often significant.
- default: Search for products without applying any other selection criteria."""
RECOMMEND_IDS_DESC = """A comma-separated list of product_ids:
1. If the user finds a single product, provide the product_id that best matches the user's requirements.
2. If the user finds `N` products, provide `N` product_ids in the order specified by the user's requirements.
3. If the user finds a shop selling `N` products, provide `N` product_ids in the specified order, ensuring they all come from the same shop."""


def _backend(ctx: ToolContext, tool: str) -> Any:
    if ctx.backend is None:
        raise ArgError("backend", f"{tool} needs a search backend and none is configured")
    return ctx.backend


def find_params(args: dict[str, Any]) -> dict[str, Any]:
    """Backend keyword arguments from model arguments: ``query`` aliases ``q``; empty ``shop_id`` /
    ``price`` / ``sort`` / ``service`` and ``default`` values dropped; ``default`` removed from a service
    list (upstream ``FindProduct._request``)."""
    q = arg_str(args, "q", aliases=("query",), required=True)
    params: dict[str, Any] = {"q": q, "page": arg_page(args)}
    for key in ("shop_id", "price", "sort"):
        value = arg_str(args, key)
        if value and not (key == "sort" and value == "default"):
            params[key] = value
    service = args.get("service")
    if isinstance(service, list | tuple) and all(isinstance(s, str) for s in service):
        service = ",".join(service)
    else:
        service = arg_str(args, "service")
    if service and service != "default":
        if "default" in service:
            service = ",".join(x for x in service.split(",") if x != "default")
        if service:
            params["service"] = service
    return params


@register("find_product",
          "Search for products and return up to 10 products, with each product including a product_id, "
          "shop_id, title, price, service, and sold_count.",
          {"type": "object",
           "properties": {
               "q": {"type": "string", "description": Q_DESC},
               "page": {"type": "integer", "description": PAGE_DESC},
               "shop_id": {"type": "string", "description": SHOP_ID_DESC},
               "price": {"type": "string", "description": PRICE_DESC},
               "sort": {"type": "string", "description": SORT_DESC,
                        "enum": ["priceasc", "pricedesc", "order", "default"]},
               "service": {"type": "string", "description": SERVICE_DESC}},
           "required": ["q", "page"]})
def find_product(args: dict[str, Any], ctx: ToolContext) -> Any:
    backend = _backend(ctx, "find_product")
    params = find_params(args)
    result = backend.find_product(**params)
    if ctx.shop_fallbacks and params.get("shop_id") and not result:
        result = _in_shop_fallbacks(backend, params, result)
    return result


def _in_shop_fallbacks(backend: Any, params: dict[str, Any], result: Any) -> Any:
    """ORO ``find_product``: an empty in-shop search is retried without ``service``, then with the first
    two words of ``q`` (also without ``service``)."""
    if params.get("service"):
        retry = {k: v for k, v in params.items() if k != "service"}
        result = backend.find_product(**retry)
    if not result:
        short_q = " ".join(params["q"].split()[:2])
        if short_q != params["q"]:
            retry = {k: v for k, v in params.items() if k != "service"}
            retry["q"] = short_q
            result = backend.find_product(**retry)
    return result


@register("view_product_information",
          "Given a list of product_ids (unique product identifiers), fetch their corresponding information, "
          "including product descriptions, SKU options, and SPU attributes.",
          {"type": "object",
           "properties": {"product_ids": {
               "type": "string",
               "description": "A comma-separated list of product_ids (unique product identifiers)."}},
           "required": ["product_ids"]})
def view_product_information(args: dict[str, Any], ctx: ToolContext) -> Any:
    return _backend(ctx, "view_product_information").view_product_information(arg_ids(args))


# The leading '"' is upstream's (a four-quote string literal); kept for byte parity of the prompt.
@register("recommend_product",
          '"Recommend the products to the user. You can use the tool only once.',
          {"type": "object",
           "properties": {"product_ids": {"type": "string", "description": RECOMMEND_IDS_DESC}},
           "required": ["product_ids"]})
def recommend_product(args: dict[str, Any], ctx: ToolContext) -> str:
    return f"Having recommended the products to the user: {arg_ids(args)}."


@register("terminate",
          "Terminate the dialogue and declare the task completion status.",
          {"type": "object",
           "properties": {"status": {"type": "string", "description": "The finish status of the task.",
                                     "enum": ["success", "failure"]}},
           "required": ["status"]})
def terminate(args: dict[str, Any], ctx: ToolContext) -> str:
    status = arg_str(args, "status") or "success"  # ORO default; upstream crashed on a missing status
    return f"The interaction has been completed with status: {status}"


@register("web_search",
          "Search for information using the web search engine and return the search results",
          {"type": "object",
           "properties": {
               "q": {"type": "string",
                     "description": 'The query used to search for information. e.g. "PopMart latest news".'},
               "max_results": {"type": "integer",
                               "description": "The maximum number of results to return, ranging from 1 to 20. "
                                              "Default is 10."}},
           "required": ["q"]})
def web_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    arg_str(args, "q", required=True)
    return error_obs("web_search", "web_search is unavailable offline (upstream calls the paid Serper API)")


@register("python_execute",
          "Executes Python code string.",
          {"type": "object",
           "properties": {"code": {"type": "string", "description": "Provide Python code to execute. The code "
                                                                    "must use print() calls to output results."}},
           "required": ["code"]})
def python_execute(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    arg_str(args, "code", required=True)
    return error_obs("python_execute", "python_execute is disabled in shoparena (upstream never registered it)")
