"""LLM backends behind one chat interface (``openai:``, ``hf:``, ``policy:`` URIs), the offline policy models, the
narrow sub-task prompts, and the logging gateway a sandboxed agent talks to."""

from shoparena.llm.types import (
    BackendPolicy,
    ChatBackend,
    Sampling,
    SyncBackendPolicy,
    backend,
    chat_sync,
    get_backend,
    policy_for,
)

__all__ = [
    "BackendPolicy", "ChatBackend", "Sampling", "SyncBackendPolicy", "backend", "chat_sync", "get_backend",
    "policy_for",
]
