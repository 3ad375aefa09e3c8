# ruff: noqa
"""A few-shot prompt that quotes a real upstream query verbatim."""

from shoparena.sdk import chat

FEW_SHOT = (
    "Example request: Show me women's jeans in size eu:30 with a baggy fit, high waist, made of denim.\n"
    "Example answer: search 'baggy jeans high waist denim'."
)


def agent_main(problem_data: dict) -> list:
    reply = chat([{"role": "system", "content": FEW_SHOT}, {"role": "user", "content": problem_data["query"]}])
    return [{"reply": reply}]
