"""Normalisation (``docs/corpus-design.md``): every trajectory source → canonical
:class:`~shoparena.corpus.types.Trajectory` rows, and rows back to every source format.

Sources: store records (:func:`from_record`, :func:`iter_store`), upstream rollout files (:func:`iter_rollouts`),
ORO ``output.jsonl`` envelopes (:func:`iter_envelopes`), ORO SFT rows (:func:`iter_oro_sft`,
:func:`from_oro_sft`). Every reader streams and turns each malformed input into a counted
:class:`~shoparena.corpus.types.Rejection` (``stage="normalize"``, a stable ``reason`` code, ``where`` =
``file:line`` or the record id), never an exception. Back: :func:`to_steps`, :func:`to_envelope`,
:func:`to_oro_sft`, :func:`to_openai`. :func:`text_axis` is the axis heuristic for traces without a call log.

Reason codes: ``bad_json``, ``not_object``, ``missing_keys``, ``bad_trace``, ``empty_trace``, ``bad_rollout``,
``bad_envelope``, ``bad_step``, ``bad_message``, ``bad_tools``, ``bad_tool_call``, ``bad_tool_response``,
``unpaired_tool_call_id``, ``extra_tool_result``, ``unknown_problem``, and for step records that are not valid
agent output the reason codes of :func:`shoparena.env.output.validate_steps` (see :data:`REASONS`).
"""

from __future__ import annotations

from shoparena.corpus.normalize._common import STAGE, infer_tools
from shoparena.corpus.normalize.axis import NON_SEARCH_TOOLS, text_axis
from shoparena.corpus.normalize.back import to_envelope, to_openai, to_steps
from shoparena.corpus.normalize.oro_sft import from_oro_sft, iter_oro_sft, qwen3_text, to_oro_sft
from shoparena.corpus.normalize.steps import from_steps, iter_envelopes, iter_rollouts
from shoparena.corpus.normalize.store import PROVENANCE_KEYS, from_record, iter_store, store_row_id
from shoparena.env.output import REASON_CODES as OUTPUT_REASON_CODES

REASONS: tuple[str, ...] = (
    "bad_json", "not_object", "missing_keys", "bad_trace", "empty_trace", "bad_rollout", "bad_envelope",
    "bad_message", "bad_tools", "bad_tool_call", "bad_tool_response", "unpaired_tool_call_id",
    "extra_tool_result", "unknown_problem", *OUTPUT_REASON_CODES,
)
"""Every rejection reason this stage can give: its own, and for step records the agent-output codes of
:func:`shoparena.env.output.validate_steps` (``bad_step`` among them)."""

__all__ = [
    "NON_SEARCH_TOOLS", "PROVENANCE_KEYS", "REASONS", "STAGE", "from_oro_sft", "from_record", "from_steps",
    "infer_tools", "iter_envelopes", "iter_oro_sft", "iter_rollouts", "iter_store", "qwen3_text", "store_row_id",
    "text_axis", "to_envelope", "to_openai", "to_oro_sft", "to_steps",
]
