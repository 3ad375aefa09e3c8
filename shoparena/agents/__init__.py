"""Built-in agents and the ORO single-file agent interface (``agent_main(problem_data) -> list[step]``).

An agent is one Python file defining ``agent_main``; it reaches search and inference only through
:mod:`shoparena.sdk` (the gateway), so the same file runs in-process, in a worker process, or in the sandbox.
Built-ins: ``react`` (the LLM emits every tool call: axis-A), ``oro7`` (ReAct over ORO's seven tools with its
task strategies: axis-A) and ``pipeline`` (Python runs search / filter / verify; the LLM only classifies the
intent, scores matches and narrates: axis-B). :func:`agent_path` resolves a built-in name or a file path,
:func:`load_agent` imports a file the way ORO's sandbox executor does.
"""

from shoparena.agents.loading import BUILTIN_AGENTS, agent_path, load_agent

__all__ = ["BUILTIN_AGENTS", "agent_path", "load_agent"]
