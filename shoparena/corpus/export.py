"""Corpus exports: SFT, KTO and GRPO training sets in JSONL, Parquet and a ``datasets`` directory, and the export's
``manifest.json`` (``training.md`` §2 data contract, §3.1 per-step tool-match reward, §4.3 KTO rows, §4.4 GRPO).

Owns :func:`write_sft`, :func:`write_kto`, :func:`write_grpo`, :func:`write_manifest`, their readers
(:func:`read_jsonl_rows`, :func:`read_parquet_rows`, :func:`read_dataset_rows`, :func:`read_manifest`) and
:func:`kto_label`. Each writer makes ``<name>.jsonl``, ``<name>.parquet`` and — when ``datasets`` is importable (the
``train`` extra) — ``<name>_dataset/`` (``Dataset.save_to_disk``); without it the directory is skipped with a note
in the result. Every file is written atomically (temp file or directory renamed into place).

Row forms (the JSONL row is *the* row; the other formats hold the same values):

- SFT: ``{"id", "problem_id", "bucket", "source", "messages", "tools"}`` — ``messages`` in OpenAI form, tool-call
  ``arguments`` JSON **strings** (sent byte for byte as the trajectory holds them; a dict is encoded once),
  ``tools`` the nested OpenAI tool list as one JSON string (pitfall 1 of ``training.md`` §7: Arrow would otherwise
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

import hashlib
import importlib.util
import os
import platform
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from shoparena import __version__
from shoparena._io import atomic_write, iter_lines, write_jsonl
from shoparena.corpus.split import EXPORTABLE, SplitManifest
from shoparena.corpus.types import Rejection, StageReport, Trajectory
from shoparena.env.tools import normalize_tool_specs
from shoparena.errors import ConfigError, DataError, LeakError, NotFoundError
from shoparena.tasks.loader import problem_row
from shoparena.tasks.types import Problem

__all__ = ["EXPORT_FORMAT", "MANIFEST_NAME", "ExportResult", "kto_label", "read_dataset_rows", "read_jsonl_rows",
           "read_manifest", "read_parquet_rows", "write_grpo", "write_kto", "write_manifest", "write_sft"]

EXPORT_FORMAT = "shoparena-corpus-export/1"
MANIFEST_NAME = "manifest.json"
MESSAGE_KEYS: tuple[str, ...] = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
ROLES = frozenset({"system", "user", "assistant", "tool"})

_S, _J = pa.string(), "json"
#: Column → Arrow type per export kind; ``"json"`` columns hold lists/dicts stored as JSON strings in Parquet.
SCHEMAS: dict[str, dict[str, Any]] = {
    "sft": {"id": _S, "problem_id": _S, "bucket": _S, "source": _S, "messages": _J, "tools": _S},
    "kto": {"prompt": _J, "completion": _J, "label": pa.bool_(), "tools": _S, "id": _S, "traj_id": _S,
            "problem_id": _S, "bucket": _S, "turn": pa.int64()},
    "grpo": {"prompt": _J, "tools": _S, "problem_id": _S, "bucket": _S, "gt_ids": _J, "problem": _S,
             "reference_id": _S, "reference_steps": _J},
}


class _BadRow(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class ExportResult:
    """What one writer did: rows written, files (relative to ``out_dir``) with their sha256, the stage report
    (rejections by reason; ``notes`` carry kind-specific figures) and notes such as a skipped ``datasets`` dir."""

    kind: str
    name: str
    out_dir: Path
    rows: int = 0
    files: dict[str, str] = field(default_factory=dict)
    report: StageReport = field(default_factory=lambda: StageReport(stage="export"))
    rejections: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def path(self, fmt: Literal["jsonl", "parquet", "dataset"]) -> Path:
        return self.out_dir / (f"{self.name}_dataset" if fmt == "dataset" else f"{self.name}.{fmt}")

    def reject(self, reason: str, message: str, where: str, traj_id: str | None = None) -> None:
        self.report.reject(reason, where)
        self.rejections.append(Rejection(stage=self.report.stage, reason=reason, message=message, where=where,
                                         traj_id=traj_id))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "rows": self.rows, "files": dict(sorted(self.files.items())),
                "report": self.report.to_dict(), "notes": list(self.notes)}


# ─────────────────────────────────────────────────────────────────────────────── row building

def _arguments(raw: Any) -> str:
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _BadRow("bad_arguments", f"tool-call arguments are not JSON: {raw[:80]!r}") from exc
        return raw
    if isinstance(raw, dict | list):
        return orjson.dumps(raw).decode()
    raise _BadRow("bad_arguments", f"tool-call arguments are a {type(raw).__name__}")


def _tool_call(call: Any) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise _BadRow("bad_tool_call", f"tool call without a function name: {str(call)[:80]}")
    out: dict[str, Any] = {}
    if call.get("id") is not None:
        out["id"] = str(call["id"])
    out["type"] = call.get("type") or "function"
    out["function"] = {"name": fn["name"], "arguments": _arguments(fn.get("arguments"))}
    return out


def _message(m: Any) -> dict[str, Any]:
    if not isinstance(m, Mapping) or m.get("role") not in ROLES:
        raise _BadRow("bad_message", f"not a chat message: {str(m)[:80]}")
    out: dict[str, Any] = {}
    for key in MESSAGE_KEYS:
        value = m.get(key)
        if value is None:
            continue
        if key == "tool_calls":
            if not isinstance(value, list):
                raise _BadRow("bad_tool_call", "tool_calls is not a list")
            if value:
                out[key] = [_tool_call(c) for c in value]
        elif key == "content" and m["role"] == "tool" and not isinstance(value, str):
            out[key] = orjson.dumps(value).decode()
        else:
            out[key] = value
    return out


def _messages(t: Trajectory) -> list[dict[str, Any]]:
    if not isinstance(t.messages, list) or not t.messages:
        raise _BadRow("no_messages", "trajectory has no messages")
    msgs = [_message(m) for m in t.messages]
    if not any(m["role"] == "assistant" for m in msgs):
        raise _BadRow("no_assistant", "trajectory has no assistant turn")
    try:
        orjson.dumps(msgs)
    except TypeError as exc:
        raise _BadRow("not_json", f"messages are not JSON-serialisable: {exc}") from exc
    return msgs


def _tools(t: Trajectory) -> str:
    try:
        return orjson.dumps(normalize_tool_specs(list(t.tools or []))).decode()
    except (TypeError, AttributeError, KeyError) as exc:
        raise _BadRow("bad_tools", f"tools are not a list of tool specs: {exc}") from exc


def _guard(items: Iterable[tuple[str, str | None]], manifest: SplitManifest | None, partition: str,
           what: str) -> None:
    """Raise :class:`LeakError` when an item's problem is not in ``partition`` of ``manifest``."""
    if manifest is None:
        return
    bad: dict[str, list[str]] = {}
    for where, pid in items:
        part = manifest.partition(pid) if pid is not None else None
        if part != partition:
            bad.setdefault(part or "unassigned", []).append(where)
    if bad:
        detail = "; ".join(f"{len(v)} in {k} (e.g. {', '.join(sorted(v)[:3])})" for k, v in sorted(bad.items()))
        raise LeakError(f"refusing to export {what} outside the {partition} partition: {detail}",
                        hint="route rows with assign_rows() before exporting", violations=sorted(bad))


