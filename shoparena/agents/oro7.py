"""Built-in agent ``oro7`` (axis-A): ORO's reference ReAct agent over the seven-tool surface.

find_product, view_product_information, recommend_product, terminate, check_product_match (SKU bug fixed),
find_products_in_same_shop and calculate_voucher, with ORO's task-specific strategy block in the prompt and its
25-step limit. The composite tools run here in Python on top of gateway search calls, so the gateway attributes
their searches to the LLM call that asked for them.
"""

import os

from shoparena.env import run_episode
from shoparena.sdk import GatewayPolicy, GatewaySearch


def agent_main(problem_data: dict) -> list:
    seed = os.environ.get("SHOPARENA_SEED")
    policy = GatewayPolicy(temperature=float(os.environ.get("SHOPARENA_TEMPERATURE", "0") or 0),
                           seed=int(seed) if seed else None)
    episode = run_episode(problem_data, policy, GatewaySearch(),
                          protocol=os.environ.get("SHOPARENA_PROTOCOL", "native"), profile="oro7")
    return episode.steps
