"""Built-in agent ``react`` (axis-A): the LLM emits every tool call; Python only dispatches them.

ReAct over the upstream four tools (find_product, view_product_information, recommend_product, terminate) with
native OpenAI tool calls, up to 30 steps, through the gateway. Sampling comes from the environment the runner sets
(``SHOPARENA_TEMPERATURE``, ``SHOPARENA_SEED``; ``SHOPARENA_PROTOCOL=tags`` switches to the upstream tag-text
protocol). This file is the reference single-file agent: copy it to start your own.
"""

import os

from shoparena.env import run_episode
from shoparena.sdk import GatewayPolicy, GatewaySearch


def agent_main(problem_data: dict) -> list:
    seed = os.environ.get("SHOPARENA_SEED")
    policy = GatewayPolicy(temperature=float(os.environ.get("SHOPARENA_TEMPERATURE", "0") or 0),
                           seed=int(seed) if seed else None)
    episode = run_episode(problem_data, policy, GatewaySearch(),
                          protocol=os.environ.get("SHOPARENA_PROTOCOL", "native"), profile="upstream4")
    return episode.steps