def _check_partition(manifest: SplitManifest | None, partition: str) -> None:
    if manifest is not None and partition not in EXPORTABLE:
        raise ConfigError(f"partition {partition!r} cannot be exported", hint=f"use one of {list(EXPORTABLE)}")


def _dedup(rows: Iterable[Trajectory], result: ExportResult) -> list[Trajectory]:
    seen: dict[str, Trajectory] = {}
    for t in rows:
        result.report.seen += 1
        if t.traj_id in seen:
            result.reject("duplicate", f"trajectory {t.traj_id} appears twice", t.traj_id, t.traj_id)
            continue
        seen[t.traj_id] = t
    return sorted(seen.values(), key=lambda t: (t.problem_id or "", t.traj_id))


# ─────────────────────────────────────────────────────────────────────────────── writing

def _sha_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _parquet_schema(kind: str) -> pa.Schema:
    cols = SCHEMAS[kind]
    json_fields = [c for c, t in cols.items() if t == _J]
    return pa.schema([pa.field(c, _S if t == _J else t) for c, t in cols.items()],
                     metadata={b"shoparena.json_fields": ",".join(json_fields).encode(),
                               b"shoparena.format": f"{EXPORT_FORMAT}:{kind}".encode()})


def _write_parquet(path: Path, kind: str, rows: Sequence[dict[str, Any]]) -> None:
    schema = _parquet_schema(kind)
    json_cols = {c for c, t in SCHEMAS[kind].items() if t == _J}
    table_rows = [{c: (orjson.dumps(r[c]).decode() if c in json_cols and r.get(c) is not None else r.get(c))
                   for c in schema.names} for r in rows]
    with atomic_write(path, "wb") as raw, pq.ParquetWriter(raw, schema, compression="zstd") as writer:
        writer.write_table(pa.Table.from_pylist(table_rows, schema=schema))


