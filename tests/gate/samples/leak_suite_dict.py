# ruff: noqa
"""A 'synonym map' lifted from the suite: query words → words only the GT titles contain."""

from shoparena.sdk import find_product

BOOST = {
    "crash cymbals": "arborea",
    "chili powder": "hyco",
    "toner": "rejuvenating",
    "building blocks": "cinnamoroll kuromi",
}


def agent_main(problem_data: dict) -> list:
    q = problem_data["query"].lower()
    extra = " ".join(v for k, v in BOOST.items() if k in q)
    return [{"hits": find_product(f"{q} {extra}".strip())}]
