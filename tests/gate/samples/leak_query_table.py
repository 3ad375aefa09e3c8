# ruff: noqa
"""A query → answer table built in a loop from a literal list (a cached-answer map, as an agent that read the answers would build, docs/arena.md §4)."""

import re

_PAIRS = [
    ("b20 cast bronze crash cymbals hybrid ghost", 591486855),
    ("12 inch heavy-duty rubber wheel for a pushcart", 4410867766),
    ("single-pack bags of chili powder", 2155232803),
    ("women's jeans eu:30 baggy fit high waist", 5113553158),
]
ANSWERS = {}
for key, pid in _PAIRS:
    ANSWERS[re.sub(r"\W+", " ", key)] = str(pid)


def agent_main(problem_data: dict) -> list:
    q = re.sub(r"\W+", " ", problem_data["query"].lower())
    return [{"recommend": [pid for key, pid in ANSWERS.items() if key in q]}]
