"""The one evaluation core: the sandbox an agent runs in, the reasoning judge, and the evaluation loop that turns
an agent version and a problem set into scored (and, for a validator, judged and stored) trajectories. The
arena's validator processes and ``shoparena run`` / ``shoparena validate`` all sit on it.

The public interface (``from shoparena.validator import ValidatorConfig, evaluate``); names load lazily, so
importing a sandbox module does not load the evaluation core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoparena._lazy import lazy_exports

if TYPE_CHECKING:
    from shoparena.validator.core import AgentSpec, EvaluationSummary, ProblemLine, ValidatorConfig, evaluate
    from shoparena.validator.rescore import RescoreReport, rescore_records
    from shoparena.validator.run import RunConfig, RunSummary, run_agents
    from shoparena.validator.sandbox import SANDBOXES, get_sandbox, sandbox_names
    from shoparena.validator.sandbox.types import SandboxLimits
    from shoparena.validator.types import EPISODE_TOKENS_MAX, EpisodeTokens
    from shoparena.validator.worker import LocalWork, WorkSource, work_once, work_until_empty

#: Public name → ``module`` (same name) or ``module:attr`` under this package; imported on first use.
_EXPORTS: dict[str, str] = {
    "AgentSpec": "core",
    "EPISODE_TOKENS_MAX": "types",
    "EpisodeTokens": "types",
    "evaluate": "core",
    "EvaluationSummary": "core",
    "get_sandbox": "sandbox",
    "SANDBOXES": "sandbox",
    "sandbox_names": "sandbox",
    "LocalWork": "worker",
    "ProblemLine": "core",
    "RescoreReport": "rescore",
    "rescore_records": "rescore",
    "RunConfig": "run",
    "run_agents": "run",
    "RunSummary": "run",
    "SandboxLimits": "sandbox.types",
    "ValidatorConfig": "core",
    "work_once": "worker",
    "work_until_empty": "worker",
    "WorkSource": "worker",
}
__all__ = [
    "EPISODE_TOKENS_MAX", "SANDBOXES", "AgentSpec", "EpisodeTokens", "EvaluationSummary", "LocalWork", "ProblemLine", "RescoreReport", "RunConfig", "RunSummary",
    "SandboxLimits", "ValidatorConfig", "WorkSource", "evaluate", "get_sandbox", "rescore_records", "run_agents",
    "sandbox_names", "work_once", "work_until_empty"
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
