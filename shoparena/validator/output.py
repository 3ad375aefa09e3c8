"""A sandbox envelope → the envelope a record is made from: agent output checked once, defects as data.

:func:`check_envelope` is the validator's single use of :func:`shoparena.env.output.validate_steps`: every
evaluation (``shoparena validate``, and ``shoparena run`` through the same core) passes each problem's envelope
through it before scoring, judging and recording. A dialogue that is not a valid step list becomes a ``FAILED``
envelope without dialogue whose error type is ``INVALID_OUTPUT:<code>`` (the scorer renders it into the record's
``outcome.error`` as ``INVALID_OUTPUT:<code>: <message> (at <path>)``); the judge never sees it, the store never
holds it, and the evaluation goes on with the next problem.

Output defects the sandbox already caught on its side of the wall (agent_main returned a non-list, a value
``json.dumps`` refused, a non-object step, an envelope over ``output_mb``) keep their message and get the same
reason codes here (:data:`SANDBOX_REASONS`), so every malformed output of a record carries one code.
"""

from __future__ import annotations

from shoparena.env.output import OutputDefect, ValidSteps, validate_steps
from shoparena.validator.sandbox.types import Envelope

__all__ = ["SANDBOX_REASONS", "check_envelope", "sandbox_defect"]

SANDBOX_REASONS: tuple[tuple[str, str, str], ...] = (
    # (error type, text in the message, reason code), first match wins; see sandbox/entry.py and supervise.py
    ("OutputTooLarge", "", "too_large"),
    ("AgentError", "not a list of steps", "not_a_list"),
    ("MalformedEnvelope", "not a list of step objects", "step_not_object"),
    ("MalformedEnvelope", "carries no dialogue list", "not_a_list"),
    ("ValueError", "Out of range float", "non_finite_number"),
    ("ValueError", "could not be encoded as JSON", "not_json"),
    ("TypeError", "could not be encoded as JSON", "not_json"),
    ("RecursionError", "JSON", "too_deep"),
)


def sandbox_defect(error: dict[str, str] | None) -> OutputDefect | None:
    """The output defect a sandbox-side error stands for (:data:`SANDBOX_REASONS`), or None."""
    if not error:
        return None
    kind, message = str(error.get("type", "")), str(error.get("message", ""))
    for want, text, code in SANDBOX_REASONS:
        if kind == want and text in message:
            return OutputDefect(code, message[:1000], "output")
    return None


def check_envelope(envelope: Envelope) -> tuple[Envelope, OutputDefect | None]:
    """``envelope`` with its dialogue checked: unchanged when valid (or when it failed for another reason),
    else a ``FAILED`` envelope carrying the defect. Never raises."""
    defect = sandbox_defect(envelope.error)
    if defect is None and envelope.dialogue is not None:
        checked = validate_steps(envelope.dialogue)
        if isinstance(checked, ValidSteps):
            return envelope, None
        defect = checked
    if defect is None:
        return envelope, None
    if envelope.status == "TIMED_OUT":  # the timeout is the reason; the partial dialogue is not kept
        return envelope.model_copy(update={"dialogue": None}), defect
    error = {"type": defect.reason, "message": f"{defect.message} (at {defect.path})"}
    return envelope.model_copy(update={"status": "FAILED", "error": error, "dialogue": None}), defect
