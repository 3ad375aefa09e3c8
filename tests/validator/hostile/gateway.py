"""A well-behaved agent: searches through the gateway with the SDK and reports what it found."""

from shoparena.sdk import GatewayError, find_product


def agent_main(problem_data: dict) -> list:
    try:
        hits = find_product(problem_data["query"])
    except GatewayError as exc:
        return [{"error": str(exc)}]
    return [{"problem_id": problem_data["problem_id"], "hits": [h["product_id"] for h in hits]}]
