"""ORO's three helper tools (docs/shoppingbench.md §4.2, ORO ``src/agent/agent.py``) and the loose tool schemas
of ORO's released SFT corpus (§4.3).

Ported behaviour, with one deliberate fix: ``check_product_match`` searches SKU values (ORO iterates the
``sku_options`` dict as a list and never sees them); ``ToolContext.sku_bug_parity`` restores the bug.
"""

from __future__ import annotations

import json
from typing import Any

from shoparena.env.tools import ArgError, ToolContext, arg_num, arg_str, register
from shoparena.env.tools_upstream import _backend

REQUIREMENTS_DESC = ("JSON string of required attributes, e.g. '{\"brand\": \"yamaha\", \"color\": \"black\", "
                     "\"material\": \"plastic\", \"size\": \"large\"}'")
QUERIES_DESC = ("JSON array of product search specs, e.g. '[{\"q\": \"foam roller\", \"price\": \"0-500\"}, "
                "{\"q\": \"yoga mat\", \"price\": \"0-300\"}]'. Each item can have: q (required), price "
                "(optional), service (optional).")


def _json_arg(args: dict[str, Any], name: str) -> Any:
    """An argument that is JSON text or already decoded; None when the text is not JSON."""
    value = args.get(name)
    if value is None:
        raise ArgError(name, f"missing required argument {name!r}")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


@register("check_product_match",
          "Check if a product matches specific attribute requirements. Returns a detailed match report. "
          "Use this BEFORE recommend_product to verify the product is correct.",
          {"type": "object",
           "properties": {"product_id": {"type": "string", "description": "Single product ID to check"},
                          "requirements": {"type": "string", "description": REQUIREMENTS_DESC}},
           "required": ["product_id", "requirements"]})
