"""Corpus exports: SFT, KTO and GRPO training sets in JSONL, Parquet and a ``datasets`` directory, and the export's
``manifest.json`` (``docs/training.md`` §2 data contract, §3.1 per-step tool-match reward, §4.3 KTO rows, §4.4 GRPO).

One module per trainer format — :mod:`~shoparena.corpus.export.sft`, :mod:`~shoparena.corpus.export.kto`,
:mod:`~shoparena.corpus.export.grpo` — over :mod:`~shoparena.corpus.export.common` (rows, writers, readers) and
:mod:`~shoparena.corpus.export.manifest`. Re-exports :func:`write_sft`, :func:`write_kto`, :func:`write_grpo`,
:func:`write_manifest`, their readers (:func:`read_jsonl_rows`, :func:`read_parquet_rows`,
:func:`read_dataset_rows`, :func:`read_manifest`), :func:`training_hash` and :func:`kto_label`. Each writer
makes ``<name>.jsonl``, ``<name>.parquet`` and — when ``datasets`` is importable (the ``train`` extra) —
``<name>_dataset/`` (``Dataset.save_to_disk``); without it the directory is skipped with a note in the result.
Every file is written atomically (temp file or directory renamed into place).

Row forms (the JSONL row is *the* row; the other formats hold the same values):

- SFT: ``{"id", "problem_id", "bucket", "source", "messages", "tools"}`` — ``messages`` in OpenAI form, tool-call
  ``arguments`` JSON **strings** (sent byte for byte as the trajectory holds them; a dict is encoded once),
  ``tools`` the nested OpenAI tool list as one JSON string (pitfall 1 of ``docs/training.md`` §7: Arrow would otherwise
  unify argument dicts and tool schemas across rows).
- KTO (TRL ``KTOTrainer``, unpaired): one row per assistant turn — ``prompt`` = every message before the turn,
  ``completion`` = ``[that assistant turn]`` only (TRL trains every completion token), ``label`` = bool from
  :func:`kto_label` (the trajectory's strict success, judge value and axis), ``tools`` JSON string, plus ``id``,
  ``traj_id``, ``problem_id``, ``bucket``, ``turn`` (message index). ``turns="last"`` keeps one row per trajectory
  (its final assistant turn).
- GRPO (TRL ``GRPOTrainer`` prompt set): one row per problem — ``prompt`` = the teacher reference's leading
  system message(s) and first user message, ``tools``, ``problem_id``, ``bucket``, ``gt_ids`` (outcome reward),
  ``problem`` (the problem's JSONL row as a JSON string, for strict scoring), ``reference_id`` and
  ``reference_steps`` (per assistant turn of the teacher, its tool calls ``[{"name", "arguments"}]``; ``[]`` for
  a turn without calls — the per-step tool-match reward of §3.1 scores such a step 0).

Parquet stores every list/dict column as a compact JSON string (schema metadata ``shoparena.json_fields`` names
them) so Arrow never infers struct types; :func:`read_parquet_rows` decodes them and returns exactly the JSONL rows.
Messages are exported with trainer keys only (``role``, ``content``, ``reasoning_content``, ``tool_calls``,
``tool_call_id``, ``name``) and without null-valued keys. Rows are sorted (problem id, trajectory id, turn), so
the same input gives the same JSONL and Parquet bytes. Malformed rows are counted rejections, never exceptions; a
row outside the requested partition of a given split manifest raises :class:`~shoparena.errors.LeakError`.
"""

from __future__ import annotations

from shoparena.corpus.export.common import (
    EXPORT_FORMAT,
    MANIFEST_NAME,
    SCHEMAS,
    ExportResult,
    datasets_available,
    read_dataset_rows,
    read_jsonl_rows,
    read_parquet_rows,
)
from shoparena.corpus.export.grpo import write_grpo
from shoparena.corpus.export.kto import kto_label, write_kto
from shoparena.corpus.export.manifest import jsonable, read_manifest, training_hash, write_manifest
from shoparena.corpus.export.sft import write_sft

__all__ = ["EXPORT_FORMAT", "MANIFEST_NAME", "SCHEMAS", "ExportResult", "datasets_available", "jsonable", "kto_label",
           "read_dataset_rows", "read_jsonl_rows", "read_manifest", "read_parquet_rows", "training_hash", "write_grpo",
           "write_kto", "write_manifest", "write_sft"]
