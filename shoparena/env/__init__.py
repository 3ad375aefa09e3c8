"""The environment: tools, harness protocols, the episode runner and trajectory records.

``run_episode(problem, policy, backend)`` is the whole loop; a policy is anything with
``respond(messages, tools) -> AssistantMessage`` (sync or async). See docs/shoppingbench.md §4–§6.
"""

from shoparena.env.protocol_tags import parse_tags, tool_call_id
from shoparena.env.records import (
    episode_envelope,
    last_recommendation,
    messages_to_steps,
    read_envelope,
    steps_to_messages,
    strip_meta,
    to_flavor,
)
from shoparena.env.runner import EpisodeLoop, arun_episode, resolve_config, run_episode
from shoparena.env.tools import PROFILES, Tool, ToolContext, Toolset, get_toolset
from shoparena.env.types import (
    AssistantMessage,
    AsyncPolicy,
    Episode,
    EpisodeConfig,
    Policy,
    StepRecord,
    ToolCall,
    Usage,
)

__all__ = [
    "PROFILES",
    "AssistantMessage",
    "AsyncPolicy",
    "Episode",
    "EpisodeConfig",
    "EpisodeLoop",
    "Policy",
    "StepRecord",
    "Tool",
    "ToolCall",
    "ToolContext",
    "Toolset",
    "Usage",
    "arun_episode",
    "episode_envelope",
    "get_toolset",
    "last_recommendation",
    "messages_to_steps",
    "parse_tags",
    "read_envelope",
    "resolve_config",
    "run_episode",
    "steps_to_messages",
    "strip_meta",
    "to_flavor",
    "tool_call_id",
]
