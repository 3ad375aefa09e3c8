"""The one evaluation core: the sandbox an agent runs in, the reasoning judge, and the evaluation loop that turns
an agent version and a problem set into scored (and, for a validator, judged and stored) trajectories. The
arena's validator processes and ``shoparena run`` / ``shoparena validate`` all sit on it."""

from shoparena.validator.core import AgentSpec, EvaluationSummary, ProblemLine, ValidatorConfig, evaluate

__all__ = ["AgentSpec", "EvaluationSummary", "ProblemLine", "ValidatorConfig", "evaluate"]
