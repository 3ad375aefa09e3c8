# ruff: noqa
"""An agent that ships the answers: GT product ids of real upstream problems as a fallback list."""

from shoparena.sdk import find_product

FALLBACK = ["591486855", "4410867766", "2155232803", "5113553158"]


def agent_main(problem_data: dict) -> list:
    hits = find_product(problem_data["query"]) or []
    ids = [h["product_id"] for h in hits if h["product_id"] in FALLBACK] or FALLBACK[:1]
    return [{"recommend": ids}]