def datasets_available() -> bool:
    """Whether the ``datasets`` package (the ``train`` extra) can be imported."""
    return importlib.util.find_spec("datasets") is not None


def _replace_dir(tmp: Path, dest: Path) -> None:
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def _write_dataset(path: Path, rows: Sequence[dict[str, Any]], result: ExportResult) -> None:
    if not datasets_available():
        if path.exists():
            shutil.rmtree(path)
            result.notes.append(f"removed the stale {path.name}/ (datasets is not installed)")
        result.notes.append(f"datasets is not installed (the 'train' extra): {path.name}/ not written; "
                            f"load {path.stem.removesuffix('_dataset')}.jsonl instead")
        return
    import datasets

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        datasets.disable_progress_bars()  # a library write, not an interactive step
        ds = datasets.Dataset.from_list(list(rows))
        # the fingerprint is random by default; derive it from the rows so the same rows give the same bytes
        ds._fingerprint = hashlib.sha256(orjson.dumps(list(rows), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
        ds.save_to_disk(str(tmp))
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.notes.append(f"{path.name}/ written (datasets {datasets.__version__})")


def _finish(result: ExportResult, rows: list[dict[str, Any]]) -> ExportResult:
    result.out_dir.mkdir(parents=True, exist_ok=True)
    jsonl, parquet, ds = result.path("jsonl"), result.path("parquet"), result.path("dataset")
    write_jsonl(jsonl, rows)
    _write_parquet(parquet, result.kind, rows)
    _write_dataset(ds, rows, result)
    result.rows = len(rows)
    result.report.kept = len(rows)
    for p in (jsonl, parquet):
        result.files[p.name] = _sha_file(p)
    if ds.is_dir():
        for f in sorted(ds.rglob("*")):
            if f.is_file():
                result.files[f.relative_to(result.out_dir).as_posix()] = _sha_file(f)
    return result


# ─────────────────────────────────────────────────────────────────────────────── SFT

def write_sft(rows: Iterable[Trajectory], out_dir: str | os.PathLike[str], *, name: str = "sft",
              manifest: SplitManifest | None = None, partition: str = "train") -> ExportResult:
    """Write SFT rows (module docstring) as ``<name>.jsonl``, ``<name>.parquet`` and ``<name>_dataset/``. With a
    split ``manifest``, every row must belong to ``partition`` (else :class:`LeakError`)."""
    _check_partition(manifest, partition)
    result = ExportResult(kind="sft", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    kept = _dedup(rows, result)
    _guard(((t.traj_id, t.problem_id) for t in kept), manifest, partition, "SFT rows")
    out: list[dict[str, Any]] = []
    for t in kept:
        try:
            out.append({"id": t.traj_id, "problem_id": t.problem_id, "bucket": t.bucket, "source": t.source,
                        "messages": _messages(t), "tools": _tools(t)})
        except _BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
    return _finish(result, out)


# ─────────────────────────────────────────────────────────────────────────────── KTO

def kto_label(t: Trajectory, *, min_judge: float = 0.7) -> tuple[bool | None, str]:
    """The KTO label of ``t``'s assistant turns and why (``training.md`` §3, [rec]): desirable = a strictly
    successful agentic trace whose judge value (``judge_score``, else ``coefficient``) is ≥ ``min_judge`` or
    unknown; undesirable = a failed trace or a sub-task (axis ``B`` / ``mixed``) trace. ``None`` (no label) for an
    unscored trace or a success judged below ``min_judge``."""
    if t.axis in ("B", "mixed"):
        return False, "sub_task"
    if t.success is None:
        return None, "unscored"
    if not t.success:
        return False, "failed"
    judge = t.judge_score if t.judge_score is not None else t.coefficient
    if judge is None:
        return True, "success_unjudged"
    if judge >= min_judge:
        return True, "success"
    return None, "judge_below_min"


def write_kto(rows: Iterable[Trajectory], out_dir: str | os.PathLike[str], *, name: str = "kto",
              min_judge: float = 0.7, turns: Literal["all", "last"] = "all", manifest: SplitManifest | None = None,
              partition: str = "train") -> ExportResult:
    """Write KTO rows (module docstring): one per assistant turn (``turns="all"``) or per trajectory (``"last"``).
    Unlabelled trajectories are counted (``unscored``, ``judge_below_min``); ``report.notes`` holds the class
    balance (``desirable`` / ``undesirable`` rows) and the label reasons."""
    _check_partition(manifest, partition)
    result = ExportResult(kind="kto", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    kept = _dedup(rows, result)
    _guard(((t.traj_id, t.problem_id) for t in kept), manifest, partition, "KTO rows")
    out: list[dict[str, Any]] = []
    why: dict[str, int] = {}
    empty = 0
    for t in kept:
        label, reason = kto_label(t, min_judge=min_judge)
        if label is None:
            result.reject(reason, f"no KTO label ({reason})", t.traj_id, t.traj_id)
            continue
        try:
            msgs, tools = _messages(t), _tools(t)
        except _BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
            continue
        turns_at = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
        idx = [i for i in turns_at if msgs[i].get("content") or msgs[i].get("reasoning_content")
               or msgs[i].get("tool_calls")]
        empty += len(turns_at) - len(idx)
        if not idx:
            result.reject("no_judged_turn", "no non-empty assistant turn after a prompt", t.traj_id, t.traj_id)
            continue
        why[reason] = why.get(reason, 0) + 1
        for i in idx if turns == "all" else idx[-1:]:
            out.append({"prompt": msgs[:i], "completion": [msgs[i]], "label": label, "tools": tools,
                        "id": f"{t.traj_id}:{i}", "traj_id": t.traj_id, "problem_id": t.problem_id,
                        "bucket": t.bucket, "turn": i})
    desirable = sum(r["label"] for r in out)
    result.report.notes = {"desirable": desirable, "undesirable": len(out) - desirable,
                           "trajectories_by_label_reason": dict(sorted(why.items())), "empty_turns_skipped": empty,
                           "turns": turns,
                           "min_judge": min_judge}
    return _finish(result, out)


# ─────────────────────────────────────────────────────────────────────────────── GRPO

def _reference_rank(t: Trajectory) -> tuple[Any, ...]:
    judge = t.judge_score if t.judge_score is not None else t.coefficient
    return (-(judge if judge is not None else -1.0), len(t.assistant_messages()), t.traj_id)


def _reference_steps(msgs: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
    return [[{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in m.get("tool_calls", [])]
            for m in msgs if m["role"] == "assistant"]


def write_grpo(rows: Iterable[Trajectory], problems: Iterable[Problem] | Mapping[str, Problem],
               out_dir: str | os.PathLike[str], *, name: str = "grpo", require_success: bool = True,
               manifest: SplitManifest | None = None, partition: str = "train") -> ExportResult:
    """Write one GRPO prompt row per problem of ``problems`` (module docstring), its teacher reference chosen among
    ``rows`` of that problem: strictly successful ones (any, with ``require_success=False``), highest judge value,
    then fewest assistant turns, then trajectory id. Counted reasons: ``unknown_problem`` / ``not_success`` /
    malformed-row codes (rows), ``no_reference`` / ``no_prompt`` (problems); ``report.seen`` / ``kept`` count
    problems, ``report.notes["rows_seen"]`` the candidate rows."""
    _check_partition(manifest, partition)
    result = ExportResult(kind="grpo", name=name, out_dir=Path(out_dir), report=StageReport(stage=f"export:{name}"))
    by_id = dict(problems) if isinstance(problems, Mapping) else {p.problem_id: p for p in problems}
    _guard(((pid, pid) for pid in by_id), manifest, partition, "GRPO problems")
    refs: dict[str, list[tuple[Trajectory, list[dict[str, Any]], str]]] = {}
    for t in _dedup(rows, result):
        if t.problem_id not in by_id:
            result.reject("unknown_problem", f"problem {t.problem_id} is not among the GRPO problems", t.traj_id,
                          t.traj_id)
            continue
        if require_success and t.success is not True:
            result.reject("not_success", "a teacher reference must be strictly successful", t.traj_id, t.traj_id)
            continue
        try:
            refs.setdefault(t.problem_id, []).append((t, _messages(t), _tools(t)))
        except _BadRow as bad:
            result.reject(bad.reason, bad.message, t.traj_id, t.traj_id)
    out: list[dict[str, Any]] = []
    for pid in sorted(by_id):
        cands = refs.get(pid)
        if not cands:
            result.reject("no_reference", f"problem {pid} has no usable teacher trajectory", pid)
            continue
        t, msgs, tools = min(cands, key=lambda c: _reference_rank(c[0]))
        first_user = next((i for i, m in enumerate(msgs) if m["role"] == "user"), None)
        if first_user is None or any(m["role"] != "system" for m in msgs[:first_user]):
            result.reject("no_prompt", f"reference {t.traj_id} does not open with system/user messages", pid,
                          t.traj_id)
            continue
        p = by_id[pid]
        out.append({"prompt": msgs[:first_user + 1], "tools": tools, "problem_id": pid, "bucket": p.bucket,
                    "gt_ids": list(p.gt_ids()), "problem": orjson.dumps(problem_row(p)).decode(),
                    "reference_id": t.traj_id, "reference_steps": _reference_steps(msgs[first_user + 1:])})
    result.report.notes = {"rows_seen": result.report.seen, "problems": len(by_id), "with_reference": len(out),
                           "require_success": require_success}
    result.report.seen = len(by_id)
    return _finish(result, out)


# ─────────────────────────────────────────────────────────────────────────────── readers

def read_jsonl_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``.jsonl`` file."""
    return [orjson.loads(line) for _n, line in iter_lines(path)]


def read_parquet_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``.parquet`` file, JSON-string columns decoded (equal to the JSONL rows)."""
    pf = pq.ParquetFile(path)
    meta = pf.schema_arrow.metadata or {}
    json_cols = [c for c in meta.get(b"shoparena.json_fields", b"").decode().split(",") if c]
    rows = pf.read().to_pylist()
    for row in rows:
        for c in json_cols:
            if row.get(c) is not None:
                row[c] = orjson.loads(row[c])
    return rows


def _drop_none(value: Any) -> Any:
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def read_dataset_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``datasets`` directory; keys Arrow added as null inside nested messages are dropped
    again (exported messages never hold null-valued keys), so the rows equal the JSONL rows."""
    if not datasets_available():
        raise ConfigError("reading a datasets directory needs the datasets package",
                          hint="pip install 'shoparena[train]', or read the .jsonl / .parquet export")
    import datasets

    ds = datasets.load_from_disk(str(path))
    return [{k: _drop_none(v) if isinstance(v, list | dict) else v for k, v in row.items()} for row in ds]


# ─────────────────────────────────────────────────────────────────────────────── manifest

def jsonable(value: Any) -> Any:
    """Plain JSON data of a report part (models, stage reports, counters, manifests, paths); sets sorted."""
    if isinstance(value, SplitManifest):
        return value.hashes()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    if isinstance(value, Rejection):
        return {"stage": value.stage, "reason": value.reason, "message": value.message, "where": value.where}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if isinstance(value, Path):
        return str(value)
    return value


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(), "shoparena": __version__}
    for pkg in ("pyarrow", "orjson", "pydantic", "datasets"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _file_hashes(out_dir: Path) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for f in sorted(out_dir.rglob("*")):
        rel = f.relative_to(out_dir)
        if not f.is_file() or rel.as_posix() == MANIFEST_NAME or any(part.startswith(".") for part in rel.parts):
            continue
        files[rel.as_posix()] = {"sha256": _sha_file(f), "bytes": f.stat().st_size}
    return files


def write_manifest(out_dir: str | os.PathLike[str], *, sources: Any = None, filter_config: Any = None,
                   reports: Sequence[Any] = (), split: SplitManifest | None = None,
                   exports: Sequence[ExportResult] = (), **extra: Any) -> Path:
    """Atomically write ``<out_dir>/manifest.json``: format, package versions, ``sources`` (source records),
    ``filter_config``, ``counts`` (every stage report: seen / kept / rejected by reason), ``split`` (the split
    manifest's hashes and sizes, guard version), ``exports`` (each export's rows, files and report), any ``extra``
    parts, ``files`` (sha256 and size of every file under ``out_dir``) and ``manifest_hash`` (sha256 of the rest).
    No timestamps: the same export gives the same manifest bytes."""
    root = Path(out_dir)
    if not root.is_dir():
        raise NotFoundError(f"export directory {root} does not exist", hint="write the exports first")
    body: dict[str, Any] = {
        "format": EXPORT_FORMAT, "versions": _versions(), "sources": jsonable(sources),
        "filter_config": jsonable(filter_config), "counts": [jsonable(r) for r in reports],
        "split": jsonable(split), "exports": {e.name: jsonable(e) for e in exports},
        **{k: jsonable(v) for k, v in sorted(extra.items())}, "files": _file_hashes(root)}
    body["manifest_hash"] = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    path = root / MANIFEST_NAME
    with atomic_write(path, "wb") as fh:
        fh.write(orjson.dumps(body, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")
    return path


def read_manifest(out_dir: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """``manifest.json`` of an export directory; with ``verify``, the manifest hash and every listed file's hash
    are re-checked (a changed, missing or unlisted file raises :class:`DataError`)."""
    root = Path(out_dir)
    path = root / MANIFEST_NAME
    if not path.is_file():
        raise NotFoundError(f"no {MANIFEST_NAME} in {root}", hint="write it with write_manifest()")
    try:
        body = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON: {exc}") from exc
    if not verify:
        return body
    stored = body.get("manifest_hash")
    rest = {k: v for k, v in body.items() if k != "manifest_hash"}
    problems: list[str] = []
    if stored != hashlib.sha256(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)).hexdigest():
        problems.append("manifest_hash does not match the manifest")
    listed, actual = body.get("files") or {}, _file_hashes(root)
    for rel in sorted(set(listed) | set(actual)):
        if rel not in actual:
            problems.append(f"{rel} is missing")
        elif rel not in listed:
            problems.append(f"{rel} is not in the manifest")
        elif listed[rel].get("sha256") != actual[rel]["sha256"]:
            problems.append(f"{rel} changed since the manifest was written")
    if problems:
        raise DataError(f"{path}: export does not match its manifest ({len(problems)} problems): {problems[0]}",
                        hint="re-run the export instead of editing its files")
    return body