def check_product_match(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    product_id = arg_str(args, "product_id", required=True)
    reqs = _json_arg(args, "requirements")
    if reqs is None:
        return {"matched": False, "error": "Invalid requirements JSON"}
    if not isinstance(reqs, dict):
        raise ArgError("requirements", "'requirements' must be a JSON object of attribute: value")
    info_list = _backend(ctx, "check_product_match").view_product_information(product_id)
    if not info_list or not isinstance(info_list, list):
        return {"matched": False, "error": "Product not found", "matches": [], "mismatches": list(reqs)}
    return match_report(info_list[0], reqs, product_id, sku_bug=ctx.sku_bug_parity)


def _add_lower(out: list[str], value: Any) -> None:
    if isinstance(value, list):
        out.extend(str(x).lower() for x in value)
    else:
        out.append(str(value).lower())


def match_report(info: dict[str, Any], reqs: dict[str, Any], product_id: str, *, sku_bug: bool = False) -> dict[str, Any]:
    """ORO's lowercase-substring test per requirement: the same-named attribute, then every attribute
    and SKU value, then short description + description."""
    attrs = info.get("attributes") or {}
    sku_opts = info.get("sku_options") or {}
    values: list[str] = []
    for v in attrs.values():
        _add_lower(values, v)
    variants = sku_opts if sku_bug else (sku_opts.values() if isinstance(sku_opts, dict) else sku_opts)
    for opt in variants:  # with the bug, iterating the dict yields its keys "1", "2", … (never dicts)
        if isinstance(opt, dict):
            for v in opt.values():
                _add_lower(values, v)
    searchable = " ||| ".join(values)
    desc = (str(info.get("short_description", "")) + " " + str(info.get("description", ""))).lower()
    lower_keys = {str(k).lower(): v for k, v in reversed(list(attrs.items()))}  # first key wins, as ORO's next()
    matches, mismatches = [], []
    for key, required in reqs.items():
        want = str(required).lower()
        found = False
        attr_val = lower_keys.get(str(key).lower())
        if attr_val is not None:
            attr_str = " ".join(str(x).lower() for x in attr_val) if isinstance(attr_val, list) else str(attr_val).lower()
            found = want in attr_str
        found = found or want in searchable or want in desc
        (matches if found else mismatches).append(key)
    return {
        "matched": not mismatches,
        "matches": matches,
        "mismatches": mismatches,
        "product_summary": {"product_id": info.get("product_id", product_id),
                            "attributes": dict(list(attrs.items())[:10])},
    }


@register("find_products_in_same_shop",
          "Find multiple products that are ALL available from the SAME shop. Automatically searches across "
          "multiple shops. Use this for shop and voucher tasks. Returns {found: bool, shop_id: str, products: "
          "[{product_id, title, price, shop_id}, ...], shops_tried: int}, products in the SAME ORDER as the "
          "input queries.",
          {"type": "object",
           "properties": {"product_queries": {"type": "string", "description": QUERIES_DESC}},
           "required": ["product_queries"]})
def find_products_in_same_shop(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    specs = _json_arg(args, "product_queries")
    if specs is None:
        return {"found": False, "error": "Invalid JSON for product_queries"}
    if not specs or not isinstance(specs, list):
        return {"found": False, "error": "product_queries must be a non-empty JSON array"}
    if not all(isinstance(s, dict) for s in specs):
        raise ArgError("product_queries", "every product_queries item must be an object {q, price?, service?}")
    backend = _backend(ctx, "find_products_in_same_shop")
    first = specs[0]
    first_params: dict[str, Any] = {"q": str(first.get("q", "")), "page": 1}
    for key in ("price", "service"):
        if first.get(key):
            first_params[key] = str(first[key])
    first_results = backend.find_product(**first_params)
    if not isinstance(first_results, list):
        return {"found": False, "error": f"Search failed for first product: {first_results}", "shops_tried": 0}
    if not first_results:
        return {"found": False, "error": f"No results for first product: {first.get('q')}", "shops_tried": 0}
    candidates: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for p in first_results:
        sid = str(p.get("shop_id", ""))
        if sid and sid not in seen:
            candidates.append((sid, p))
            seen.add(sid)
    for tried, (shop_id, first_product) in enumerate(candidates[:10], 1):
        found = [first_product]
        for spec in specs[1:]:
            hit = _search_in_shop(backend, spec, shop_id)
            if hit is None:
                break
            found.append(hit)
        else:
            return {
                "found": True,
                "shop_id": shop_id,
                "products": [{"product_id": p.get("product_id"), "title": p.get("title", ""),
                              "price": p.get("price"), "shop_id": p.get("shop_id")} for p in found],
                "shops_tried": tried,
            }
    return {"found": False, "error": f"Could not find all {len(specs)} products in any single shop",
            "shops_tried": min(len(candidates), 10)}


def _search_in_shop(backend: Any, spec: dict[str, Any], shop_id: str) -> dict[str, Any] | None:
    """Top hit for one spec inside ``shop_id``: ``q`` + ``price`` (ORO never forwards ``service`` here, so
    its "drop service" retry repeats the same search), then the first two words, then the first word."""
    q = str(spec.get("q", ""))
    params: dict[str, Any] = {"q": q, "page": 1, "shop_id": shop_id}
    if spec.get("price"):
        params["price"] = str(spec["price"])

    def search() -> list[Any]:
        res = backend.find_product(**params)
        return res if isinstance(res, list) else []

    results = search()
    if not results:
        short_q = " ".join(q.split()[:2])
        if short_q != q:
            params["q"] = short_q
            results = search()
        if not results:
            single_q = q.split()[0] if q.split() else q
            if single_q != short_q:
                params["q"] = single_q
                results = search()
    return results[0] if results else None


@register("calculate_voucher",
          "Calculate the final price after applying a voucher discount. Use this for voucher tasks to verify "
          "budget.",
          {"type": "object",
           "properties": {
               "product_prices": {"type": "string", "description": 'Comma-separated product prices, e.g. "100,50,75"'},
               "voucher_type": {"type": "string",
                                "description": '"fixed" for fixed discount, "percentage" for percentage discount'},
               "discount_value": {"type": "number",
                                  "description": "The discount amount (e.g. 18 for fixed, 42 for 42% percentage)"},
               "threshold": {"type": "number", "description": "Minimum total price for voucher to apply"},
               "budget": {"type": "number", "description": "Maximum budget the user has"},
               "cap": {"type": "number",
                       "description": "Maximum discount amount for percentage vouchers (0 = no cap)"}},
           "required": ["product_prices", "voucher_type", "discount_value", "threshold", "budget"]})
def calculate_voucher(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """ORO semantics: ``discount_value`` is a percent (42, not 0.42); ``cap`` 0 = no cap; the voucher
    applies iff total ≥ threshold; platform/shop scope is ignored; an unknown type discounts nothing."""
    raw = args.get("product_prices")
    if isinstance(raw, list | tuple):
        raw = ",".join(str(p) for p in raw)
    elif raw is None:
        raise ArgError("product_prices", "missing required argument 'product_prices'")
    try:
        prices = [float(p.strip()) for p in str(raw).split(",")]
    except ValueError:
        return {"error": "Invalid product_prices format. Use comma-separated numbers."}
    voucher_type = arg_str(args, "voucher_type", required=True)
    discount_value = arg_num(args, "discount_value")
    threshold = arg_num(args, "threshold")
    budget = arg_num(args, "budget")
    cap = arg_num(args, "cap", default=0)
    total = sum(prices)
    discount, applied = 0.0, False
    if total >= threshold:
        applied = True
        if voucher_type == "fixed":
            discount = discount_value
        elif voucher_type == "percentage":
            discount = total * (discount_value / 100.0)
            if cap > 0:
                discount = min(discount, cap)
    total_after = total - discount
    return {"prices": prices, "total_before": round(total, 2), "discount_amount": round(discount, 2),
            "total_after": round(total_after, 2), "within_budget": total_after <= budget,
            "voucher_applied": applied, "budget": budget}


_LOOSE_IDS = {"additionalProperties": True, "type": "object",
              "properties": {"product_id": {"type": "string"},
                             "product_ids": {"type": "array", "items": {"type": "string"}}}}

#: ORO SFT corpus tool surface (tests/data/oro_samples/inputs.jsonl): name → (description, parameters).
SFT_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "find_product": ("Search the ShoppingBench product catalog.", {
        "additionalProperties": True, "type": "object",
        "properties": {"page": {"type": "integer"}, "price": {"type": "string"}, "q": {"type": "string"},
                       "query": {"type": "string"}, "service": {"type": "string"},
                       "shop_id": {"type": "string"}, "sort": {"type": "string"}}}),
    "view_product_information": ("Inspect product details for one or more product IDs.", _LOOSE_IDS),
    "recommend_product": ("Submit final ShoppingBench product recommendation IDs.", _LOOSE_IDS),
    "terminate": ("End the shopping episode after final recommendation.",
                  {"additionalProperties": True, "type": "object", "properties": {}}),
}
